// Package workflow holds castiron's operator workflows (import, introspect,
// provide, manage, abort, configure, node and conductor listings) on top of
// the public Ironic REST client in httpapi/client.
package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Spec is one node of an instackenv file, mapped to Ironic fields.
type Spec struct {
	Index         int // 0-based position in the file
	Name          string
	UUID          string
	Driver        string
	DriverInfo    map[string]any
	Properties    map[string]any
	ResourceClass string
	Ports         []map[string]any // each with a normalised "address"
	BMC           string           // "address:port" identity of the BMC, "" for fake types
}

// Label names the entry in messages.
func (s *Spec) Label() string {
	if s.Name != "" {
		return s.Name
	}
	if s.UUID != "" {
		return s.UUID
	}
	return fmt.Sprintf("node #%d", s.Index+1)
}

// MACs lists the port addresses.
func (s *Spec) MACs() []string {
	out := make([]string, 0, len(s.Ports))
	for _, p := range s.Ports {
		out = append(out, p["address"].(string))
	}
	return out
}

// ValidationError lists every problem found in a file.
type ValidationError struct{ Problems []string }

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%d problem(s) in the node file:\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// driverFamily maps TripleO pm_type values onto a hardware type and the
// driver_info prefix for pm_addr/pm_user/pm_password/pm_port.
type driverFamily struct {
	re          *regexp.Regexp
	driver      string
	prefix      string // "" : no BMC fields (fake types)
	defaultPort int
}

var driverFamilies = []driverFamily{
	{regexp.MustCompile(`^(ipmi|.*_ipmitool(_socat)?)$`), "ipmi", "ipmi", 623},
	{regexp.MustCompile(`^(redfish|.*_redfish)$`), "redfish", "redfish", 0},
	{regexp.MustCompile(`^fake_pxe$`), "manual-management", "", 0},
	{regexp.MustCompile(`^(fake|fake-hardware|manual-management)$`), "", "", 0}, // kept as is
}

// knownKeys are the node keys of TripleO's instackenv schema that castiron
// understands; anything else is reported (usually a typo such as pm_adress).
var knownKeys = map[string]bool{
	"name": true, "uuid": true, "pm_type": true, "pm_addr": true, "pm_user": true,
	"pm_password": true, "pm_port": true, "pm_system_id": true, "redfish_verify_ca": true, "ports": true, "mac": true,
	"cpu": true, "memory": true, "disk": true, "arch": true, "capabilities": true,
	"root_device": true, "resource_class": true, "kernel_id": true, "ramdisk_id": true,
	"description": true, "extra": true,
}

var knownPortKeys = map[string]bool{
	"address": true, "physical_network": true, "local_link_connection": true,
	"pxe_enabled": true, "extra": true,
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// LoadFile reads an instackenv file (JSON, or the same in YAML) and checks it.
func LoadFile(path string) ([]*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	yamlExt := strings.EqualFold(filepath.Ext(path), ".yaml") || strings.EqualFold(filepath.Ext(path), ".yml")
	return Parse(b, yamlExt)
}

// Parse decodes and validates an instackenv document; asYAML forces YAML
// (otherwise JSON, falling back to YAML when it does not start like JSON).
func Parse(b []byte, asYAML bool) ([]*Spec, error) {
	var doc any
	trimmed := bytes.TrimSpace(b)
	if !asYAML && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("node file is not valid JSON: %w", err)
		}
	} else {
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("node file is not valid YAML: %w", err)
		}
	}
	var nodes []any
	switch d := doc.(type) {
	case map[string]any:
		list, ok := d["nodes"].([]any)
		if !ok {
			return nil, &ValidationError{[]string{`top level: "nodes" must be a list of nodes`}}
		}
		nodes = list
	case []any:
		nodes = d
	default:
		return nil, &ValidationError{[]string{`top level: expected an object with "nodes" (or a list of nodes)`}}
	}
	var problems []string
	specs := make([]*Spec, 0, len(nodes))
	for i, raw := range nodes {
		s, errs := parseNode(i, raw)
		problems = append(problems, errs...)
		if s != nil {
			specs = append(specs, s)
		}
	}
	problems = append(problems, duplicates(specs)...)
	if len(problems) > 0 {
		return nil, &ValidationError{problems}
	}
	return specs, nil
}

func parseNode(i int, raw any) (*Spec, []string) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, []string{fmt.Sprintf("node #%d: must be an object", i+1)}
	}
	s := &Spec{Index: i, DriverInfo: map[string]any{}, Properties: map[string]any{}}
	var problems []string
	where := fmt.Sprintf("node #%d", i+1)
	if n, ok := m["name"].(string); ok && n != "" {
		where = n
	} else if u, ok := m["uuid"].(string); ok && u != "" {
		where = u
	}
	bad := func(format string, args ...any) {
		problems = append(problems, where+": "+fmt.Sprintf(format, args...))
	}
	str := func(key string) string {
		v, ok := m[key]
		if !ok || v == nil {
			return ""
		}
		switch x := v.(type) {
		case string:
			return x
		case json.Number, int, int64, float64:
			return fmt.Sprint(x)
		}
		bad("%s must be a string", key)
		return ""
	}
	s.Name = str("name")
	s.UUID = str("uuid")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !knownKeys[k] {
			bad("unknown key %q", k)
		}
	}
	if s.UUID != "" && !uuidRE.MatchString(s.UUID) {
		bad("uuid %q is not a UUID", s.UUID)
	}
	pmType := str("pm_type")
	addr, user, pass := str("pm_addr"), str("pm_user"), str("pm_password")
	port, portErr := intOf(m["pm_port"])
	if portErr != nil || (m["pm_port"] != nil && (port < 1 || port > 65535)) {
		bad("pm_port must be a port number, got %v", m["pm_port"])
	}
	if pmType == "" {
		bad("pm_type is required")
	} else {
		var fam *driverFamily
		for j := range driverFamilies {
			if driverFamilies[j].re.MatchString(pmType) {
				fam = &driverFamilies[j]
				break
			}
		}
		switch {
		case fam == nil:
			bad("unsupported pm_type %q (ipmi, pxe_ipmitool and friends, redfish, fake-hardware, manual-management)", pmType)
		default:
			s.Driver = fam.driver
			if s.Driver == "" {
				s.Driver = pmType
			}
			if fam.prefix != "" {
				if addr == "" {
					bad("pm_addr is required for pm_type %s", pmType)
				}
				set := func(k, v string) {
					if v != "" {
						s.DriverInfo[fam.prefix+"_"+k] = v
					}
				}
				if fam.prefix == "redfish" && m["pm_port"] != nil && addr != "" {
					// Redfish has no port key (TripleO ignores pm_port for
					// it): the port goes into the address.
					var err error
					if addr, err = redfishAddressWithPort(addr, port); err != nil {
						bad("%v", err)
					}
				}
				set("address", addr)
				set("username", user)
				set("password", pass)
				if fam.prefix == "redfish" {
					set("system_id", str("pm_system_id"))
					if v, ok := m["redfish_verify_ca"]; ok && v != nil {
						s.DriverInfo["redfish_verify_ca"] = v // a boolean, "true"/"false" or a CA path
					}
				} else if m["pm_port"] != nil {
					s.DriverInfo[fam.prefix+"_port"] = port
				}
				if fam.defaultPort != 0 {
					p := port
					if m["pm_port"] == nil {
						p = fam.defaultPort
					}
					s.BMC = net.JoinHostPort(strings.ToLower(addr), strconv.Itoa(p))
				} else if addr != "" {
					s.BMC = strings.ToLower(addr) + "#" + str("pm_system_id")
				}
			}
		}
	}
	if k := str("kernel_id"); k != "" {
		s.DriverInfo["deploy_kernel"] = k
	}
	if r := str("ramdisk_id"); r != "" {
		s.DriverInfo["deploy_ramdisk"] = r
	}
	for key, prop := range map[string]string{"cpu": "cpus", "memory": "memory_mb", "disk": "local_gb"} {
		if m[key] == nil {
			continue
		}
		n, err := intOf(m[key])
		if err != nil || n < 0 {
			bad("%s must be a non-negative integer, got %v", key, m[key])
			continue
		}
		s.Properties[prop] = n
	}
	if a := str("arch"); a != "" {
		s.Properties["cpu_arch"] = a
	}
	switch c := m["capabilities"].(type) {
	case nil:
	case string:
		if c != "" {
			s.Properties["capabilities"] = c
		}
	case map[string]any:
		ks := make([]string, 0, len(c))
		for k := range c {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		parts := make([]string, 0, len(ks))
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s:%v", k, c[k]))
		}
		s.Properties["capabilities"] = strings.Join(parts, ",")
	default:
		bad(`capabilities must be a string "key:value,..." or an object`)
	}
	switch rd := m["root_device"].(type) {
	case nil:
	case map[string]any:
		s.Properties["root_device"] = jsonNumbers(rd)
	default:
		bad("root_device must be an object")
	}
	s.ResourceClass = str("resource_class")
	seen := map[string]bool{}
	addPort := func(p map[string]any, what string) {
		a, _ := p["address"].(string)
		hw, err := net.ParseMAC(a)
		if err != nil || len(hw) != 6 {
			bad("%s %q is not a MAC address", what, a)
			return
		}
		mac := hw.String()
		if seen[mac] {
			bad("MAC %s is listed twice", mac)
			return
		}
		seen[mac] = true
		p = jsonNumbers(p)
		p["address"] = mac
		s.Ports = append(s.Ports, p)
	}
	if macs, ok := m["mac"]; ok {
		list, ok := macs.([]any)
		if !ok {
			bad("mac must be a list of MAC addresses")
		}
		for _, x := range list {
			a, _ := x.(string)
			addPort(map[string]any{"address": a}, "mac")
		}
	}
	if ports, ok := m["ports"]; ok {
		list, ok := ports.([]any)
		if !ok {
			bad("ports must be a list of objects with an address")
		}
		for _, x := range list {
			p, ok := x.(map[string]any)
			if !ok {
				bad("ports: each entry must be an object with an address")
				continue
			}
			for k := range p {
				if !knownPortKeys[k] {
					bad("ports: unknown key %q", k)
				}
			}
			addPort(p, "port address")
		}
	}
	return s, problems
}

// redfishAddressWithPort puts port into a Redfish address (a URL, or a
// host whose scheme is https, as Ironic reads it) that names none; an
// address with another port is an error.
func redfishAddressWithPort(addr string, port int) (string, error) {
	if ip := net.ParseIP(addr); ip != nil && ip.To4() == nil {
		addr = "[" + addr + "]" // a bare IPv6 address, as Ironic's escape_ipv6
	}
	withScheme := addr
	if !strings.Contains(addr, "://") {
		withScheme = "https://" + addr
	}
	u, err := url.Parse(withScheme)
	if err != nil || u.Host == "" {
		return addr, fmt.Errorf("pm_addr %q is not a Redfish address", addr)
	}
	if p := u.Port(); p != "" {
		if p != strconv.Itoa(port) {
			return addr, fmt.Errorf("pm_port %d contradicts the port in pm_addr %q", port, addr)
		}
		return addr, nil
	}
	u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	out := u.String()
	if withScheme != addr {
		out = strings.TrimPrefix(out, "https://")
	}
	return out, nil
}

// duplicates reports names, UUIDs, MACs and BMC addresses used by more than
// one entry.
func duplicates(specs []*Spec) []string {
	var out []string
	check := func(kind string, key func(*Spec) []string) {
		first := map[string]*Spec{}
		for _, s := range specs {
			for _, k := range key(s) {
				if k == "" {
					continue
				}
				if f, ok := first[k]; ok {
					out = append(out, fmt.Sprintf("duplicate %s %s: %s and %s", kind, k, f.Label(), s.Label()))
					continue
				}
				first[k] = s
			}
		}
	}
	check("name", func(s *Spec) []string { return []string{s.Name} })
	check("uuid", func(s *Spec) []string { return []string{strings.ToLower(s.UUID)} })
	check("MAC", (*Spec).MACs)
	check("BMC address", func(s *Spec) []string { return []string{s.BMC} })
	return out
}

// intOf accepts JSON/YAML numbers and numeric strings ("4", "8192").
func intOf(v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		if x != float64(int(x)) {
			return 0, fmt.Errorf("not an integer")
		}
		return int(x), nil
	case json.Number:
		n, err := strconv.Atoi(x.String())
		return n, err
	case string:
		return strconv.Atoi(strings.TrimSpace(x))
	}
	return 0, fmt.Errorf("not a number")
}

// jsonNumbers turns json.Number values back into plain numbers so they
// marshal as numbers and compare equal to what the server returns.
func jsonNumbers(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				out[k] = n
			} else if f, err := x.Float64(); err == nil {
				out[k] = f
			} else {
				out[k] = x.String()
			}
		case map[string]any:
			out[k] = jsonNumbers(x)
		default:
			out[k] = v
		}
	}
	return out
}
