package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/storage"
)

// TestMicroversionGates92to115 walks Ironic's 1.92 .. 1.115 (runbooks,
// 1.92 and 1.112, are another branch's): each row is one request at one
// version, just below a version and at it, with Ironic's answer (404, 405
// or 406 below; the behaviour at it) and, for bad input of the new
// fields, Ironic's 400 and its message.
func TestMicroversionGates92to115(t *testing.T) {
	h, node := apiWithNode(t, map[string]any{"name": "g-node"})
	h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:00:0c:01"})
	port := h.expect(http.StatusOK, "GET", "/v1/ports?address=52:54:00:00:0c:01", latest, nil).json(t)["ports"].([]any)[0].(map[string]any)["uuid"].(string)
	pg := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": node, "name": "g-pg"}).json(t)["uuid"].(string)
	pgPort := h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:00:0c:09", "portgroup_uuid": pg}).json(t)["uuid"].(string)
	sub := func(s string) string {
		return strings.NewReplacer("{node}", node, "{port}", port, "{pg}", pg, "{pgport}", pgPort).Replace(s)
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	vtep := map[string]any{"port_id": "p1", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}
	op := func(o, path string, v any) []any {
		m := map[string]any{"op": o, "path": path}
		if o != "remove" {
			m["value"] = v
		}
		return []any{m}
	}

	cases := []gateCase{
		// 1.93: GET vmedia (404 below, as the sub-resource's get aborts);
		// PUT is no method of the sub-resource (405), and below 1.89 the
		// sub-resource does not exist (404, the version gate first).
		{"get vmedia below 1.93", "1.92", "GET", "/v1/nodes/{node}/vmedia", nil, 404, "", "", ""},
		{"get vmedia at 1.93 on fake-hardware", "1.93", "GET", "/v1/nodes/{node}/vmedia", nil, 400, "", "", "Driver fake-hardware does not support get_virtual_media (disabled or not implemented)."},
		{"get vmedia of no node", "1.93", "GET", "/v1/nodes/nosuch/vmedia", nil, 404, "", "", "Node nosuch could not be found."},
		{"put vmedia below 1.89", "1.88", "PUT", "/v1/nodes/{node}/vmedia", map[string]any{}, 404, "", "", ""},
		{"put vmedia at 1.89", "1.89", "PUT", "/v1/nodes/{node}/vmedia", map[string]any{}, 405, "", "", ""},
		// 1.94: port create by node_ident; exactly one of the two.
		{"port node_ident below 1.94", "1.93", "POST", "/v1/ports", map[string]any{"node_ident": "g-node", "address": "52:54:00:00:0c:02"}, 406, "", "", ""},
		{"port node_ident at 1.94", "1.94", "POST", "/v1/ports", map[string]any{"node_ident": "g-node", "address": "52:54:00:00:0c:02"}, 201, "node_uuid", "node_ident", ""},
		{"port node_ident and node_uuid", "1.94", "POST", "/v1/ports", map[string]any{"node_ident": "g-node", "node_uuid": "{node}", "address": "52:54:00:00:0c:03"}, 400, "", "",
			"is valid under each of {'required': ['node_uuid']}, {'required': ['node_ident']}"},
		{"port without a node", "1.94", "POST", "/v1/ports", map[string]any{"address": "52:54:00:00:0c:03"}, 400, "", "", "is not valid under any of the given schemas"},
		{"port node_ident not a string", "1.94", "POST", "/v1/ports", map[string]any{"node_ident": 5, "address": "52:54:00:00:0c:03"}, 400, "", "", "5 is not of type 'string'"},
		{"port node_ident of no node", "1.94", "POST", "/v1/ports", map[string]any{"node_ident": "nosuch", "address": "52:54:00:00:0c:03"}, 400, "", "", "could not be found"},
		// 1.95: node disable_power_off (false is a value too: 406 below).
		{"disable_power_off below 1.95", "1.94", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "disable_power_off": false}, 406, "", "", ""},
		{"disable_power_off null below 1.95", "1.94", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "disable_power_off": nil}, 201, "", "disable_power_off", ""},
		{"disable_power_off at 1.95", "1.95", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "disable_power_off": false}, 201, "disable_power_off", "", ""},
		{"disable_power_off not a boolean", "1.95", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "disable_power_off": "maybe"}, 400, "", "", "disable_power_off"},
		{"disable_power_off fields below 1.95", "1.94", "GET", "/v1/nodes/{node}?fields=disable_power_off", nil, 406, "", "", ""},
		{"disable_power_off hidden below 1.95", "1.94", "GET", "/v1/nodes/{node}", nil, 200, "uuid", "disable_power_off", ""},
		{"disable_power_off patch below 1.95", "1.94", "PATCH", "/v1/nodes/{node}", op("replace", "/disable_power_off", true), 406, "", "", ""},
		{"disable_power_off sort below 1.95", "1.94", "GET", "/v1/nodes?sort_key=disable_power_off", nil, 406, "", "", ""},
		// 1.96: inspection rules, the collection's DELETE included.
		{"inspection rules below 1.96", "1.95", "GET", "/v1/inspection_rules", nil, 404, "", "", "The API version does not allow inspection rules"},
		{"delete all inspection rules below 1.96", "1.95", "DELETE", "/v1/inspection_rules", nil, 405, "", "", "The API version does not allow inspection rules"},
		{"inspection rules at 1.96", "1.96", "GET", "/v1/inspection_rules", nil, 200, "inspection_rules", "", ""},
		// 1.97: port description; description_contains is not gated.
		{"port description below 1.97", "1.96", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:04", "description": "d"}, 406, "", "", ""},
		{"port description too long", "1.97", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:04", "description": long(256)}, 400, "", "", "is too long"},
		{"port description at 1.97", "1.97", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:04", "description": "uplink to tor-1"}, 201, "description", "vendor", ""},
		{"port description patch below 1.97", "1.96", "PATCH", "/v1/ports/{port}", op("add", "/description", "d"), 406, "", "", ""},
		{"port description fields below 1.97", "1.96", "GET", "/v1/ports/{port}?fields=description", nil, 406, "", "", ""},
		{"port description_contains at 1.1", "1.1", "GET", "/v1/ports?description_contains=tor", nil, 200, "ports", "", ""},
		// 1.98: RFC 6901 escapes in patch paths.
		{"patch ~1 below 1.98", "1.97", "PATCH", "/v1/nodes/{node}", op("add", "/extra/a~1b", "v"), 400, "", "", "does not match"},
		{"patch ~1 at 1.98", "1.98", "PATCH", "/v1/nodes/{node}", op("add", "/extra/a~1b", "v"), 200, "extra", "", ""},
		{"patch ~0 at 1.98", "1.98", "PATCH", "/v1/ports/{port}", op("add", "/extra/a~0b", "v"), 200, "extra", "", ""},
		{"patch a bad escape at 1.98", "1.98", "PATCH", "/v1/nodes/{node}", op("add", "/extra/a~2b", "v"), 400, "", "", "does not match"},
		{"patch an escaped root at 1.98", "1.98", "PATCH", "/v1/nodes/{node}", op("add", "/ex~0tra", "v"), 400, "", "", "Cannot patch /ex~0tra"},
		// 1.99: conductor_groups on port and portgroup lists (not gated).
		{"port conductor_groups at 1.1", "1.1", "GET", "/v1/ports?conductor_groups=a,B", nil, 200, "ports", "", ""},
		{"port conductor_groups with node", "1.99", "GET", "/v1/ports?conductor_groups=a&node=g-node", nil, 400, "", "",
			"Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters."},
		{"port conductor_groups with address", "1.99", "GET", "/v1/ports?conductor_groups=a&address=52:54:00:00:0c:01", nil, 400, "", "", "Filtering by conductor_groups"},
		{"portgroup conductor_groups", "1.99", "GET", "/v1/portgroups?conductor_groups=a", nil, 200, "portgroups", "", ""},
		{"portgroup conductor_groups with node", "1.99", "GET", "/v1/portgroups?conductor_groups=a&node=g-node", nil, 400, "", "", "Filtering by node, address, or shard simultaneously is not supported."},
		// 1.100, 1.101: port vendor, category.
		{"port vendor below 1.100", "1.99", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:05", "vendor": "v"}, 406, "", "", ""},
		{"port vendor too long", "1.100", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:05", "vendor": long(33)}, 400, "", "", "is too long"},
		{"port vendor not a string", "1.100", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:05", "vendor": 7}, 400, "", "", "7 is not of type 'string', 'null'"},
		{"port vendor at 1.100", "1.100", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:05", "vendor": "mellanox"}, 201, "vendor", "category", ""},
		{"port category below 1.101", "1.100", "PATCH", "/v1/ports/{port}", op("add", "/category", "c"), 406, "", "", ""},
		{"port category too long", "1.101", "PATCH", "/v1/ports/{port}", op("add", "/category", long(81)), 400, "", "", "is too long"},
		{"port category at 1.101", "1.101", "PATCH", "/v1/ports/{port}", op("add", "/category", "storage"), 200, "category", "available_for_dynamic_portgroup", ""},
		// 1.102, 1.103: portgroup physical_network, category.
		{"portgroup physical_network below 1.102", "1.101", "POST", "/v1/portgroups", map[string]any{"node_uuid": "{node}", "physical_network": "p"}, 406, "", "", ""},
		{"portgroup physical_network too long", "1.102", "POST", "/v1/portgroups", map[string]any{"node_uuid": "{node}", "physical_network": long(65)}, 400, "", "", "is too long"},
		{"portgroup physical_network at 1.102", "1.102", "PATCH", "/v1/portgroups/{pg}", op("add", "/physical_network", "physnet1"), 200, "physical_network", "category", ""},
		{"port in a portgroup: physical_network below 1.102", "1.101", "PATCH", "/v1/ports/{pgport}", op("add", "/physical_network", "p"), 200, "physical_network", "", ""},
		{"port in a portgroup: physical_network at 1.102", "1.102", "PATCH", "/v1/ports/{pgport}", op("add", "/physical_network", "p"), 400, "", "", "physical_network cannot be changed while the port belongs to a portgroup."},
		{"portgroup category below 1.103", "1.102", "PATCH", "/v1/portgroups/{pg}", op("add", "/category", "c"), 406, "", "", ""},
		{"portgroup category fields below 1.103", "1.102", "GET", "/v1/portgroups/{pg}?fields=category", nil, 406, "", "", ""},
		{"portgroup category at 1.103", "1.103", "PATCH", "/v1/portgroups/{pg}", op("add", "/category", "lag"), 200, "category", "dynamic_portgroup", ""},
		// 1.104: node instance_name and its filter.
		{"instance_name below 1.104", "1.103", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "instance_name": "vm"}, 406, "", "", ""},
		{"instance_name empty", "1.104", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "instance_name": ""}, 400, "", "", "'' should be non-empty"},
		{"instance_name too long", "1.104", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "instance_name": long(256)}, 400, "", "", "is too long"},
		{"instance_name at 1.104", "1.104", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "instance_name": "vm-104"}, 201, "instance_name", "health", ""},
		{"instance_name filter below 1.104", "1.103", "GET", "/v1/nodes?instance_name=vm-104", nil, 406, "", "", "instance_name is not acceptable in this API version"},
		{"instance_name patch below 1.104", "1.103", "PATCH", "/v1/nodes/{node}", op("add", "/instance_name", "x"), 406, "", "", ""},
		// 1.105: the OVN VTEP keys are withdrawn.
		{"vtep keys at 1.104", "1.104", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:06", "local_link_connection": vtep}, 201, "local_link_connection", "", ""},
		{"vtep keys at 1.105", "1.105", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:07", "local_link_connection": vtep}, 406, "", "", ""},
		{"vtep key patch at 1.105", "1.105", "PATCH", "/v1/ports/{port}", op("add", "/local_link_connection/vtep-logical-switch", "ls"), 406, "", "", ""},
		// 1.106: shard on portgroups.
		{"portgroup shard below 1.106", "1.105", "GET", "/v1/portgroups?shard=a", nil, 406, "", "", "Request not acceptable. The minimal required API version should be 1.106"},
		{"portgroup shard at 1.106", "1.106", "GET", "/v1/portgroups/detail?shard=a", nil, 200, "portgroups", "", ""},
		{"portgroup shard with address", "1.106", "GET", "/v1/portgroups?shard=a&address=52:54:00:00:0c:01", nil, 400, "", "", "Filtering by node, address, or shard simultaneously is not supported."},
		// 1.108: disable_ramdisk with service (clean keeps 1.70).
		{"service disable_ramdisk below 1.108", "1.107", "PUT", "/v1/nodes/{node}/states/provision", map[string]any{"target": "service", "service_steps": []any{}, "disable_ramdisk": true}, 406, "", "", "disable_ramdisk is not acceptable in this API version"},
		{"clean disable_ramdisk below 1.70", "1.69", "PUT", "/v1/nodes/{node}/states/provision", map[string]any{"target": "clean", "clean_steps": []any{}, "disable_ramdisk": true}, 406, "", "", "disable_ramdisk is not acceptable in this API version"},
		{"deploy disable_ramdisk", latest, "PUT", "/v1/nodes/{node}/states/provision", map[string]any{"target": "active", "disable_ramdisk": true}, 400, "", "", "disable_ramdisk is supported only with manual cleaning or servicing"},
		{"disable_ramdisk not a boolean", latest, "PUT", "/v1/nodes/{node}/states/provision", map[string]any{"target": "service", "service_steps": []any{}, "disable_ramdisk": "x"}, 400, "", "", ""},
		// 1.109: health is read-only and hidden below.
		{"health fields below 1.109", "1.108", "GET", "/v1/nodes/{node}?fields=health", nil, 406, "", "", ""},
		{"health at 1.109", "1.109", "GET", "/v1/nodes/{node}?fields=health", nil, 200, "health", "", ""},
		{"health is read-only", latest, "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "health": "OK"}, 400, "", "", "Additional properties are not allowed ('health' was unexpected)"},
		{"health patch", latest, "PATCH", "/v1/nodes/{node}", op("replace", "/health", "OK"), 400, "", "", "Cannot patch /health."},
		// 1.111: dynamic portgroup flags.
		{"available_for_dynamic_portgroup below 1.111", "1.110", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:08", "available_for_dynamic_portgroup": false}, 406, "", "", ""},
		{"available_for_dynamic_portgroup not a boolean", "1.111", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:08", "available_for_dynamic_portgroup": "false"}, 400, "", "", "'false' is not of type 'boolean'"},
		{"available_for_dynamic_portgroup at 1.111", "1.111", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0c:08", "available_for_dynamic_portgroup": false}, 201, "available_for_dynamic_portgroup", "", ""},
		{"dynamic_portgroup fields below 1.111", "1.110", "GET", "/v1/portgroups/{pg}?fields=dynamic_portgroup", nil, 406, "", "", ""},
		{"dynamic_portgroup at 1.111", "1.111", "GET", "/v1/portgroups/{pg}", nil, 200, "dynamic_portgroup", "", ""},
		{"dynamic_portgroup is read-only", latest, "POST", "/v1/portgroups", map[string]any{"node_uuid": "{node}", "dynamic_portgroup": true}, 400, "", "", "Additional properties are not allowed ('dynamic_portgroup' was unexpected)"},
		// 1.114: firmware component identity (400 below, as Ironic).
		{"firmware vendor below 1.114", "1.113", "GET", "/v1/nodes/{node}/firmware?fields=component,vendor", nil, 400, "", "", "require at least API version 1.114"},
		{"firmware vendor at 1.114", "1.114", "GET", "/v1/nodes/{node}/firmware?fields=component,vendor,model,serial_number", nil, 200, "firmware", "", ""},
		// An unknown action of the states controller is pecan's 405.
		{"unknown states action", latest, "PUT", "/v1/nodes/{node}/states/sideways", map[string]any{"target": "x"}, 405, "", "", ""},
	}
	runGateCases(t, h, sub, cases)
}

// TestVersion115Behaviour checks what the new versions do at their
// version: the ceiling, the port filters, the node_ident port, escapes
// decoded, VTEP connections hidden outside 1.90 - 1.104, instance_name
// filled from display_name, history detail fields.
func TestVersion115Behaviour(t *testing.T) {
	h, node := apiWithNode(t, map[string]any{"name": "b-node"})
	v1 := h.expect(http.StatusOK, "GET", "/v1", latest, nil).json(t)
	if v := v1["version"].(map[string]any)["version"]; v != "1.115" {
		t.Fatalf("GET /v1 version %v", v)
	}
	root := h.expect(http.StatusOK, "GET", "/", "", nil).json(t)
	if v := root["default_version"].(map[string]any)["version"]; v != "1.115" {
		t.Fatalf("GET / version %v", v)
	}
	r := h.expect(http.StatusOK, "GET", "/v1/nodes", "1.115", nil)
	if r.header.Get("X-OpenStack-Request-Id") == "" || r.header.Get("OpenStack-Request-Id") == "" {
		t.Errorf("1.107 request id headers: %v", r.header)
	}

	// 1.94: the port names its node by name; the answer has its uuid.
	p := h.expect(http.StatusCreated, "POST", "/v1/ports", "1.94", map[string]any{"node_ident": "b-node", "address": "52:54:00:00:0d:01"}).json(t)
	if p["node_uuid"] != node {
		t.Fatalf("port by node_ident: %v", p)
	}
	// 1.97 - 1.111 port fields, shown from their versions.
	p = h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:00:0d:02",
		"description": "Uplink to TOR-1", "vendor": "acme", "category": "fast"}).json(t)
	if p["description"] != "Uplink to TOR-1" || p["vendor"] != "acme" || p["category"] != "fast" || p["available_for_dynamic_portgroup"] != true {
		t.Fatalf("port fields at latest: %v", p)
	}
	old := h.expect(http.StatusOK, "GET", "/v1/ports/"+p["uuid"].(string), "1.96", nil).json(t)
	for _, k := range []string{"description", "vendor", "category", "available_for_dynamic_portgroup"} {
		if _, has := old[k]; has {
			t.Errorf("%s shown at 1.96", k)
		}
	}
	// description_contains is case-insensitive, at any version.
	list := h.expect(http.StatusOK, "GET", "/v1/ports?description_contains=tor-1", "1.1", nil).json(t)["ports"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["uuid"] != p["uuid"] {
		t.Errorf("description_contains: %v", list)
	}
	// conductor_groups: the node is in the default group "".
	other := h.createNode(map[string]any{"name": "b-grouped"})["uuid"].(string)
	h.db(other, func(n *storage.Node) { n.ConductorGroup = "rack2" }) // no conductor serves it here
	h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": other, "address": "52:54:00:00:0d:03"})
	list = h.expect(http.StatusOK, "GET", "/v1/ports?conductor_groups=RACK2", latest, nil).json(t)["ports"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["address"] != "52:54:00:00:0d:03" {
		t.Errorf("ports ?conductor_groups=RACK2: %v", list)
	}
	h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": other, "name": "b-pg2"})
	pgs := h.expect(http.StatusOK, "GET", "/v1/portgroups?conductor_groups=rack2", latest, nil).json(t)["portgroups"].([]any)
	if len(pgs) != 1 || pgs[0].(map[string]any)["name"] != "b-pg2" {
		t.Errorf("portgroups ?conductor_groups=rack2: %v", pgs)
	}
	h.db(other, func(n *storage.Node) { s := "s1"; n.Shard = &s })
	pgs = h.expect(http.StatusOK, "GET", "/v1/portgroups?shard=S1", "1.106", nil).json(t)["portgroups"].([]any)
	if len(pgs) != 1 || pgs[0].(map[string]any)["name"] != "b-pg2" {
		t.Errorf("portgroups ?shard=S1: %v", pgs)
	}

	// 1.102: a portgroup's physical_network goes to its ports.
	bond := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": node, "name": "b-bond"}).json(t)["uuid"].(string)
	member := h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:00:0d:05", "portgroup_uuid": bond}).json(t)["uuid"].(string)
	h.expect(http.StatusOK, "PATCH", "/v1/portgroups/"+bond, "1.102", []any{map[string]any{"op": "add", "path": "/physical_network", "value": "physnet7"}})
	if got := h.expect(http.StatusOK, "GET", "/v1/ports/"+member, latest, nil).json(t)["physical_network"]; got != "physnet7" {
		t.Errorf("member port physical_network %v after the portgroup's changed", got)
	}

	// 1.98: the escapes name keys holding "/" and "~".
	n := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+node, "1.98", []any{
		map[string]any{"op": "add", "path": "/extra/a~1b", "value": 1},
		map[string]any{"op": "add", "path": "/extra/c~0d", "value": 2},
	}).json(t)
	if ex := n["extra"].(map[string]any); ex["a/b"] != float64(1) || ex["c~d"] != float64(2) {
		t.Fatalf("escaped keys: %v", ex)
	}
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+node, "1.98", []any{map[string]any{"op": "remove", "path": "/extra/a~1b"}})

	// 1.105: a port holding VTEP keys shows {} outside 1.90 - 1.104.
	vt := h.expect(http.StatusCreated, "POST", "/v1/ports", "1.104", map[string]any{"node_uuid": node, "address": "52:54:00:00:0d:04",
		"local_link_connection": map[string]any{"port_id": "p1", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}}).json(t)["uuid"].(string)
	for ver, empty := range map[string]bool{"1.89": true, "1.90": false, "1.104": false, "1.105": true, latest: true} {
		llc := h.expect(http.StatusOK, "GET", "/v1/ports/"+vt, ver, nil).json(t)["local_link_connection"].(map[string]any)
		if (len(llc) == 0) != empty {
			t.Errorf("local_link_connection at %s: %v", ver, llc)
		}
	}
	// A PATCH at a version that hides them keeps them (it patches the
	// stored connection, as Ironic's as_dict).
	h.expect(http.StatusOK, "PATCH", "/v1/ports/"+vt, latest, []any{map[string]any{"op": "replace", "path": "/local_link_connection/port_id", "value": "p2"}})
	llc := h.expect(http.StatusOK, "GET", "/v1/ports/"+vt, "1.104", nil).json(t)["local_link_connection"].(map[string]any)
	if llc["port_id"] != "p2" || llc["vtep-logical-switch"] != "ls" {
		t.Errorf("after a patch at latest: %v", llc)
	}

	// 1.104: instance_name filled from instance_info.display_name (at any
	// version) while unset, then filterable.
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+node, "1.1", []any{map[string]any{"op": "add", "path": "/instance_info/display_name", "value": "web-1"}})
	n = h.expect(http.StatusOK, "GET", "/v1/nodes/"+node, "1.104", nil).json(t)
	if n["instance_name"] != "web-1" {
		t.Fatalf("instance_name from display_name: %v", n["instance_name"])
	}
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+node, "1.104", []any{map[string]any{"op": "add", "path": "/instance_info/display_name", "value": "web-2"}})
	nodes := h.expect(http.StatusOK, "GET", "/v1/nodes?instance_name=web-1", "1.104", nil).json(t)["nodes"].([]any)
	if len(nodes) != 1 || nodes[0].(map[string]any)["uuid"] != node {
		t.Fatalf("?instance_name=web-1 (a set name stays): %v", nodes)
	}

	// 1.113 / 1.115: the history's detail fields.
	h.moveTo(node, "manage", "manageable")
	ev := h.expect(http.StatusOK, "GET", "/v1/nodes/"+node+"/history?detail=true", "1.115", nil).json(t)["history"].([]any)
	if len(ev) == 0 {
		t.Fatal("no history")
	}
	e := ev[0].(map[string]any)
	for _, k := range []string{"project", "state", "target_provision_state", "duration_seconds"} {
		if _, has := e[k]; !has {
			t.Errorf("history detail at 1.115 lacks %s: %v", k, e)
		}
	}
	if st, _ := e["state"].(string); st == "" {
		t.Errorf("history state %v", e["state"])
	}
	t.Logf("history detail at 1.115: %v", e)
	e = h.expect(http.StatusOK, "GET", "/v1/nodes/"+node+"/history?detail=true", "1.113", nil).json(t)["history"].([]any)[0].(map[string]any)
	if _, has := e["project"]; !has {
		t.Errorf("history detail at 1.113 lacks project: %v", e)
	}
	if _, has := e["state"]; has {
		t.Errorf("history detail at 1.113 shows state: %v", e)
	}
	e = h.expect(http.StatusOK, "GET", "/v1/nodes/"+node+"/history?detail=true", "1.112", nil).json(t)["history"].([]any)[0].(map[string]any)
	if _, has := e["project"]; has {
		t.Errorf("history detail at 1.112 shows project: %v", e)
	}
}

// TestMaxAPIVersionPin is serve --max-api-version (Ironic's
// pin_release_version): the ceiling says so everywhere, and what came
// after it answers as an older Ironic does.
func TestMaxAPIVersionPin(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		err  string
	}{{"1.100", 100, ""}, {"1.115", 115, ""}, {"1.1", 1, ""}, {"", 0, ""}, {"latest", 0, ""},
		{"1.116", 0, "above"}, {"2.5", 0, "1.N"}, {"1.x", 0, "1.N"}, {"1.0", 0, "below"}} {
		got, err := ParseMaxAPIVersion(c.in)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseMaxAPIVersion(%q) = %d, %v; want %d, %q", c.in, got, err, c.want, c.err)
		}
	}
	h, node := apiWithNode(t, map[string]any{"name": "pinned"})
	pin := newAPI(t, ceiling(100))
	_ = h
	v1 := pin.expect(http.StatusOK, "GET", "/v1", latest, nil)
	if v := v1.json(t)["version"].(map[string]any)["version"]; v != "1.100" || v1.header.Get("X-OpenStack-Ironic-API-Maximum-Version") != "1.100" {
		t.Fatalf("pinned GET /v1: %v %v", v, v1.header)
	}
	pin.expect(http.StatusNotAcceptable, "GET", "/v1/nodes", "1.101", nil)
	n := pin.createNode(map[string]any{"name": "pinned"})
	if _, has := n["instance_name"]; has {
		t.Errorf("a 1.104 field at a 1.100 ceiling: %v", n)
	}
	pin.expect(http.StatusNotAcceptable, "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "instance_name": "x"})
	_ = node
}

// TestDisablePowerOffLifecycle: a node with disable_power_off is never
// powered off by castiron: a power off is Ironic's 409, and undeploying it
// (tear down, then cleaning) leaves it on; undeploy clears instance_name.
func TestDisablePowerOffLifecycle(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "dpo", "disable_power_off": true, "instance_name": "vm-dpo"})
	h.moveTo(id, "manage", "manageable")
	h.moveTo(id, "provide", "available")
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/power", latest, map[string]any{"target": "power on"})
	h.waitPower(id, "power on")
	for _, target := range []string{"power off", "soft power off"} {
		r := h.expect(http.StatusConflict, "PUT", "/v1/nodes/"+id+"/states/power", latest, map[string]any{"target": target})
		if got := r.faultstring(t); got != "Failed to set node power state to "+target+"." {
			t.Errorf("%s: %q", target, got)
		}
	}
	h.moveTo(id, "active", "active")
	n := h.moveTo(id, "deleted", "available")
	if n["power_state"] != "power on" {
		t.Errorf("after undeploy: power_state %v, want power on", n["power_state"])
	}
	if n["instance_name"] != nil {
		t.Errorf("undeploy kept instance_name %v", n["instance_name"])
	}
	// The same node without the flag is powered off by the tear down.
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "replace", "path": "/disable_power_off", "value": false}})
	h.moveTo(id, "active", "active")
	if n := h.moveTo(id, "deleted", "available"); n["power_state"] != "power off" {
		t.Errorf("after undeploy without the flag: power_state %v", n["power_state"])
	}
}

// TestAbortInWaitCallback is 1.110: abort in "wait call-back" is 406
// below; at 1.110 the deploy fails without cleaning.
func TestAbortInWaitCallback(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "abort-wait"})
	h.db(id, func(n *storage.Node) {
		n.ProvisionState = string(engine.DeployWait)
		active := string(engine.Active)
		n.TargetProvisionState = &active
	})
	h.expect(http.StatusNotAcceptable, "PUT", "/v1/nodes/"+id+"/states/provision", "1.109", map[string]any{"target": "abort"})
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", "1.110", map[string]any{"target": "abort"})
	n := h.waitState(id, "deploy failed")
	if n["target_provision_state"] != nil && n["target_provision_state"] != "active" {
		t.Errorf("after abort: %v", n["target_provision_state"])
	}
}

// TestHeartbeatNodeIdentInBody is POST /v1/heartbeat with node_ident in
// the body, routed as pecan routes it (the tempest plugin's case).
func TestHeartbeatNodeIdentInBody(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "hb"})
	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{map[string]any{"callback_url": "http://1.2.3.4:9999", "agent_token": "x"}, 400, `Missing argument: "node_ident"`},
		{map[string]any{"node_ident": "nosuch", "callback_url": "http://1.2.3.4:9999", "agent_token": "x"}, 404, "Node nosuch could not be found."},
		{map[string]any{"node_ident": "hb", "callback_url": "http://1.2.3.4:9999"}, 400, "Agent token is required for heartbeat processing."},
	} {
		raw, _ := json.Marshal(c.body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		wantFault(t, h.do("POST", "/v1/heartbeat", latest, body), c.status, c.msg)
	}
	_ = id
}

// waitPower waits until the node's power state is want and no change is
// pending.
func (h *apiHarness) waitPower(id, want string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(h.t)
		if n["power_state"] == want && n["target_power_state"] == nil && n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s power %v, want %s", id, n["power_state"], want)
		}
		time.Sleep(3 * time.Millisecond)
	}
}
