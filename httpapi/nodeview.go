package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"castiron/engine"
	"castiron/storage"
)

// viewField is one field of a resource's Ironic view: its name, the
// microversion that introduced it, and how to read it.
type viewField[T any] struct {
	name     string
	minMinor int
	get      func(v *viewCtx, x *T) any
}

type nodeField = viewField[storage.Node]

// indexFields maps field names to their position.
func indexFields[T any](fields []viewField[T]) map[string]int {
	m := map[string]int{}
	for i, f := range fields {
		m[f.name] = i
	}
	return m
}

type viewCtx struct {
	r    *http.Request
	ver  Version
	cond *engine.Conductor
	base string
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ironicTime(*t)
}

// ironicTime formats like Ironic: ISO 8601 with microseconds and +00:00.
func ironicTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000") + "+00:00"
}

func iface(kind string) func(*viewCtx, *storage.Node) any {
	return func(_ *viewCtx, n *storage.Node) any { return engine.InterfaceOf(n, kind) }
}

func (v *viewCtx) subLinks(n *storage.Node, sub string) []link {
	p := "nodes/" + n.UUID + "/" + sub
	return []link{{Href: v.base + "/v1/" + p, Rel: "self"}, {Href: v.base + "/" + p, Rel: "bookmark"}}
}

// provisionStateAt maps the stored state to what an older client expects.
func provisionStateAt(ver Version, s string) any {
	switch {
	case s == string(engine.Available) && !ver.AtLeast(2):
		return nil
	case s == string(engine.InspectWait) && !ver.AtLeast(39):
		return string(engine.Inspecting)
	}
	return s
}

// secretKeys are the driver_info keys Ironic masks (oslo's mask_password
// patterns that apply to BMC credentials).
var secretKeys = []string{"password", "secret", "token", "key", "credential"}

func maskSecrets(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, val := range m {
		lk := strings.ToLower(k)
		masked := false
		for _, s := range secretKeys {
			if strings.Contains(lk, s) && !strings.HasSuffix(lk, "_file") && lk != "deploy_kernel" {
				masked = true
			}
		}
		if masked && val != nil {
			out[k] = "******"
		} else {
			out[k] = val
		}
	}
	return out
}

func maskInstanceInfo(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, val := range m {
		if k == "configdrive" || k == "rescue_password" {
			out[k] = "******"
			continue
		}
		out[k] = val
	}
	return out
}

// nodeFields is the node view in Ironic's field order.
var nodeFields = []nodeField{
	{"uuid", 1, func(_ *viewCtx, n *storage.Node) any { return n.UUID }},
	{"created_at", 1, func(_ *viewCtx, n *storage.Node) any { return ironicTime(n.CreatedAt) }},
	{"updated_at", 1, func(_ *viewCtx, n *storage.Node) any { return timeOrNil(n.UpdatedAt) }},
	{"automated_clean", 47, func(_ *viewCtx, n *storage.Node) any {
		if n.AutomatedClean == nil {
			return nil
		}
		return *n.AutomatedClean
	}},
	{"bios_interface", 40, iface("bios")},
	{"boot_interface", 31, iface("boot")},
	{"boot_mode", 75, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.BootMode) }},
	{"clean_step", 7, func(_ *viewCtx, n *storage.Node) any { return n.CleanStep }},
	{"conductor_group", 46, func(_ *viewCtx, n *storage.Node) any { return n.ConductorGroup }},
	{"console_enabled", 1, func(_ *viewCtx, n *storage.Node) any { return n.ConsoleEnabled }},
	{"console_interface", 31, iface("console")},
	{"deploy_interface", 31, iface("deploy")},
	{"deploy_step", 44, func(_ *viewCtx, n *storage.Node) any { return n.DeployStep }},
	{"description", 51, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Description) }},
	{"driver", 1, func(_ *viewCtx, n *storage.Node) any { return n.Driver }},
	{"driver_info", 1, func(_ *viewCtx, n *storage.Node) any { return maskSecrets(n.DriverInfo) }},
	{"driver_internal_info", 3, func(_ *viewCtx, n *storage.Node) any { return n.DriverInternalInfo }},
	{"extra", 1, func(_ *viewCtx, n *storage.Node) any { return n.Extra }},
	{"fault", 42, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Fault) }},
	{"firmware_interface", 86, iface("firmware")},
	{"inspection_finished_at", 6, func(_ *viewCtx, n *storage.Node) any { return timeOrNil(n.InspectionFinishedAt) }},
	{"inspection_started_at", 6, func(_ *viewCtx, n *storage.Node) any { return timeOrNil(n.InspectionStartedAt) }},
	{"inspect_interface", 31, iface("inspect")},
	{"instance_info", 1, func(_ *viewCtx, n *storage.Node) any { return maskInstanceInfo(n.InstanceInfo) }},
	{"instance_uuid", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.InstanceUUID) }},
	{"last_error", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.LastError) }},
	{"lessee", 65, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Lessee) }},
	{"maintenance", 1, func(_ *viewCtx, n *storage.Node) any { return n.Maintenance }},
	{"maintenance_reason", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.MaintenanceReason) }},
	{"management_interface", 31, iface("management")},
	{"name", 5, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Name) }},
	{"network_data", 66, func(_ *viewCtx, n *storage.Node) any { return n.NetworkData }},
	{"network_interface", 20, iface("network")},
	{"owner", 50, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Owner) }},
	{"parent_node", 83, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.ParentNode) }},
	{"power_interface", 31, iface("power")},
	{"power_state", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.PowerState) }},
	{"properties", 1, func(_ *viewCtx, n *storage.Node) any { return n.Properties }},
	{"protected", 48, func(_ *viewCtx, n *storage.Node) any { return n.Protected }},
	{"protected_reason", 48, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.ProtectedReason) }},
	{"provision_state", 1, func(v *viewCtx, n *storage.Node) any { return provisionStateAt(v.ver, n.ProvisionState) }},
	{"provision_updated_at", 1, func(_ *viewCtx, n *storage.Node) any { return timeOrNil(n.ProvisionUpdatedAt) }},
	{"raid_config", 12, func(_ *viewCtx, n *storage.Node) any { return n.RAIDConfig }},
	{"raid_interface", 31, iface("raid")},
	{"rescue_interface", 38, iface("rescue")},
	{"reservation", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Reservation) }},
	{"resource_class", 21, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.ResourceClass) }},
	{"retired", 61, func(_ *viewCtx, n *storage.Node) any { return n.Retired }},
	{"retired_reason", 61, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.RetiredReason) }},
	{"secure_boot", 75, func(_ *viewCtx, n *storage.Node) any {
		if n.SecureBoot == nil {
			return nil
		}
		return *n.SecureBoot
	}},
	{"service_step", 87, func(_ *viewCtx, n *storage.Node) any { return n.ServiceStep }},
	{"shard", 82, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Shard) }},
	{"storage_interface", 33, iface("storage")},
	{"target_power_state", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.TargetPowerState) }},
	{"target_provision_state", 1, func(v *viewCtx, n *storage.Node) any {
		if n.TargetProvisionState == nil {
			return nil
		}
		return provisionStateAt(v.ver, *n.TargetProvisionState)
	}},
	{"target_raid_config", 12, func(_ *viewCtx, n *storage.Node) any { return n.TargetRAIDConfig }},
	{"traits", 37, func(_ *viewCtx, n *storage.Node) any { return n.Traits }},
	{"vendor_interface", 31, iface("vendor")},
	{"links", 1, func(v *viewCtx, n *storage.Node) any {
		return []link{{Href: v.base + "/v1/nodes/" + n.UUID, Rel: "self"}, {Href: v.base + "/nodes/" + n.UUID, Rel: "bookmark"}}
	}},
	{"conductor", 49, func(v *viewCtx, n *storage.Node) any { return strOrNil(v.cond.ConductorFor(n)) }},
	{"allocation_uuid", 52, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.AllocationUUID) }},
	{"chassis_uuid", 1, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.ChassisUUID) }},
	{"ports", 1, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "ports") }},
	{"states", 14, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "states") }},
	{"portgroups", 24, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "portgroups") }},
	{"volume", 32, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "volume") }},
}

var nodeFieldIndex = indexFields(nodeFields)

// summaryFields are the fields of a non-detailed node list entry.
var summaryFields = []string{"uuid", "instance_uuid", "maintenance", "power_state", "provision_state", "name", "links"}

// parseFields checks ?fields= against the node view at ver: unknown -> 400
// (Ironic answers 500), introduced later -> 406. It returns nil for "all".
func parseFields[T any](raw string, ver Version, all []viewField[T], index map[string]int) ([]string, error) {
	if raw == "" {
		return nil, nil
	}
	if !ver.AtLeast(8) {
		return nil, errNotAcceptable()
	}
	var out []string
	for _, f := range strings.Split(raw, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		i, ok := index[f]
		if !ok {
			return nil, errInvalid("Field(s) \"%s\" are not valid", f)
		}
		if !ver.AtLeast(all[i].minMinor) {
			return nil, errNotAcceptable()
		}
		out = append(out, f)
	}
	if len(out) > 0 {
		out = append(out, "links")
	}
	return out, nil
}

// renderNode writes n as JSON with the fields visible at v (all of them when
// fields is nil), in Ironic's order.
func (v *viewCtx) renderNode(buf *bytes.Buffer, n *storage.Node, fields []string) {
	renderView(buf, v, n, nodeFields, nodeFieldIndex, fields)
}

// renderView writes x as a JSON object of the fields visible at v.ver, in
// the order of all (or of fields when given).
func renderView[T any](buf *bytes.Buffer, v *viewCtx, x *T, all []viewField[T], index map[string]int, fields []string) {
	buf.WriteByte('{')
	first := true
	emit := func(f *viewField[T]) {
		if !v.ver.AtLeast(f.minMinor) {
			return
		}
		if !first {
			buf.WriteString(", ")
		}
		first = false
		appendJSONString(buf, f.name)
		buf.WriteString(": ")
		appendJSON(buf, f.get(v, x))
	}
	if fields == nil {
		for i := range all {
			emit(&all[i])
		}
	} else {
		seen := map[string]bool{}
		for _, name := range fields {
			if seen[name] {
				continue
			}
			seen[name] = true
			emit(&all[index[name]])
		}
	}
	buf.WriteByte('}')
}

// renderList writes {"<name>": [...], "next": ...} for a page of items.
func renderList[T any](w http.ResponseWriter, r *http.Request, v *viewCtx, name string, items []*T, uuidOf func(*T) string,
	all []viewField[T], index map[string]int, fields []string, page storage.Page) {
	var buf bytes.Buffer
	buf.Grow(256 * (len(items) + 1))
	buf.WriteString(`{"` + name + `": [`)
	for i, x := range items {
		if i > 0 {
			buf.WriteString(", ")
		}
		renderView(&buf, v, x, all, index, fields)
	}
	buf.WriteByte(']')
	if len(items) > 0 {
		if next := nextLink(r, name, page, len(items), uuidOf(items[len(items)-1])); next != "" {
			nb, _ := json.Marshal(next)
			buf.WriteString(`, "next": `)
			buf.Write(nb)
		}
	}
	buf.WriteByte('}')
	writeRaw(w, http.StatusOK, buf.Bytes())
}

func (a *API) view(r *http.Request) *viewCtx {
	return &viewCtx{r: r, ver: versionOf(r), cond: a.cond, base: baseURL(r)}
}

// nodeAsMap is the node's full view at the request's version as a generic
// map, the document a JSON patch applies to.
func (a *API) nodeAsMap(r *http.Request, n *storage.Node) map[string]any {
	v := a.view(r)
	out := map[string]any{}
	for _, f := range nodeFields {
		if v.ver.AtLeast(f.minMinor) {
			out[f.name] = f.get(v, n)
		}
	}
	// Patches see the real driver_info (Ironic patches the stored object).
	out["driver_info"] = n.DriverInfo
	out["instance_info"] = n.InstanceInfo
	return out
}

// appendJSON writes v as JSON, with fast paths for the types views use most
// (a list page renders hundreds of small values; json.Marshal for each one
// was a third of the handler's time).
func appendJSON(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		appendJSONString(buf, t)
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case []link:
		buf.WriteByte('[')
		for i, l := range t {
			if i > 0 {
				buf.WriteString(", ")
			}
			buf.WriteString(`{"href": `)
			appendJSONString(buf, l.Href)
			buf.WriteString(`, "rel": `)
			appendJSONString(buf, l.Rel)
			if l.Type != "" {
				buf.WriteString(`, "type": `)
				appendJSONString(buf, l.Type)
			}
			buf.WriteByte('}')
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte("null")
		}
		buf.Write(b)
	}
}

// appendJSONString writes s as a JSON string; anything unusual goes through
// encoding/json so escaping stays exactly right.
func appendJSONString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			buf.Write(b)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}
