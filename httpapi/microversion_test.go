package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestMicroversionGates walks the gates fixed by the 1.1 .. 1.89 audit (see
// COVERAGE.md): each row is one request at one version with the status
// Ironic answers, and optionally a field that must (or must not) be in the
// JSON answer or a fragment of the error message.
func TestMicroversionGates(t *testing.T) {
	h, node := apiWithNode(t, map[string]any{"name": "gate-node"})
	avail := h.createNode(map[string]any{"name": "gate-avail"})["uuid"].(string)
	h.createNode(map[string]any{"name": "dotted.json"})
	h.provision(avail, "manage", nil)
	h.waitState(avail, "manageable")
	h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:00:0a:01"})
	port := h.expect(http.StatusOK, "GET", "/v1/ports", latest, nil).json(t)["ports"].([]any)[0].(map[string]any)["uuid"].(string)
	sub := func(s string) string {
		return strings.NewReplacer("{node}", node, "{avail}", avail, "{port}", port).Replace(s)
	}

	cases := []gateCase{
		// 1.5: logical names; before that a name finds no node.
		{"name lookup below 1.5", "1.4", "GET", "/v1/nodes/gate-node", nil, 404, "", "", "Node gate-node could not be found."},
		{"name lookup at 1.5", "1.5", "GET", "/v1/nodes/gate-node", nil, 200, "name", "", ""},
		{"validate by name below 1.5", "1.4", "GET", "/v1/nodes/gate-node/validate", nil, 406, "", "", ""},
		{"uuid lookup below 1.5", "1.1", "GET", "/v1/nodes/{node}", nil, 200, "uuid", "name", ""},
		{"null name below 1.5", "1.4", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": nil}, 201, "", "", ""},
		{"null resource_class below 1.21", "1.20", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "resource_class": nil}, 201, "", "resource_class", ""},
		{"resource_class below 1.21", "1.20", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "resource_class": "x"}, 406, "", "", ""},
		// 1.9 / 1.42: filters check their value.
		{"unknown provision_state filter", "1.9", "GET", "/v1/nodes?provision_state=bogus", nil, 400, "", "", `Provision state "bogus" is not valid`},
		{"unknown fault filter", "1.42", "GET", "/v1/nodes?fault=bogus", nil, 400, "", "", `Unrecognized fault "bogus"`},
		{"valid fault filter", "1.42", "GET", "/v1/nodes?fault=power%20failure", nil, 200, "nodes", "", ""},
		{"description_contains is not gated", "1.1", "GET", "/v1/nodes?description_contains=x", nil, 200, "nodes", "", ""},
		// 1.10: before it names are host names.
		{"name with ~ below 1.10", "1.9", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": "a~b"}, 400, "", "", "Cannot create node with invalid name 'a~b'"},
		{"name with ~ at 1.10", "1.10", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": "a~b"}, 201, "", "", ""},
		{"patch name with _ below 1.10", "1.9", "PATCH", "/v1/nodes/{node}", []any{map[string]any{"op": "replace", "path": "/name", "value": "a_b"}}, 400, "", "", "Cannot change name to invalid name 'a_b'"},
		// sort_key of a field the version hides (check_allowed_fields).
		{"sort by name below 1.5", "1.4", "GET", "/v1/nodes?sort_key=name", nil, 406, "", "", ""},
		{"sort by name at 1.5", "1.5", "GET", "/v1/nodes?sort_key=name", nil, 200, "nodes", "", ""},
		{"sort ports by pxe_enabled below 1.19", "1.18", "GET", "/v1/ports?sort_key=pxe_enabled", nil, 406, "", "", ""},
		// 1.43: ?detail= before it is Ironic's 400.
		{"nodes detail below 1.43", "1.42", "GET", "/v1/nodes?detail=true", nil, 400, "", "", "Invalid query parameter ?detail=True received."},
		{"ports detail below 1.43", "1.42", "GET", "/v1/ports?detail=true", nil, 400, "", "", "Invalid query parameter ?detail=True received."},
		// 1.35 / 1.56 / 1.59: config drive shapes are 400s in Ironic.
		{"rebuild configdrive below 1.35", "1.34", "PUT", "/v1/nodes/{avail}/states/provision", map[string]any{"target": "rebuild", "configdrive": "abc"}, 400, "", "", "only supported when setting provision state to active"},
		{"configdrive object below 1.56", "1.55", "PUT", "/v1/nodes/{avail}/states/provision", map[string]any{"target": "active", "configdrive": map[string]any{"meta_data": map[string]any{}}}, 400, "", "", "API version 1.56"},
		{"configdrive vendor_data below 1.59", "1.58", "PUT", "/v1/nodes/{avail}/states/provision", map[string]any{"target": "active", "configdrive": map[string]any{"vendor_data": map[string]any{}}}, 400, "", "", "API version 1.59"},
		// 1.64: local_link_connection.network_type.
		{"port network_type below 1.64", "1.63", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0a:02", "local_link_connection": map[string]any{"network_type": "unmanaged"}}, 406, "", "", ""},
		{"port network_type at 1.64", "1.64", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0a:02", "local_link_connection": map[string]any{"network_type": "unmanaged"}}, 201, "", "", ""},
		{"patch network_type below 1.64", "1.63", "PATCH", "/v1/ports/{port}", []any{map[string]any{"op": "add", "path": "/local_link_connection/network_type", "value": "unmanaged"}}, 406, "", "", ""},
		// 1.90: local_link_connection's OVN VTEP switch keys.
		{"port vtep keys below 1.90", "1.89", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0a:03", "local_link_connection": map[string]any{"port_id": "p1", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}}, 406, "", "", ""},
		{"port vtep keys at 1.90", "1.90", "POST", "/v1/ports", map[string]any{"node_uuid": "{node}", "address": "52:54:00:00:0a:03", "local_link_connection": map[string]any{"port_id": "p1", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}}, 201, "local_link_connection", "", ""},
		{"a port with vtep keys shows an empty local_link_connection below 1.90", "1.89", "GET", "/v1/ports/detail?address=52:54:00:00:0a:03", nil, 200, "ports", "", ""},
		{"a port with vtep keys is shown at 1.90", "1.90", "GET", "/v1/ports?address=52:54:00:00:0a:03", nil, 200, "ports", "", ""},
		{"other ports are shown below 1.90", "1.89", "GET", "/v1/ports?address=52:54:00:00:0a:01", nil, 200, "ports", "", ""},
		{"patch vtep key below 1.90", "1.89", "PATCH", "/v1/ports/{port}", []any{map[string]any{"op": "add", "path": "/local_link_connection/vtep-logical-switch", "value": "ls"}}, 406, "", "", ""},
		{"patch vtep keys in the object below 1.90", "1.89", "PATCH", "/v1/ports/{port}", []any{map[string]any{"op": "replace", "path": "/local_link_connection", "value": map[string]any{"port_id": "p1", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}}}, 406, "", "", ""},
		// 1.91: below it (asked in Ironic's header) a path's ".json" suffix is
		// dropped; from 1.91 it is part of the name.
		{"nodes.json below 1.91", "1.90", "GET", "/v1/nodes.json", nil, 200, "nodes", "", ""},
		{"node name.json below 1.91", "1.90", "GET", "/v1/nodes/gate-node.json", nil, 200, "name", "", ""},
		{"node name.json at 1.91", "1.91", "GET", "/v1/nodes/gate-node.json", nil, 404, "", "", "Node gate-node.json could not be found."},
		{"nodes.json at 1.91", "1.91", "GET", "/v1/nodes.json", nil, 404, "", "", ""},
		{"a name ending in .json below 1.91", "1.90", "GET", "/v1/nodes/dotted.json", nil, 200, "name", "", ""},
		{"a name ending in .json at 1.91", "1.91", "GET", "/v1/nodes/dotted.json", nil, 200, "name", "", ""},
		{"patch a name ending in .json below 1.91", "1.90", "PATCH", "/v1/nodes/dotted.json", []any{map[string]any{"op": "add", "path": "/extra/k", "value": "v"}}, 200, "extra", "", ""},
		{"delete a name ending in .json below 1.91", "1.90", "DELETE", "/v1/nodes/dotted.json", nil, 204, "", "", ""},
		{"deleted", "1.91", "GET", "/v1/nodes/dotted.json", nil, 404, "", "", ""},
		{"latest keeps .json", "latest", "GET", "/v1/nodes/gate-node.json", nil, 404, "", "", ""},
		// 1.82: ports ?shard=.
		{"ports shard below 1.82", "1.81", "GET", "/v1/ports?shard=a", nil, 406, "", "", ""},
		{"ports shard at 1.82", "1.82", "GET", "/v1/ports?shard=a", nil, 200, "ports", "", ""},
		// Drivers: type 1.30, storage interface 1.33, fields 1.77.
		{"drivers type below 1.30", "1.29", "GET", "/v1/drivers?type=dynamic", nil, 406, "", "", ""},
		{"driver storage below 1.33", "1.32", "GET", "/v1/drivers/fake-hardware", nil, 200, "default_boot_interface", "default_storage_interface", ""},
		{"driver storage at 1.33", "1.33", "GET", "/v1/drivers/fake-hardware", nil, 200, "default_storage_interface", "", ""},
		{"driver fields below 1.77", "1.76", "GET", "/v1/drivers/fake-hardware?fields=name", nil, 406, "", "", ""},
		{"driver fields at 1.77", "1.77", "GET", "/v1/drivers/fake-hardware?fields=name", nil, 200, "links", "hosts", ""},
		{"driver unknown field", "1.77", "GET", "/v1/drivers/fake-hardware?fields=bogus", nil, 400, "", "", `Field(s) "bogus" are not valid`},
		{"drivers fields and detail", "1.77", "GET", "/v1/drivers?fields=name&detail=true", nil, 400, "", "", "Can not specify ?detail=True and fields"},
	}
	runGateCases(t, h, sub, cases)
}

// TestListDetailDoesNotStick: ?detail=true once must not turn every later
// summary list of the same route into a detailed one (the handler closure
// used to keep it).
func TestListDetailDoesNotStick(t *testing.T) {
	h, node := apiWithNode(t, map[string]any{})
	h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:00:0b:01"})
	for _, coll := range []string{"nodes", "ports"} {
		h.expect(http.StatusOK, "GET", "/v1/"+coll+"?detail=true", latest, nil)
		items := h.expect(http.StatusOK, "GET", "/v1/"+coll, latest, nil).json(t)[coll].([]any)
		if _, detailed := items[0].(map[string]any)["created_at"]; detailed {
			t.Errorf("GET /v1/%s after ?detail=true is still detailed: %v", coll, items[0])
		}
		h.expect(http.StatusOK, "GET", "/v1/"+coll+"?fields=uuid", latest, nil)
	}
}

// gateCase is one row of a microversion gate table: one request at one
// version and Ironic's answer.
type gateCase struct {
	name    string
	ver     string
	method  string
	path    string
	body    any
	status  int
	has     string // field that must be present (top level)
	hasNot  string // field that must be absent (top level)
	message string // fragment of the error message
}

// runGateCases runs each row as a subtest; sub fills the placeholders of
// its path and of its body's top-level strings.
func runGateCases(t *testing.T, h *apiHarness, sub func(string) string, cases []gateCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := c.body
			if m, ok := body.(map[string]any); ok {
				cp := map[string]any{}
				for k, v := range m {
					if s, ok := v.(string); ok {
						v = sub(s)
					}
					cp[k] = v
				}
				body = cp
			}
			r := h.expect(c.status, c.method, sub(c.path), c.ver, body)
			if c.has != "" || c.hasNot != "" {
				m := r.json(t)
				if _, ok := m[c.has]; c.has != "" && !ok {
					t.Errorf("%s missing in %s", c.has, r.body)
				}
				if _, ok := m[c.hasNot]; c.hasNot != "" && ok {
					t.Errorf("%s present in %s", c.hasNot, r.body)
				}
			}
			if c.message != "" && !strings.Contains(r.faultstring(t), c.message) {
				t.Errorf("message %q does not contain %q", r.faultstring(t), c.message)
			}
		})
	}
}
