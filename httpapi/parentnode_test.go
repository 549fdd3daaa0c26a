package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

func parentRefusal(v string) string {
	return "Unable to apply the requested parent_node '" + v + "'. Requested value was invalid."
}

// TestParentNodeResolved: a parent named by name or UUID is stored as its
// UUID (POST and PATCH), so the parent's children list finds the child;
// an unknown parent and a value over 36 characters answer Ironic's 400s.
func TestParentNodeResolved(t *testing.T) {
	h, rack1 := apiWithNode(t, map[string]any{"name": "rack-1"})
	rack2 := h.createNode(map[string]any{"name": "rack-2"})["uuid"].(string)

	byName := h.createNode(map[string]any{"parent_node": "rack-1"})
	if byName["parent_node"] != rack1 {
		t.Errorf("POST parent_node=rack-1 stored %v, want %s", byName["parent_node"], rack1)
	}
	byUUID := h.createNode(map[string]any{"parent_node": rack1})
	if byUUID["parent_node"] != rack1 {
		t.Errorf("POST parent_node=<uuid> stored %v, want %s", byUUID["parent_node"], rack1)
	}
	got := h.expect(http.StatusOK, "GET", "/v1/nodes/rack-1/children", latest, nil).json(t)["children"].([]any)
	if len(got) != 2 || got[0] != byName["uuid"] || got[1] != byUUID["uuid"] {
		t.Errorf("rack-1 children = %v, want [%v %v]", got, byName["uuid"], byUUID["uuid"])
	}
	if l := h.expect(http.StatusOK, "GET", "/v1/nodes?parent_node="+rack1, latest, nil).json(t)["nodes"].([]any); len(l) != 2 {
		t.Errorf("?parent_node=<uuid> lists %d nodes, want 2", len(l))
	}

	// PATCH by name: add, then replace.
	child := h.createNode(map[string]any{})["uuid"].(string)
	op := func(o, v any) []any { return []any{map[string]any{"op": o, "path": "/parent_node", "value": v}} }
	if n := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+child, latest, op("add", "rack-2")).json(t); n["parent_node"] != rack2 {
		t.Errorf("PATCH add parent_node=rack-2: %v, want %s", n["parent_node"], rack2)
	}
	if kids := h.expect(http.StatusOK, "GET", "/v1/nodes/rack-2/children", latest, nil).json(t)["children"].([]any); len(kids) != 1 || kids[0] != child {
		t.Errorf("rack-2 children = %v, want [%s]", kids, child)
	}
	if n := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+child, latest, op("replace", "rack-1")).json(t); n["parent_node"] != rack1 {
		t.Errorf("PATCH replace parent_node=rack-1: %v, want %s", n["parent_node"], rack1)
	}

	// Refusals: nothing stored.
	long := strings.Repeat("p", 37)
	for _, c := range []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"POST unknown", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "parent_node": "nosuch"}, parentRefusal("nosuch")},
		{"POST unknown uuid", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "parent_node": "9a4d4e6c-3a38-4c0e-9c07-2f1c5f3b0a11"},
			parentRefusal("9a4d4e6c-3a38-4c0e-9c07-2f1c5f3b0a11")},
		{"POST too long", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "parent_node": long}, "Schema error for node: '" + long + "' is too long"},
		{"POST not a string", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "parent_node": 5}, "Schema error for node: 5 is not of type 'string', 'null'"},
		{"POST other owner", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "owner": "p1", "parent_node": "rack-1"}, parentRefusal("rack-1")},
		{"PATCH unknown", "PATCH", "/v1/nodes/" + child, op("replace", "nosuch"), parentRefusal("nosuch")},
		{"PATCH unknown and long", "PATCH", "/v1/nodes/" + child, op("replace", long), parentRefusal(long)},
		// Ironic looks up every value a patch sets, null included.
		{"PATCH null", "PATCH", "/v1/nodes/" + child, op("replace", nil), parentRefusal("None")},
	} {
		r := h.expect(http.StatusBadRequest, c.method, c.path, latest, c.body)
		if got := r.faultstring(t); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+child, latest, nil).json(t); n["parent_node"] != rack1 {
		t.Errorf("after refused patches parent_node = %v, want %s", n["parent_node"], rack1)
	}
	h.expect(http.StatusNotFound, "PATCH", "/v1/nodes/nosuch", latest, op("add", "rack-1"))

	// remove unlinks without a lookup.
	rm := []any{map[string]any{"op": "remove", "path": "/parent_node"}}
	if n := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+child, latest, rm).json(t); n["parent_node"] != nil {
		t.Errorf("PATCH remove parent_node: %v", n["parent_node"])
	}
}

// TestParentNodeAccess: a parent the caller cannot see, or owned by
// another project, is refused with the same 400 as an unknown one; a
// project reader's children list shows its project's children only.
func TestParentNodeAccess(t *testing.T) {
	h := newRBAC(t)
	a, _, _, _ := rbacFixture(t, h) // node-a: owner "owner", lessee "lessee"; node-b: nobody's

	h.want(201, "otheradmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "name": "mine"})
	if n := h.want(201, "otheradmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "parent_node": "mine"}).json(t); n["owner"] != "other" || n["parent_node"] == "mine" {
		t.Errorf("project admin's child: owner %v parent_node %v", n["owner"], n["parent_node"])
	}
	for _, parent := range []string{"node-a", "node-b", a} { // invisible; visible to nobody but the system; by UUID
		r := h.want(400, "otheradmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "parent_node": parent})
		if got := r.faultstring(t); got != parentRefusal(parent) {
			t.Errorf("otheradmin parent %s: %q", parent, got)
		}
	}

	kid := h.want(201, "sysadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "owner": "owner", "parent_node": "node-a"}).json(t)["uuid"].(string)
	moved := h.want(201, "sysadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "owner": "owner", "parent_node": "node-a"}).json(t)["uuid"].(string)
	h.want(200, "sysadmin", "PATCH", "/v1/nodes/"+moved, latest, []any{map[string]any{"op": "replace", "path": "/owner", "value": "elsewhere"}})
	for user, want := range map[string][]string{"sysreader": {kid, moved}, "ownerreader": {kid}, "lesseereader": {}} {
		got := h.want(200, user, "GET", "/v1/nodes/"+a+"/children", latest, nil).json(t)["children"].([]any)
		if len(got) != len(want) {
			t.Errorf("%s sees children %v, want %v", user, got, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s sees children %v, want %v", user, got, want)
			}
		}
	}
	h.want(404, "otheradmin", "GET", "/v1/nodes/"+a+"/children", latest, nil)
}
