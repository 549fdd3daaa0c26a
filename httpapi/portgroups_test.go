package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"castiron/storage"
)

// setNodeState puts a node straight into a provision state and reservation
// through the store, as a running task would leave it.
func setNodeState(t *testing.T, h *apiHarness, ident, state string, reservation *string) {
	t.Helper()
	_, err := h.store.UpdateNode(context.Background(), ident, func(n *storage.Node) (*storage.Event, error) {
		n.ProvisionState = state
		n.Reservation = reservation
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPortgroupCRUD(t *testing.T) {
	h := newAPI(t)
	node := h.createNode(map[string]any{"name": "n1"})
	nodeID := node["uuid"].(string)

	h.expect(http.StatusNotFound, "GET", "/v1/portgroups", "1.22", nil)
	h.expect(http.StatusNotFound, "POST", "/v1/portgroups", "1.22", map[string]any{"node_uuid": nodeID})

	r := h.expect(http.StatusCreated, "POST", "/v1/portgroups", "1.23", map[string]any{
		"node_uuid": nodeID, "address": "52:54:00:AA:BB:CC", "name": "bond0", "extra": map[string]any{"k": "v"},
	})
	pg := r.json(t)
	id := pg["uuid"].(string)
	if loc := r.header.Get("Location"); loc != h.srv.URL+"/v1/portgroups/"+id {
		t.Fatalf("Location %q", loc)
	}
	// Ironic 21.4 shows mode and properties from 1.23 (the stock tempest
	// plugin reads them there).
	if got, want := argSortedKeys(pg), []string{"address", "created_at", "extra", "internal_info", "links", "mode", "name", "node_uuid", "ports", "properties", "standalone_ports_supported", "updated_at", "uuid"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("1.23 fields %v, want %v", got, want)
	}
	if pg["address"] != "52:54:00:aa:bb:cc" || pg["node_uuid"] != nodeID || pg["standalone_ports_supported"] != true {
		t.Fatalf("created %v", pg)
	}
	ports := pg["ports"].([]any)
	if ports[0].(map[string]any)["href"] != h.srv.URL+"/v1/portgroups/"+id+"/ports" {
		t.Fatalf("ports links %v", ports)
	}
	full := h.expect(http.StatusOK, "GET", "/v1/portgroups/bond0", latest, nil).json(t)
	if full["uuid"] != id || full["mode"] != "active-backup" || !reflect.DeepEqual(full["properties"], map[string]any{}) {
		t.Fatalf("by name at latest %v", full)
	}
	if full["physical_network"] != nil || full["category"] != nil || full["dynamic_portgroup"] != false {
		t.Errorf("1.102, 1.103, 1.111 fields at latest: %v", full)
	}
	old := h.expect(http.StatusOK, "GET", "/v1/portgroups/bond0", "1.101", nil).json(t)
	for _, f := range []string{"physical_network", "category", "dynamic_portgroup"} {
		if _, has := old[f]; has {
			t.Errorf("%s served at 1.101", f)
		}
	}
	h.expect(http.StatusOK, "GET", "/portgroups/"+id, latest, nil) // bookmark

	// mode and properties need 1.26.
	h.expect(http.StatusNotAcceptable, "POST", "/v1/portgroups", "1.25", map[string]any{"node_uuid": nodeID, "mode": "802.3ad"})
	h.expect(http.StatusNotAcceptable, "POST", "/v1/portgroups", "1.25", map[string]any{"node_uuid": nodeID, "properties": map[string]any{"a": 1}})
	h.expect(http.StatusNotAcceptable, "GET", "/v1/portgroups?fields=mode", "1.25", nil)
	h.expect(http.StatusNotAcceptable, "GET", "/v1/portgroups/"+id+"?fields=properties", "1.25", nil)
	h.expect(http.StatusNotAcceptable, "GET", "/v1/portgroups?sort_key=mode", "1.25", nil)
	second := h.expect(http.StatusCreated, "POST", "/v1/portgroups", "1.26", map[string]any{
		"node_uuid": nodeID, "mode": "802.3ad", "properties": map[string]any{"miimon": 100}, "standalone_ports_supported": "false",
	}).json(t)
	if second["mode"] != "802.3ad" || second["properties"].(map[string]any)["miimon"] != float64(100) || second["standalone_ports_supported"] != false || second["name"] != nil || second["address"] != nil {
		t.Fatalf("second %v", second)
	}

	// Lists.
	other := h.createNode(map[string]any{"name": "n2"})["uuid"].(string)
	h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": other, "name": "other-bond", "address": "52:54:00:00:00:99"})
	names := func(path, ver string) []any {
		var out []any
		for _, x := range h.expect(http.StatusOK, "GET", path, ver, nil).json(t)["portgroups"].([]any) {
			out = append(out, x.(map[string]any)["name"])
		}
		return out
	}
	if got := names("/v1/portgroups", latest); !reflect.DeepEqual(got, []any{"bond0", nil, "other-bond"}) {
		t.Fatalf("list %v", got)
	}
	summary := h.expect(http.StatusOK, "GET", "/v1/portgroups", latest, nil).json(t)["portgroups"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(argSortedKeys(summary), []string{"address", "links", "name", "uuid"}) {
		t.Fatalf("summary %v", summary)
	}
	detail := h.expect(http.StatusOK, "GET", "/v1/portgroups/detail", latest, nil).json(t)["portgroups"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(detail, full) {
		t.Fatalf("detail %v, want %v", detail, full)
	}
	if got := names("/v1/portgroups?node=n1", latest); !reflect.DeepEqual(got, []any{"bond0", nil}) {
		t.Fatalf("node filter %v", got)
	}
	if got := names("/v1/portgroups?address=52:54:00:AA:BB:CC", latest); !reflect.DeepEqual(got, []any{"bond0"}) {
		t.Fatalf("address filter %v", got)
	}
	if got := names("/v1/nodes/n2/portgroups", "1.24"); !reflect.DeepEqual(got, []any{"other-bond"}) {
		t.Fatalf("node sub-resource %v", got)
	}
	sub := h.expect(http.StatusOK, "GET", "/v1/nodes/"+nodeID+"/portgroups/detail?limit=1", latest, nil).json(t)
	if next, _ := sub["next"].(string); !strings.HasPrefix(next, h.srv.URL+"/v1/nodes/"+nodeID+"/portgroups/detail?") {
		t.Fatalf("sub-resource next link %v", sub["next"])
	}
	if got := names("/v1/portgroups?fields=name&sort_key=name&sort_dir=desc", latest); !reflect.DeepEqual(got, []any{"other-bond", "bond0", nil}) {
		t.Fatalf("sorted %v", got)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/n2/portgroups", "1.23", nil)

	// PATCH.
	p := h.expect(http.StatusOK, "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{
		{"op": "replace", "path": "/name", "value": "bond9"},
		{"op": "add", "path": "/extra/x", "value": 1},
		{"op": "replace", "path": "/mode", "value": "balance-rr"},
		{"op": "add", "path": "/properties/miimon", "value": 50},
		{"op": "replace", "path": "/address", "value": "52:54:00:AA:BB:CD"},
		{"op": "replace", "path": "/standalone_ports_supported", "value": false},
	}).json(t)
	if p["name"] != "bond9" || !reflect.DeepEqual(p["extra"], map[string]any{"k": "v", "x": float64(1)}) || p["mode"] != "balance-rr" ||
		p["properties"].(map[string]any)["miimon"] != float64(50) || p["address"] != "52:54:00:aa:bb:cd" || p["standalone_ports_supported"] != false || p["updated_at"] == nil {
		t.Fatalf("patched %v", p)
	}
	p = h.expect(http.StatusOK, "PATCH", "/v1/portgroups/"+id, "1.23", []map[string]any{
		{"op": "remove", "path": "/name"}, {"op": "remove", "path": "/address"}, {"op": "remove", "path": "/extra"},
	}).json(t)
	if p["name"] != nil || p["address"] != nil || !reflect.DeepEqual(p["extra"], map[string]any{}) {
		t.Fatalf("after removals %v", p)
	}
	// Move to another node (both enroll, portgroup empty).
	p = h.expect(http.StatusOK, "PATCH", "/v1/portgroups/"+id, latest, []map[string]any{{"op": "replace", "path": "/node_uuid", "value": other}}).json(t)
	if p["node_uuid"] != other {
		t.Fatalf("moved %v", p)
	}

	// DELETE.
	h.expect(http.StatusNoContent, "DELETE", "/v1/portgroups/"+id, latest, nil)
	h.expect(http.StatusNotFound, "GET", "/v1/portgroups/"+id, latest, nil)
	// Deleting a node deletes its portgroups.
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/n2", latest, nil)
	h.expect(http.StatusNotFound, "GET", "/v1/portgroups/other-bond", latest, nil)
	if got := names("/v1/portgroups", latest); len(got) != 1 {
		t.Fatalf("after deletes %v", got)
	}
}

func TestPortgroupErrors(t *testing.T) {
	h, nodeID := apiWithNode(t, map[string]any{"name": "n1"})
	pg := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "name": "bond0", "address": "52:54:00:00:00:01"}).json(t)
	id := pg["uuid"].(string)
	missing := uuid.NewString()
	h.requestFaults(t, append(listQueryFaults("portgroups", "name"), []requestFault{
		{"get unknown", "GET", "/v1/portgroups/" + missing, latest, nil, 404, "Portgroup " + missing + " could not be found."},
		{"get unknown name", "GET", "/v1/portgroups/nope", latest, nil, 404, "Portgroup nope could not be found."},
		{"get bad ident", "GET", "/v1/portgroups/a%20b", latest, nil, 400, "Expected UUID or name for portgroup_ident: a b"},
		{"unknown node filter", "GET", "/v1/portgroups?node=nope", latest, nil, 404, "Node nope could not be found."},
		{"bad address filter", "GET", "/v1/portgroups?address=zz", latest, nil, 400, "Expected valid MAC address for address: zz"},
		{"node and address", "GET", "/v1/portgroups?node=n1&address=52:54:00:00:00:01", latest, nil, 400, "Filtering by node, address, or shard simultaneously is not supported."},
		{"sort by extra", "GET", "/v1/portgroups?sort_key=internal_info", latest, nil, 400, "The sort_key value internal_info is an invalid field for sorting"},
		{"bad marker", "GET", "/v1/portgroups?marker=x", latest, nil, 400, "Expected UUID for marker: x"},
		{"unknown marker", "GET", "/v1/portgroups?marker=" + missing, latest, nil, 404, "Portgroup " + missing + " could not be found."},
		{"unknown node of node list", "GET", "/v1/nodes/nope/portgroups", latest, nil, 404, "Node nope could not be found."},

		{"post no node", "POST", "/v1/portgroups", latest, map[string]any{"name": "x"}, 400, "Schema error for portgroup: 'node_uuid' is a required property"},
		{"post unknown field", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "bond_mode": "p"}, 400, "Schema error for portgroup: Additional properties are not allowed ('bond_mode' was unexpected)"},
		{"post node type", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": 1}, 400, "Schema error for portgroup: 1 is not of type 'string'"},
		{"post extra type", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "extra": "x"}, 400, "Schema error for portgroup: 'x' is not of type 'object', 'null'"},
		{"post standalone type", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "standalone_ports_supported": 1}, 400, "Schema error for portgroup: 1 is not of type 'string', 'boolean', 'null'"},
		{"post standalone value", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "standalone_ports_supported": "maybe"}, 400,
			"Invalid standalone_ports_supported: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"},
		{"post node not a uuid", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": "n1"}, 400, "Expected UUID for node_uuid: n1"},
		{"post unknown node", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": missing}, 400, "Node " + missing + " could not be found."},
		{"post bad mac", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "address": "zz"}, 400, "Expected valid MAC address for address: zz"},
		{"post bad uuid", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "uuid": "u"}, 400, "Expected UUID for uuid: u"},
		{"post bad name", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "name": "a b"}, 400, "Cannot create portgroup with invalid name 'a b'"},
		{"post duplicate name", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "name": "bond0"}, 409, "A portgroup with name bond0 already exists."},
		{"post duplicate address", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "address": "52:54:00:00:00:01"}, 409, "A portgroup with MAC address 52:54:00:00:00:01 already exists."},
		{"post duplicate uuid", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": nodeID, "uuid": id}, 409, "A portgroup with UUID " + id + " already exists."},

		{"patch unknown", "PATCH", "/v1/portgroups/" + missing, latest, []map[string]any{{"op": "remove", "path": "/extra"}}, 404, "Portgroup " + missing + " could not be found."},
		{"patch uuid", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "replace", "path": "/uuid", "value": missing}}, 400,
			"Cannot patch /uuid. Only the following can be updated: address, extra, mode, name, node_uuid, properties, standalone_ports_supported, physical_network, category"},
		{"patch internal_info", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "add", "path": "/internal_info/a", "value": 1}}, 400, ""},
		{"patch mode before 1.26", "PATCH", "/v1/portgroups/bond0", "1.25", []map[string]any{{"op": "replace", "path": "/mode", "value": "x"}}, 406, ""},
		{"patch remove mode", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "remove", "path": "/mode"}}, 400, "'mode' is a mandatory attribute and can not be removed"},
		{"patch bad name", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "replace", "path": "/name", "value": "a b"}}, 400, "Portgroup bond0: Cannot change name to invalid name 'a b'"},
		{"patch bad mac", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "replace", "path": "/address", "value": "zz"}}, 400, "Expected valid MAC address for address: zz"},
		// Ironic's authorize_node_link (CVE-2026-44918): one answer for a node
		// that does not exist, one the caller cannot see, one of another owner.
		{"patch unknown node", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "replace", "path": "/node_uuid", "value": missing}}, 400, "Unable to apply the requested node_uuid '" + missing + "'. Requested value was invalid."},
		{"patch unknown node name", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "replace", "path": "/node_uuid", "value": "nosuch"}}, 400, "Unable to apply the requested node_uuid 'nosuch'. Requested value was invalid."},
		{"patch extra type", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "replace", "path": "/extra", "value": 1}}, 400, "Schema error for patch: 1 is not of type 'object', 'null'"},
		{"patch add root", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "add", "path": "/bogus", "value": 1}}, 400, ""},
		{"patch bad op", "PATCH", "/v1/portgroups/bond0", latest, []map[string]any{{"op": "copy", "path": "/name"}}, 400, "Schema error for patch: 'copy' is not one of ['add', 'replace', 'remove']"},

		{"delete unknown", "DELETE", "/v1/portgroups/" + missing, latest, nil, 404, "Portgroup " + missing + " could not be found."},
		{"delete bad ident", "DELETE", "/v1/portgroups/a%20b", latest, nil, 400, "Expected a logical name or UUID but received a b."},
		{"put", "PUT", "/v1/portgroups/bond0", latest, map[string]any{}, 405, ""},
	}...))
	if got := h.expect(http.StatusOK, "GET", "/v1/portgroups/"+id, latest, nil).json(t); !reflect.DeepEqual(got, pg) {
		t.Fatalf("after failed requests %v, want %v", got, pg)
	}
}

func TestPortgroupNodeStates(t *testing.T) {
	h, a := apiWithNode(t, map[string]any{"name": "a"})
	b := h.createNode(map[string]any{"name": "b"})["uuid"].(string)
	pg := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": a, "name": "bond0"}).json(t)
	id := pg["uuid"].(string)
	patch := func(status int, ops ...map[string]any) resp {
		t.Helper()
		return h.expect(status, "PATCH", "/v1/portgroups/bond0", latest, ops)
	}
	extra := map[string]any{"op": "add", "path": "/extra/x", "value": 1}
	toB := map[string]any{"op": "replace", "path": "/node_uuid", "value": b}

	host := "other-host"
	setNodeState(t, h, a, "manageable", &host)
	r := patch(http.StatusConflict, extra)
	if got := r.faultstring(t); got != "Node "+a+" is locked by host other-host, please retry after the current operation is completed." {
		t.Fatalf("locked: %q", got)
	}
	h.expect(http.StatusConflict, "DELETE", "/v1/portgroups/bond0", latest, nil)
	setNodeState(t, h, a, "inspecting", nil)
	r = patch(http.StatusConflict, extra)
	if got := r.faultstring(t); got != `Cannot update portgroup "`+id+`" on node "`+a+`" while it is in state "inspecting".` {
		t.Fatalf("inspecting: %q", got)
	}
	setNodeState(t, h, a, "manageable", nil)
	patch(http.StatusOK, extra)

	// Moving to a node in a state that does not allow it.
	setNodeState(t, h, b, "active", nil)
	r = patch(http.StatusConflict, toB)
	if got := r.faultstring(t); got != "Portgroup "+id+" can not be associated to node "+b+" unless the node is in a enroll, inspecting, inspect wait, manageable state or in maintenance mode. Current state is 'active'." {
		t.Fatalf("move to active node: %q", got)
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/b/maintenance", latest, map[string]any{"reason": "x"})
	setNodeState(t, h, b, "active", nil)
	// ... allowed in maintenance, but not while the portgroup has ports.
	h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": a, "address": "52:54:00:00:00:01", "portgroup_uuid": id})
	r = patch(http.StatusBadRequest, toB)
	if got := r.faultstring(t); got != "Portgroup "+id+" can not be associated with node "+b+" because there are ports associated with this portgroup." {
		t.Fatalf("move non-empty: %q", got)
	}
	r = h.expect(http.StatusBadRequest, "DELETE", "/v1/portgroups/"+id, latest, nil)
	if got := r.faultstring(t); !strings.HasPrefix(got, "Cannot complete the requested action because portgroup ") || !strings.HasSuffix(got, " contains ports.") {
		t.Fatalf("delete non-empty: %q", got)
	}
	h.expect(http.StatusNoContent, "DELETE", "/v1/ports/"+h.expect(http.StatusOK, "GET", "/v1/ports?address=52:54:00:00:00:01", latest, nil).json(t)["ports"].([]any)[0].(map[string]any)["uuid"].(string), latest, nil)
	if got := patch(http.StatusOK, toB).json(t); got["node_uuid"] != b {
		t.Fatalf("moved %v", got)
	}
}

func TestPortPortgroupMembership(t *testing.T) {
	h, a := apiWithNode(t, map[string]any{"name": "a", "network_interface": "flat"})
	b := h.createNode(map[string]any{"name": "b"})["uuid"].(string)
	newPG := func(node, name string, standalone bool) string {
		t.Helper()
		return h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{
			"node_uuid": node, "name": name, "standalone_ports_supported": standalone,
		}).json(t)["uuid"].(string)
	}
	pgA := newPG(a, "bond-a", true)
	pgB := newPG(b, "bond-b", true)
	strict := newPG(a, "strict", false)
	n := 0
	port := func(status int, node string, fields map[string]any) resp {
		t.Helper()
		n++
		body := map[string]any{"node_uuid": node, "address": fmt.Sprintf("52:54:00:00:01:%02x", n)}
		for k, v := range fields {
			body[k] = v
		}
		return h.expect(status, "POST", "/v1/ports", latest, body)
	}
	msg := func(r resp, want string) {
		t.Helper()
		if got := r.faultstring(t); got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	}

	missing := uuid.NewString()
	msg(port(http.StatusBadRequest, a, map[string]any{"portgroup_uuid": missing}), "Portgroup "+missing+" could not be found.")
	msg(port(http.StatusBadRequest, a, map[string]any{"portgroup_uuid": "bond-a"}), "Expected UUID for portgroup_uuid: bond-a")
	msg(port(http.StatusBadRequest, a, map[string]any{"portgroup_uuid": pgB}), "Port can not be added to a portgroup belonging to a different node.")
	msg(port(http.StatusConflict, a, map[string]any{"portgroup_uuid": strict}),
		"Port group "+strict+" doesn't support standalone ports. This port cannot be created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.")
	inStrict := port(http.StatusCreated, a, map[string]any{"portgroup_uuid": strings.ToUpper(strict), "pxe_enabled": false}).json(t)
	if inStrict["portgroup_uuid"] != strict {
		t.Fatalf("portgroup_uuid %v, want canonical %s", inStrict["portgroup_uuid"], strict)
	}

	// Physical networks (1.34): every port of a portgroup shares one.
	p1 := port(http.StatusCreated, a, map[string]any{"portgroup_uuid": pgA, "physical_network": "physnet1"}).json(t)
	msg(port(http.StatusConflict, a, map[string]any{"portgroup_uuid": pgA, "physical_network": "physnet2"}),
		"Port with physical network physnet2 cannot become a member of port group "+pgA+" which has ports in physical network physnet1.")
	msg(port(http.StatusConflict, a, map[string]any{"portgroup_uuid": pgA}),
		"Port with physical network None cannot become a member of port group "+pgA+" which has ports in physical network physnet1.")
	p2 := port(http.StatusCreated, a, map[string]any{"portgroup_uuid": pgA, "physical_network": "physnet1"}).json(t)
	loner := port(http.StatusCreated, a, map[string]any{"physical_network": "physnet2"}).json(t)

	// Below 1.102: from it, a member port's physical_network is the
	// portgroup's and cannot be patched (microversion_115_test.go).
	patchPort := func(status int, p map[string]any, ops ...map[string]any) resp {
		t.Helper()
		return h.expect(status, "PATCH", "/v1/ports/"+p["uuid"].(string), "1.101", ops)
	}
	join := map[string]any{"op": "replace", "path": "/portgroup_uuid", "value": pgA}
	msg(patchPort(http.StatusConflict, loner, join),
		"Port with physical network physnet2 cannot become a member of port group "+pgA+" which has ports in physical network physnet1.")
	patchPort(http.StatusOK, loner, join, map[string]any{"op": "replace", "path": "/physical_network", "value": "physnet1"})
	msg(patchPort(http.StatusConflict, p1, map[string]any{"op": "replace", "path": "/physical_network", "value": "physnet3"}),
		"Port with physical network physnet3 cannot become a member of port group "+pgA+" which has ports in physical network physnet1.")
	msg(patchPort(http.StatusBadRequest, p2, map[string]any{"op": "replace", "path": "/node_uuid", "value": b}),
		"Port can not be added to a portgroup belonging to a different node.")
	// Leaving the portgroup and moving is fine; so is changing the
	// physical network of a portgroup's only port.
	patchPort(http.StatusOK, p2, map[string]any{"op": "remove", "path": "/portgroup_uuid"}, map[string]any{"op": "replace", "path": "/node_uuid", "value": b})
	patchPort(http.StatusOK, p2, map[string]any{"op": "replace", "path": "/portgroup_uuid", "value": pgB}, map[string]any{"op": "replace", "path": "/physical_network", "value": "physnet9"})

	// Standalone ports on a flat network: PXE or a VIF on a member of a
	// portgroup without standalone ports is refused on update ...
	msg(patchPort(http.StatusConflict, inStrict, map[string]any{"op": "replace", "path": "/pxe_enabled", "value": true}),
		"Port group "+strict+" doesn't support standalone ports. This port "+inStrict["uuid"].(string)+" cannot be  a member of that port group because of: 'pxe_enabled' was set to True")
	// ... and standalone_ports_supported cannot be turned off under one.
	msg(h.expect(http.StatusConflict, "PATCH", "/v1/portgroups/bond-a", latest, []map[string]any{{"op": "replace", "path": "/standalone_ports_supported", "value": false}}),
		"standalone_ports_supported can not be set to False, because the port group "+pgA+" contains port with 'pxe_enabled' is set to True")
	// The noop network interface checks neither (Ironic's NoopNetwork).
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/a", latest, []map[string]any{{"op": "replace", "path": "/network_interface", "value": "noop"}})
	patchPort(http.StatusOK, inStrict, map[string]any{"op": "replace", "path": "/pxe_enabled", "value": true})
	h.expect(http.StatusOK, "PATCH", "/v1/portgroups/bond-a", latest, []map[string]any{{"op": "replace", "path": "/standalone_ports_supported", "value": false}})

	// Port lists by portgroup.
	members := func(path, ver string) []string {
		t.Helper()
		var out []string
		for _, x := range h.expect(http.StatusOK, path[:strings.Index(path, " ")], path[strings.Index(path, " ")+1:], ver, nil).json(t)["ports"].([]any) {
			out = append(out, x.(map[string]any)["uuid"].(string))
		}
		return out
	}
	want := []string{p1["uuid"].(string), loner["uuid"].(string)}
	for _, path := range []string{"GET /v1/portgroups/bond-a/ports", "GET /v1/portgroups/" + pgA + "/ports/detail", "GET /v1/ports?portgroup=bond-a", "GET /v1/ports/detail?portgroup=" + pgA} {
		if got := members(path, "1.24"); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v, want %v", path, got, want)
		}
	}
	h.expect(http.StatusNotFound, "GET", "/v1/portgroups/bond-a/ports", "1.23", nil)
	h.expect(http.StatusNotAcceptable, "GET", "/v1/ports?portgroup=bond-a", "1.23", nil)
	msg(h.expect(http.StatusNotFound, "GET", "/v1/portgroups/nope/ports", latest, nil), "Portgroup nope could not be found.")
	msg(h.expect(http.StatusNotFound, "GET", "/v1/ports?portgroup=nope", latest, nil), "Portgroup nope could not be found.")
	msg(h.expect(http.StatusForbidden, "GET", "/v1/portgroups/bond-a/ports?node=a", latest, nil), "Operation not permitted.")
	detail := h.expect(http.StatusOK, "GET", "/v1/portgroups/bond-a/ports/detail", latest, nil).json(t)["ports"].([]any)[0].(map[string]any)
	if detail["portgroup_uuid"] != pgA || detail["physical_network"] != "physnet1" {
		t.Fatalf("member detail %v", detail)
	}
}

// TestPortgroupPhysnetInconsistent: member ports that already disagree (a
// database edited by hand) make Ironic's PortgroupPhysnetInconsistent, a 500
// with its message.
func TestPortgroupPhysnetInconsistent(t *testing.T) {
	h, a := apiWithNode(t, map[string]any{"name": "a"})
	pg := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": a}).json(t)["uuid"].(string)
	for i, net := range []string{"x", "y"} {
		p := &storage.Port{NodeUUID: a, Address: fmt.Sprintf("52:54:00:00:02:%02x", i), PortgroupUUID: &pg, PhysicalNetwork: &net}
		if err := h.store.CreatePort(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	r := h.expect(http.StatusInternalServerError, "POST", "/v1/ports", latest, map[string]any{"node_uuid": a, "address": "52:54:00:00:02:09", "portgroup_uuid": pg})
	if got := r.faultstring(t); got != "Port group "+pg+" has member ports with inconsistent physical networks (x, y). All ports in a port group must have the same physical network." {
		t.Fatalf("message %q", got)
	}
}
