package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// An instackenv node is read key by key: nodeKeys is TripleO's node schema
// as castiron understands it, one handler a key, run in table order (later
// keys may use what earlier ones found, e.g. pm_type's driver family). A
// key outside the table is reported, usually a typo such as pm_adress.

// nodeReader carries one node through the key handlers.
type nodeReader struct {
	m        map[string]any
	s        *Spec
	where    string // how problems name the node
	pmType   string
	fam      *driverFamily // pm_type's family, nil when unknown
	port     int           // pm_port, 0 when absent
	problems []string
}

// nodeKey is one key of the schema; read gets the key's value (nil when
// absent). A nil read accepts the key and uses nothing of it.
type nodeKey struct {
	name string
	read func(p *nodeReader, v any)
}

var nodeKeys = []nodeKey{
	{"name", func(p *nodeReader, v any) { p.s.Name = p.str("name", v) }},
	{"uuid", readUUID},
	{"pm_type", readPMType},
	{"pm_port", readPMPort},
	{"pm_system_id", readSystemID},
	{"pm_addr", readPMAddr},
	{"pm_user", bmcInfo("pm_user", "username")},
	{"pm_password", bmcInfo("pm_password", "password")},
	{"redfish_verify_ca", func(p *nodeReader, v any) {
		if p.bmcPrefix() == "redfish" && v != nil {
			p.s.DriverInfo["redfish_verify_ca"] = v // a boolean, "true"/"false" or a CA path
		}
	}},
	{"kernel_id", driverInfoKey("kernel_id", "deploy_kernel")},
	{"ramdisk_id", driverInfoKey("ramdisk_id", "deploy_ramdisk")},
	{"cpu", intProperty("cpu", "cpus")},
	{"memory", intProperty("memory", "memory_mb")},
	{"disk", intProperty("disk", "local_gb")},
	{"arch", func(p *nodeReader, v any) {
		if a := p.str("arch", v); a != "" {
			p.s.Properties["cpu_arch"] = a
		}
	}},
	{"capabilities", readCapabilities},
	{"root_device", readRootDevice},
	{"resource_class", func(p *nodeReader, v any) { p.s.ResourceClass = p.str("resource_class", v) }},
	{"mac", portList("mac", "mac must be a list of MAC addresses", macEntry)},
	{"ports", portList("ports", "ports must be a list of objects with an address", portEntry)},
	{"description", nil},
	{"extra", nil},
}

var knownPortKeys = map[string]bool{
	"address": true, "physical_network": true, "local_link_connection": true,
	"pxe_enabled": true, "extra": true,
}

func parseNode(i int, raw any) (*Spec, []string) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, []string{fmt.Sprintf("node #%d: must be an object", i+1)}
	}
	p := &nodeReader{m: m, s: &Spec{Index: i, DriverInfo: map[string]any{}, Properties: map[string]any{}},
		where: fmt.Sprintf("node #%d", i+1)}
	if n, ok := m["name"].(string); ok && n != "" {
		p.where = n
	} else if u, ok := m["uuid"].(string); ok && u != "" {
		p.where = u
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !knownKey(k) {
			p.bad("unknown key %q", k)
		}
	}
	for _, k := range nodeKeys {
		if k.read != nil {
			k.read(p, m[k.name])
		}
	}
	return p.s, p.problems
}

func knownKey(name string) bool {
	return slices.ContainsFunc(nodeKeys, func(k nodeKey) bool { return k.name == name })
}

func (p *nodeReader) bad(format string, args ...any) {
	p.problems = append(p.problems, p.where+": "+fmt.Sprintf(format, args...))
}

// str reads a string value (numbers are taken as written); "" when absent.
func (p *nodeReader) str(key string, v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number, int, int64, float64:
		return fmt.Sprint(x)
	}
	p.bad("%s must be a string", key)
	return ""
}

// bmcPrefix is the driver_info prefix of the node's BMC keys, "" for
// drivers without a BMC (or an unknown pm_type).
func (p *nodeReader) bmcPrefix() string {
	if p.fam == nil {
		return ""
	}
	return p.fam.prefix
}

func readUUID(p *nodeReader, v any) {
	p.s.UUID = p.str("uuid", v)
	if p.s.UUID != "" && !uuidRE.MatchString(p.s.UUID) {
		p.bad("uuid %q is not a UUID", p.s.UUID)
	}
}

func readPMType(p *nodeReader, v any) {
	pmType := p.str("pm_type", v)
	p.pmType = pmType
	if pmType == "" {
		p.bad("pm_type is required")
		return
	}
	for j := range driverFamilies {
		if driverFamilies[j].re.MatchString(pmType) {
			p.fam = &driverFamilies[j]
			break
		}
	}
	if p.fam == nil {
		p.bad("unsupported pm_type %q (ipmi, pxe_ipmitool and friends, redfish, fake-hardware, manual-management)", pmType)
		return
	}
	p.s.Driver = p.fam.driver
	if p.s.Driver == "" {
		p.s.Driver = pmType
	}
}

func readPMPort(p *nodeReader, v any) {
	port, err := intOf(v)
	if err != nil || (v != nil && (port < 1 || port > 65535)) {
		p.bad("pm_port must be a port number, got %v", v)
	}
	p.port = port
	// Redfish has no port key (TripleO ignores pm_port for it): pm_addr
	// takes the port.
	if prefix := p.bmcPrefix(); prefix != "" && prefix != "redfish" && v != nil {
		p.s.DriverInfo[prefix+"_port"] = port
	}
}

// readPMAddr sets the BMC address and the BMC's identity for duplicate
// checks: address and port, or for Redfish address and system.
func readPMAddr(p *nodeReader, v any) {
	addr := p.str("pm_addr", v)
	prefix := p.bmcPrefix()
	if prefix == "" {
		return
	}
	if addr == "" {
		p.bad("pm_addr is required for pm_type %s", p.pmType)
	}
	if prefix == "redfish" && p.m["pm_port"] != nil && addr != "" {
		var err error
		if addr, err = redfishAddressWithPort(addr, p.port); err != nil {
			p.bad("%v", err)
		}
	}
	if addr != "" {
		p.s.DriverInfo[prefix+"_address"] = addr
	}
	switch {
	case p.fam.defaultPort != 0:
		port := p.port
		if p.m["pm_port"] == nil {
			port = p.fam.defaultPort
		}
		p.s.BMC = net.JoinHostPort(strings.ToLower(addr), strconv.Itoa(port))
	case addr != "":
		system, _ := p.s.DriverInfo["redfish_system_id"].(string)
		p.s.BMC = strings.ToLower(addr) + "#" + system
	}
}

// bmcInfo is a pm_* key stored as <prefix>_<name> in driver_info.
func bmcInfo(key, name string) func(*nodeReader, any) {
	return func(p *nodeReader, v any) {
		s := p.str(key, v)
		if prefix := p.bmcPrefix(); prefix != "" && s != "" {
			p.s.DriverInfo[prefix+"_"+name] = s
		}
	}
}

func readSystemID(p *nodeReader, v any) {
	if p.bmcPrefix() == "redfish" {
		bmcInfo("pm_system_id", "system_id")(p, v)
	}
}

// driverInfoKey is a string key stored in driver_info under name.
func driverInfoKey(key, name string) func(*nodeReader, any) {
	return func(p *nodeReader, v any) {
		if s := p.str(key, v); s != "" {
			p.s.DriverInfo[name] = s
		}
	}
}

// intProperty is a non-negative integer key stored in properties.
func intProperty(key, prop string) func(*nodeReader, any) {
	return func(p *nodeReader, v any) {
		if v == nil {
			return
		}
		n, err := intOf(v)
		if err != nil || n < 0 {
			p.bad("%s must be a non-negative integer, got %v", key, v)
			return
		}
		p.s.Properties[prop] = n
	}
}

// readCapabilities takes Ironic's "key:value,..." string or an object.
func readCapabilities(p *nodeReader, v any) {
	switch c := v.(type) {
	case nil:
	case string:
		if c != "" {
			p.s.Properties["capabilities"] = c
		}
	case map[string]any:
		parts := make([]string, 0, len(c))
		for _, k := range slices.Sorted(maps.Keys(c)) {
			parts = append(parts, fmt.Sprintf("%s:%v", k, c[k]))
		}
		p.s.Properties["capabilities"] = strings.Join(parts, ",")
	default:
		p.bad(`capabilities must be a string "key:value,..." or an object`)
	}
}

func readRootDevice(p *nodeReader, v any) {
	switch rd := v.(type) {
	case nil:
	case map[string]any:
		p.s.Properties["root_device"] = jsonNumbers(rd)
	default:
		p.bad("root_device must be an object")
	}
}

// addPort adds a port whose address must be a new MAC (what names the
// address in the problem).
func (p *nodeReader) addPort(port map[string]any, what string) {
	a, _ := port["address"].(string)
	hw, err := net.ParseMAC(a)
	if err != nil || len(hw) != 6 {
		p.bad("%s %q is not a MAC address", what, a)
		return
	}
	mac := hw.String()
	for _, q := range p.s.Ports {
		if q["address"] == mac {
			p.bad("MAC %s is listed twice", mac)
			return
		}
	}
	port = jsonNumbers(port)
	port["address"] = mac
	p.s.Ports = append(p.s.Ports, port)
}

// portList reads the mac key (a list of addresses) or the ports key (a
// list of port objects), one entry at a time.
func portList(key, notList string, entry func(p *nodeReader, x any)) func(*nodeReader, any) {
	return func(p *nodeReader, v any) {
		if _, present := p.m[key]; !present {
			return
		}
		list, ok := v.([]any)
		if !ok {
			p.bad("%s", notList)
		}
		for _, x := range list {
			entry(p, x)
		}
	}
}

func macEntry(p *nodeReader, x any) {
	a, _ := x.(string)
	p.addPort(map[string]any{"address": a}, "mac")
}

func portEntry(p *nodeReader, x any) {
	port, ok := x.(map[string]any)
	if !ok {
		p.bad("ports: each entry must be an object with an address")
		return
	}
	for k := range port {
		if !knownPortKeys[k] {
			p.bad("ports: unknown key %q", k)
		}
	}
	p.addPort(port, "port address")
}
