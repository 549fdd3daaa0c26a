// Package workflow holds castiron's operator workflows (import, introspect,
// provide, manage, abort, configure, node and conductor listings) on top of
// the public Ironic REST client in client/.
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
