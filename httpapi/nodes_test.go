package httpapi

import (
	"net/http"
	"testing"
)

// activeNode makes a fake-hardware node and deploys it.
func (h *apiHarness) activeNode(name string) string {
	h.t.Helper()
	id := h.createNode(map[string]any{"name": name})["uuid"].(string)
	for _, step := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "active"}} {
		if r := h.provision(id, step.verb, nil); r.status != http.StatusAccepted {
			h.t.Fatalf("%s: %d %s", step.verb, r.status, r.body)
		}
		h.waitState(id, step.state)
	}
	return id
}

// TestPatchProtectedJudgedTogether: Ironic judges protected and
// protected_reason on the patched node, not operation by operation, and
// unsetting protected clears the reason (the same for retired).
func TestPatchProtectedJudgedTogether(t *testing.T) {
	h := newAPI(t)
	id := h.activeNode("prot")
	op := func(o, path string, v any) map[string]any {
		m := map[string]any{"op": o, "path": path}
		if o != "remove" {
			m["value"] = v
		}
		return m
	}
	n := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		op("add", "/protected", true), op("add", "/protected_reason", "keep it")}).json(t)
	if n["protected"] != true || n["protected_reason"] != "keep it" {
		t.Fatalf("protected with a reason in one patch: %v %v", n["protected"], n["protected_reason"])
	}
	// The reason first, then the flag: the same answer.
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{op("replace", "/protected", false)})
	n = h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		op("add", "/protected_reason", "r2"), op("replace", "/protected", true)}).json(t)
	if n["protected_reason"] != "r2" {
		t.Fatalf("reason before flag: %v", n["protected_reason"])
	}
	n = h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{op("replace", "/protected", false)}).json(t)
	if n["protected"] != false || n["protected_reason"] != nil {
		t.Fatalf("protected=false must clear the reason: %v %v", n["protected"], n["protected_reason"])
	}
	r := h.expect(http.StatusBadRequest, "PATCH", "/v1/nodes/"+id, latest, []any{op("add", "/protected_reason", "x")})
	if got := r.faultstring(t); got != "The protected_reason field can only be set when protected is True" {
		t.Errorf("reason without the flag: %q", got)
	}
	// Retired: the same rules.
	n = h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		op("add", "/retired", true), op("add", "/retired_reason", "old")}).json(t)
	if n["retired"] != true || n["retired_reason"] != "old" {
		t.Fatalf("retired with a reason: %v %v", n["retired"], n["retired_reason"])
	}
	n = h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{op("replace", "/retired", false)}).json(t)
	if n["retired_reason"] != nil {
		t.Fatalf("retired=false must clear the reason: %v", n["retired_reason"])
	}
	// protected on a node that is not active or rescued is Ironic's 409.
	other := h.createNode(map[string]any{})["uuid"].(string)
	h.expect(http.StatusConflict, "PATCH", "/v1/nodes/"+other, latest, []any{op("replace", "/protected", true)})
}

// TestPortPatchBelowNameVersion is the CLI's `port set --extra k2=v2
// --physical-network physnet1` at 1.78 (and gophercloud's PATCH without a
// version header) on a port that has a name: fields the patch does not
// touch never trip their gates.
func TestPortPatchBelowNameVersion(t *testing.T) {
	h, node := apiWithNode(t, map[string]any{})
	p := h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": node, "address": "52:54:00:12:34:56", "name": "eth0"}).json(t)
	id := p["uuid"].(string)
	for _, v := range []string{"1.78", ""} {
		got := h.expect(http.StatusOK, "PATCH", "/v1/ports/"+id, v, []any{
			map[string]any{"op": "add", "path": "/extra/k2", "value": "v2"},
		}).json(t)
		if got["extra"].(map[string]any)["k2"] != "v2" {
			t.Errorf("ver %q: extra %v", v, got["extra"])
		}
	}
	got := h.expect(http.StatusOK, "PATCH", "/v1/ports/"+id, "1.78", []any{
		map[string]any{"op": "add", "path": "/physical_network", "value": "physnet1"}}).json(t)
	if got["physical_network"] != "physnet1" {
		t.Errorf("physical_network %v", got["physical_network"])
	}
	if got = h.expect(http.StatusOK, "GET", "/v1/ports/"+id, latest, nil).json(t); got["name"] != "eth0" {
		t.Errorf("name after old-version patches: %v", got["name"])
	}
	h.expect(http.StatusNotAcceptable, "PATCH", "/v1/ports/"+id, "1.87", []any{map[string]any{"op": "replace", "path": "/name", "value": "eth1"}})
	// Portgroups: the same with mode/properties (1.26) at 1.23.
	pg := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": node, "mode": "802.3ad", "properties": map[string]any{"miimon": "100"}}).json(t)
	pgPath := "/v1/portgroups/" + pg["uuid"].(string)
	h.expect(http.StatusOK, "PATCH", pgPath, "1.23", []any{map[string]any{"op": "add", "path": "/extra/a", "value": "b"}})
	// Ironic's gate looks at the first operation only (is_path_updated
	// returns inside its loop); the tempest plugin relies on it.
	h.expect(http.StatusNotAcceptable, "PATCH", pgPath, "1.23", []any{map[string]any{"op": "add", "path": "/properties/k", "value": "v"}})
	got = h.expect(http.StatusOK, "PATCH", pgPath, "1.23", []any{
		map[string]any{"op": "add", "path": "/extra/k", "value": "v"},
		map[string]any{"op": "add", "path": "/properties/k", "value": "v"}}).json(t)
	if got["properties"].(map[string]any)["k"] != "v" {
		t.Errorf("portgroup properties at 1.23: %v", got["properties"])
	}
}
