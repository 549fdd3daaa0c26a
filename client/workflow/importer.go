package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"castiron/client"
)

// ImportOptions are `castiron import`'s switches.
type ImportOptions struct {
	Introspect, Provide bool
}

// plan is what import will do with one file entry.
type plan struct {
	spec     *Spec
	existing *client.Node     // nil: create
	ops      []client.PatchOp // for an existing node
	ports    []map[string]any // ports to create (addresses not known yet)
	err      error            // matching failed
}

// inventory indexes the nodes and ports already registered.
type inventory struct {
	byUUID map[string]*client.Node
	byMAC  map[string]string // address -> node uuid
	byBMC  map[string]string // address:port -> node uuid
}

func loadInventory(ctx context.Context, c *client.Client) (*inventory, error) {
	nodes, err := c.ListNodes(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	ports, err := c.ListPorts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list ports: %w", err)
	}
	inv := &inventory{byUUID: map[string]*client.Node{}, byMAC: map[string]string{}, byBMC: map[string]string{}}
	for i := range nodes {
		n := &nodes[i]
		inv.byUUID[n.UUID] = n
		if k := bmcOf(n); k != "" {
			inv.byBMC[k] = n.UUID
		}
	}
	for _, p := range ports {
		if hw, err := net.ParseMAC(p.Address); err == nil {
			inv.byMAC[hw.String()] = p.NodeUUID
		}
	}
	return inv, nil
}

// bmcOf is a registered node's BMC identity, in the same form as Spec.BMC.
func bmcOf(n *client.Node) string {
	str := func(k string) string {
		v, ok := n.DriverInfo[k]
		if !ok || v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	if a := str("ipmi_address"); a != "" {
		port := 623
		if p, err := strconv.Atoi(str("ipmi_port")); err == nil {
			port = p
		}
		return net.JoinHostPort(strings.ToLower(a), strconv.Itoa(port))
	}
	if a := str("redfish_address"); a != "" {
		return strings.ToLower(a) + "#" + str("redfish_system_id")
	}
	return ""
}

// match finds the registered node an entry describes, by uuid, port MAC or
// BMC address:port; two different nodes is an error naming both.
func (inv *inventory) match(s *Spec) (*client.Node, error) {
	found := map[string][]string{} // node uuid -> why
	if s.UUID != "" {
		if n, ok := inv.byUUID[strings.ToLower(s.UUID)]; ok {
			found[n.UUID] = append(found[n.UUID], "uuid")
		}
	}
	for _, mac := range s.MACs() {
		if u, ok := inv.byMAC[mac]; ok {
			found[u] = append(found[u], "MAC "+mac)
		}
	}
	if s.BMC != "" {
		if u, ok := inv.byBMC[s.BMC]; ok {
			found[u] = append(found[u], "BMC "+s.BMC)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	if len(found) > 1 {
		var parts []string
		for u, why := range found {
			label := u
			if n := inv.byUUID[u]; n != nil && n.Name != "" {
				label = fmt.Sprintf("%s (%s)", n.Name, u)
			}
			parts = append(parts, fmt.Sprintf("node %s by %s", label, strings.Join(why, ", ")))
		}
		sort.Strings(parts)
		return nil, fmt.Errorf("matches more than one registered node: %s", strings.Join(parts, " and "))
	}
	for u := range found {
		if n := inv.byUUID[u]; n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("a port of this entry belongs to node %s, which cannot be read", u)
	}
	return nil, nil
}

// planFor decides create or update for an entry.
func (inv *inventory) planFor(s *Spec) *plan {
	p := &plan{spec: s}
	n, err := inv.match(s)
	if err != nil {
		p.err = err
		return p
	}
	for _, port := range s.Ports {
		if _, ok := inv.byMAC[port["address"].(string)]; !ok {
			p.ports = append(p.ports, port)
		}
	}
	if n == nil {
		return p
	}
	p.existing = n
	add := func(path string, want any) {
		p.ops = append(p.ops, client.PatchOp{Op: "add", Path: path, Value: want})
	}
	if s.Name != "" && s.Name != n.Name {
		add("/name", s.Name)
	}
	if s.Driver != n.Driver {
		add("/driver", s.Driver)
	}
	if s.ResourceClass != "" && s.ResourceClass != n.ResourceClass {
		add("/resource_class", s.ResourceClass)
	}
	diff := func(prefix string, want, have map[string]any) {
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			// Secrets come back masked: they cannot be compared, so they
			// are always sent again (a corrected password must take).
			if h, ok := have[k]; ok && h != "******" && sameJSON(h, want[k]) {
				continue
			}
			add(prefix+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), want[k])
		}
	}
	diff("/driver_info", s.DriverInfo, n.DriverInfo)
	diff("/properties", s.Properties, n.Properties)
	return p
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}

// Import registers (or updates) every entry, then moves new nodes enroll ->
// manageable and, if asked, introspects and provides them. Nodes found
// available or active are left where they are.
func (r *Runner) Import(ctx context.Context, specs []*Spec, o ImportOptions) ([]Result, error) {
	inv, err := loadInventory(ctx, r.Client)
	if err != nil {
		return nil, err
	}
	plans := make([]*plan, len(specs))
	labels := make([]string, len(specs))
	for i, s := range specs {
		plans[i] = inv.planFor(s)
		labels[i] = s.Label()
	}
	return r.each(ctx, labels, func(ctx context.Context, i int, t Task) Result {
		return r.importOne(ctx, t, plans[i], o)
	}), nil
}

func (r *Runner) importOne(ctx context.Context, t Task, p *plan, o ImportOptions) Result {
	res := Result{Label: p.spec.Label()}
	if p.err != nil {
		res.LastError = p.err.Error()
		return res
	}
	var n *client.Node
	var err error
	switch {
	case p.existing == nil:
		t.State("creating")
		fields := map[string]any{"driver": p.spec.Driver}
		if p.spec.Name != "" {
			fields["name"] = p.spec.Name
		}
		if p.spec.UUID != "" {
			fields["uuid"] = strings.ToLower(p.spec.UUID)
		}
		if len(p.spec.DriverInfo) > 0 {
			fields["driver_info"] = p.spec.DriverInfo
		}
		if len(p.spec.Properties) > 0 {
			fields["properties"] = p.spec.Properties
		}
		if p.spec.ResourceClass != "" {
			fields["resource_class"] = p.spec.ResourceClass
		}
		n, err = r.Client.CreateNode(ctx, fields)
		res.Action = "created"
	case len(p.ops) > 0:
		t.State("updating")
		res.UUID = p.existing.UUID
		n, err = r.Client.PatchNode(ctx, p.existing.UUID, p.ops)
		res.Action = "updated"
	default:
		n, res.Action = p.existing, "unchanged"
	}
	if err != nil {
		res.State, res.LastError = "", faultOf(err)
		if p.existing != nil {
			res.State = p.existing.ProvisionState
		}
		return res
	}
	res.UUID, res.State = n.UUID, n.ProvisionState
	for _, port := range p.ports {
		t.State("adding port " + port["address"].(string))
		fields := map[string]any{"node_uuid": n.UUID}
		for k, v := range port {
			fields[k] = v
		}
		if _, err := r.Client.CreatePort(ctx, fields); err != nil {
			res.LastError = "port " + port["address"].(string) + ": " + faultOf(err)
			return res
		}
		if res.Action == "unchanged" {
			res.Action = "updated"
		}
	}
	r.advance(ctx, t, n, steps{manage: true, inspect: o.Introspect, provide: o.Provide}, &res)
	return res
}
