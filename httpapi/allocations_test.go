package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/storage"
)

// availableNode enrolls a fake-hardware node, takes it to available and
// powers it off (allocation requires a known power state).
func (h *apiHarness) availableNode(body map[string]any) map[string]any {
	h.t.Helper()
	traits, _ := body["traits"].([]string)
	delete(body, "traits")
	n := h.createNode(body)
	id := n["uuid"].(string)
	if len(traits) > 0 {
		h.expect(http.StatusNoContent, "PUT", "/v1/nodes/"+id+"/traits", latest, map[string]any{"traits": traits})
	}
	h.moveTo(id, "manage", "manageable")
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "provide"})
	h.waitState(id, "available")
	return h.powerOff(id)
}

// powerOff powers a node off and waits for it: a fake-hardware node never
// powered has no power state, and allocation wants one (the stock tempest
// plugin's provide_and_power_off_node does the same).
func (h *apiHarness) powerOff(id string) map[string]any {
	h.t.Helper()
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/power", latest, map[string]any{"target": "power off"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(h.t)
		if n["power_state"] == "power off" && n["target_power_state"] == nil && n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s did not power off: %v", id, n["power_state"])
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// waitAllocation polls an allocation until it leaves "allocating".
func (h *apiHarness) waitAllocation(ident string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := h.expect(http.StatusOK, "GET", "/v1/allocations/"+ident, latest, nil).json(h.t)
		if a["state"] != "allocating" {
			return a
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("allocation %s still allocating", ident)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

func (h *apiHarness) allocate(body map[string]any) map[string]any {
	h.t.Helper()
	r := h.expect(http.StatusCreated, "POST", "/v1/allocations", latest, body)
	a := r.json(h.t)
	if loc := r.header.Get("Location"); loc != h.srv.URL+"/v1/allocations/"+a["uuid"].(string) {
		h.t.Fatalf("Location %q", loc)
	}
	return h.waitAllocation(a["uuid"].(string))
}

func TestAllocationLifecycle(t *testing.T) {
	h := newAPI(t)
	plain := h.availableNode(map[string]any{"name": "plain", "resource_class": "gold"})
	tagged := h.availableNode(map[string]any{"name": "tagged", "resource_class": "gold", "traits": []string{"CUSTOM_GPU", "CUSTOM_X"}})

	r := h.expect(http.StatusCreated, "POST", "/v1/allocations", latest, map[string]any{
		"resource_class": "gold", "traits": []string{"CUSTOM_GPU"}, "name": "web-1", "extra": map[string]any{"k": "v"},
	})
	// The answer is given before the worker runs: Ironic's fields, in order.
	if got := string(r.body); !strings.HasPrefix(got, `{"uuid": "`) || !strings.Contains(got, `"updated_at": null, "candidate_nodes": [], "extra": {`) ||
		!strings.Contains(got, `}, "last_error": null, "name": "web-1", "owner": null, "resource_class": "gold", "state": "allocating", "traits": ["CUSTOM_GPU"], "links": [`) ||
		!strings.HasSuffix(got, `"node_uuid": null}`) {
		t.Fatalf("create answer: %s", got)
	}
	id := r.json(t)["uuid"].(string)
	a := h.waitAllocation("web-1")
	if a["state"] != "active" || a["node_uuid"] != tagged["uuid"] || a["last_error"] != nil || a["updated_at"] == nil {
		t.Fatalf("allocation: %v", a)
	}
	n := h.expect(http.StatusOK, "GET", "/v1/nodes/tagged", latest, nil).json(t)
	if n["allocation_uuid"] != id || n["instance_uuid"] != id {
		t.Fatalf("node allocation_uuid %v instance_uuid %v", n["allocation_uuid"], n["instance_uuid"])
	}
	if tr := n["instance_info"].(map[string]any)["traits"]; fmt.Sprint(tr) != "[CUSTOM_GPU]" {
		t.Fatalf("instance_info traits %v", tr)
	}

	// Reads: by uuid, name, the node's sub-resource; fields in view order.
	for _, p := range []string{"/v1/allocations/" + id, "/v1/allocations/web-1", "/v1/nodes/tagged/allocation", "/v1/nodes/" + n["uuid"].(string) + "/allocation"} {
		if got := h.expect(http.StatusOK, "GET", p, latest, nil).json(t); got["uuid"] != id {
			t.Fatalf("GET %s: %v", p, got)
		}
	}
	body := string(h.expect(http.StatusOK, "GET", "/v1/allocations/web-1?fields=state,uuid", latest, nil).body)
	if !strings.HasPrefix(body, `{"uuid": "`+id+`", "state": "active", "links": [`) {
		t.Fatalf("fields: %s", body)
	}
	wantFault(t, h.do("GET", "/v1/nodes/plain/allocation", latest, nil), 404, "Allocation for node plain was not found")
	wantFault(t, h.do("GET", "/v1/nodes/nope/allocation", latest, nil), 400, "Node nope could not be found.")
	wantFault(t, h.do("DELETE", "/v1/nodes/nope/allocation", latest, nil), 404, "Node nope could not be found.")
	wantFault(t, h.do("GET", "/v1/nodes/tagged/allocation?limit=1", latest, nil), 400, "Unexpected arguments: limit")
	wantFault(t, h.do("GET", "/v1/allocations/nope", latest, nil), 404, "Allocation nope could not be found.")
	wantFault(t, h.do("GET", "/v1/allocations/bad!name", latest, nil), 400, "Expected UUID or name for allocation_ident: bad!name")

	// Owner appears at 1.60.
	if got := h.expect(http.StatusOK, "GET", "/v1/allocations/"+id, "1.59", nil).json(t); got["owner"] != nil || len(got) != 12 {
		t.Fatalf("1.59 view has %d fields: %v", len(got), got)
	}
	if got := h.expect(http.StatusOK, "GET", "/v1/allocations/"+id, "1.60", nil).json(t); len(got) != 13 {
		t.Fatalf("1.60 view has %d fields", len(got))
	}

	// Deleting frees the node (instance_info keeps the traits, as in Ironic).
	h.expect(http.StatusNoContent, "DELETE", "/v1/allocations/web-1", latest, nil)
	n = h.expect(http.StatusOK, "GET", "/v1/nodes/tagged", latest, nil).json(t)
	if n["allocation_uuid"] != nil || n["instance_uuid"] != nil {
		t.Fatalf("node not freed: %v %v", n["allocation_uuid"], n["instance_uuid"])
	}
	wantFault(t, h.do("DELETE", "/v1/allocations/"+id, latest, nil), 404, "Allocation "+id+" could not be found.")

	// The freed node is allocatable again; DELETE through the node.
	a = h.allocate(map[string]any{"resource_class": "gold", "traits": []string{"CUSTOM_X"}})
	if a["node_uuid"] != tagged["uuid"] {
		t.Fatalf("re-allocation: %v", a)
	}
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/tagged/allocation", latest, nil)
	wantFault(t, h.do("DELETE", "/v1/nodes/tagged/allocation", latest, nil), 404, "Allocation for node tagged was not found")
	_ = plain
}

func TestAllocationFailures(t *testing.T) {
	h := newAPI(t)
	gold := h.availableNode(map[string]any{"name": "gold-1", "resource_class": "gold", "traits": []string{"CUSTOM_A"}})
	h.availableNode(map[string]any{"name": "gold-2", "resource_class": "gold"})
	// Not candidates: wrong class, enroll, maintenance.
	h.createNode(map[string]any{"name": "enrolled", "resource_class": "gold"})
	m := h.availableNode(map[string]any{"name": "maint", "resource_class": "silver"})
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/maint/maintenance", latest, map[string]any{"reason": "x"})

	for _, tc := range []struct {
		body map[string]any
		msg  string
	}{
		{map[string]any{"resource_class": "bronze"}, "no available nodes match the resource class bronze"},
		{map[string]any{"resource_class": "silver"}, "no available nodes match the resource class silver"},
		{map[string]any{"resource_class": "gold", "candidate_nodes": []string{"enrolled"}},
			"none of the requested nodes are available and match the resource class gold"},
		{map[string]any{"resource_class": "gold", "traits": []string{"CUSTOM_A", "CUSTOM_B"}},
			"no suitable nodes have the requested traits CUSTOM_A, CUSTOM_B"},
		{map[string]any{"resource_class": "gold", "owner": "someone"}, "no available nodes match the resource class gold"},
	} {
		a := h.allocate(tc.body)
		want := fmt.Sprintf("Failed to process allocation %s: %s.", a["uuid"], tc.msg)
		if a["state"] != "error" || a["last_error"] != want || a["node_uuid"] != nil {
			t.Errorf("%v: state %v last_error %q, want %q", tc.body, a["state"], a["last_error"], want)
		}
	}
	_ = m

	// candidate_nodes by name (stored as UUIDs), and a name-matched node
	// first: both pick the asked-for node every time.
	for i := 0; i < 3; i++ {
		a := h.allocate(map[string]any{"resource_class": "gold", "candidate_nodes": []string{"gold-1"}})
		if a["node_uuid"] != gold["uuid"] || fmt.Sprint(a["candidate_nodes"]) != fmt.Sprintf("[%s]", gold["uuid"]) {
			t.Fatalf("candidate by name: %v", a)
		}
		h.expect(http.StatusNoContent, "DELETE", "/v1/allocations/"+a["uuid"].(string), latest, nil)
		a = h.allocate(map[string]any{"resource_class": "gold", "name": "gold-1"})
		if a["node_uuid"] != gold["uuid"] {
			t.Fatalf("name-matched node not first: %v", a)
		}
		h.expect(http.StatusNoContent, "DELETE", "/v1/allocations/gold-1", latest, nil)
	}
	// Owner matches the node's owner or lessee.
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/gold-2", latest, []any{map[string]any{"op": "add", "path": "/lessee", "value": "proj"}})
	a := h.allocate(map[string]any{"resource_class": "gold", "owner": "proj"})
	if a["state"] != "active" || a["owner"] != "proj" {
		t.Fatalf("owner allocation: %v", a)
	}
	owned := h.expect(http.StatusOK, "GET", "/v1/allocations?owner=proj", latest, nil).json(t)["allocations"].([]any)
	if len(owned) != 1 {
		t.Fatalf("owner filter: %v", owned)
	}
}

func TestAllocationBackfill(t *testing.T) {
	h := newAPI(t)
	n := h.availableNode(map[string]any{"name": "deployed", "resource_class": "gold", "traits": []string{"CUSTOM_A"}})
	id := n["uuid"].(string)

	// Backfilling needs an active node.
	r := h.expect(http.StatusBadRequest, "POST", "/v1/allocations", latest, map[string]any{"node": "deployed", "name": "bf"})
	failed := h.expect(http.StatusOK, "GET", "/v1/allocations/bf", latest, nil).json(t)
	want := fmt.Sprintf(`Failed to process allocation %s: Cannot backfill an allocation for node %s: Node must be in the "active" state, but the current state is "available".`, failed["uuid"], id)
	if r.faultstring(t) != want || failed["state"] != "error" || failed["last_error"] != want {
		t.Fatalf("backfill of available node: %s / %v", r.faultstring(t), failed)
	}
	h.expect(http.StatusNoContent, "DELETE", "/v1/allocations/bf", latest, nil)

	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/deployed/states/provision", latest, map[string]any{"target": "active"})
	h.waitState(id, "active")

	r = h.expect(http.StatusBadRequest, "POST", "/v1/allocations", latest, map[string]any{
		"node": "deployed", "resource_class": "silver", "traits": []string{"CUSTOM_Z"}, "candidate_nodes": []string{"deployed"}})
	// Every mismatch except the candidates (which name the node).
	if got := r.faultstring(t); !strings.Contains(got, "Resource class gold does not match the requested resource class silver; List of traits ['CUSTOM_A'] does not match the requested traits ['CUSTOM_Z']") {
		t.Fatalf("mismatches: %s", got)
	}
	wantFault(t, h.do("POST", "/v1/allocations", "1.57", map[string]any{"node": "deployed"}), 400, "Cannot set node when creating an allocation in this API version")
	wantFault(t, h.do("POST", "/v1/allocations", latest, map[string]any{"node": "nope"}), 400, "Node nope could not be found.")

	// A good backfill is active at once and takes its resource class from
	// the node.
	r = h.expect(http.StatusCreated, "POST", "/v1/allocations", latest, map[string]any{"node": "deployed", "name": "backfilled"})
	a := r.json(t)
	if a["state"] != "active" || a["node_uuid"] != id || a["resource_class"] != "gold" {
		t.Fatalf("backfill: %v", a)
	}
	n = h.expect(http.StatusOK, "GET", "/v1/nodes/deployed", latest, nil).json(t)
	if n["allocation_uuid"] != a["uuid"] || n["instance_uuid"] != a["uuid"] {
		t.Fatalf("node after backfill: %v %v", n["allocation_uuid"], n["instance_uuid"])
	}
	// Ironic's default uuid for a backfill is the node's instance: the same
	// allocation again is a duplicate.
	wantFault(t, h.do("POST", "/v1/allocations", latest, map[string]any{"node": "deployed"}), 409,
		fmt.Sprintf("An allocation with UUID %s already exists.", a["uuid"]))
	other := uuid.NewString()
	wantFault(t, h.do("POST", "/v1/allocations", latest, map[string]any{"node": "deployed", "uuid": other}), 409,
		fmt.Sprintf("Node %s is associated with instance %s.", id, a["uuid"]))
	if got := h.expect(http.StatusOK, "GET", "/v1/allocations/"+other, latest, nil).json(t); got["state"] != "error" {
		t.Fatalf("failed backfill left %v", got["state"])
	}

	// An active node keeps its allocation unless in maintenance.
	msg := fmt.Sprintf("Cannot remove allocation %s for node %s, because the node is active (and maintenance mode is off)", a["uuid"], id)
	wantFault(t, h.do("DELETE", "/v1/allocations/backfilled", latest, nil), 409, msg)
	wantFault(t, h.do("DELETE", "/v1/nodes/deployed/allocation", latest, nil), 409, msg)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/deployed/maintenance", latest, map[string]any{"reason": "fix"})
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/deployed/allocation", latest, nil)
	n = h.expect(http.StatusOK, "GET", "/v1/nodes/deployed", latest, nil).json(t)
	if n["allocation_uuid"] != nil || n["instance_uuid"] != nil || n["provision_state"] != "active" {
		t.Fatalf("after deletion in maintenance: %v %v %v", n["allocation_uuid"], n["instance_uuid"], n["provision_state"])
	}
}

func TestAllocationFollowsItsNode(t *testing.T) {
	h := newAPI(t)
	h.availableNode(map[string]any{"name": "n1", "resource_class": "gold"})
	n2 := h.availableNode(map[string]any{"name": "n2", "resource_class": "silver"})

	// Undeploying clears instance_uuid: the allocation goes with it.
	a := h.allocate(map[string]any{"resource_class": "gold"})
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/n1/states/provision", latest, map[string]any{"target": "active"})
	n := h.waitState("n1", "active")
	if n["instance_uuid"] != a["uuid"] {
		t.Fatalf("deployed node instance_uuid %v", n["instance_uuid"])
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/n1/states/provision", latest, map[string]any{"target": "deleted"})
	n = h.waitState("n1", "available")
	if n["allocation_uuid"] != nil || n["instance_uuid"] != nil {
		t.Fatalf("undeployed node: %v %v", n["allocation_uuid"], n["instance_uuid"])
	}
	h.expect(http.StatusNotFound, "GET", "/v1/allocations/"+a["uuid"].(string), latest, nil)

	// Deleting a node deletes its allocation.
	a = h.allocate(map[string]any{"resource_class": "silver"})
	if a["node_uuid"] != n2["uuid"] {
		t.Fatalf("allocation: %v", a)
	}
	// As Ironic: an associated node is deleted only in maintenance.
	h.expect(http.StatusConflict, "DELETE", "/v1/nodes/n2", latest, nil)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/n2/maintenance", latest, map[string]any{})
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/n2", latest, nil)
	h.expect(http.StatusNotFound, "GET", "/v1/allocations/"+a["uuid"].(string), latest, nil)
}

// Twenty allocations race for ten nodes: each node is taken once, the
// others fail cleanly.
func TestAllocationConcurrency(t *testing.T) {
	h := newAPI(t)
	nodes := map[string]bool{}
	for i := 0; i < 10; i++ {
		n := h.availableNode(map[string]any{"name": fmt.Sprintf("rack-%02d", i), "resource_class": "compute"})
		nodes[n["uuid"].(string)] = true
	}
	ids := make([]string, 20)
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.do("POST", "/v1/allocations", latest, map[string]any{"resource_class": "compute"})
			if r.status != http.StatusCreated {
				errs <- fmt.Sprintf("POST: %d %s", r.status, r.body)
				return
			}
			ids[i] = r.json(t)["uuid"].(string)
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	taken := map[string]string{}
	var active, failed int
	for _, id := range ids {
		a := h.waitAllocation(id)
		switch a["state"] {
		case "active":
			active++
			node := a["node_uuid"].(string)
			if prev, dup := taken[node]; dup {
				t.Fatalf("node %s allocated to %s and %s", node, prev, id)
			}
			if !nodes[node] {
				t.Fatalf("unknown node %s", node)
			}
			taken[node] = id
		case "error":
			failed++
			if le := a["last_error"].(string); !strings.HasPrefix(le, "Failed to process allocation "+id+": ") {
				t.Fatalf("last_error %q", le)
			}
		default:
			t.Fatalf("allocation %s in %v", id, a["state"])
		}
	}
	if active != 10 || failed != 10 {
		t.Fatalf("active %d, error %d", active, failed)
	}
	for node, id := range taken {
		n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+node, latest, nil).json(t)
		if n["allocation_uuid"] != id || n["instance_uuid"] != id {
			t.Fatalf("node %s: allocation %v instance %v, want %s", node, n["allocation_uuid"], n["instance_uuid"], id)
		}
	}
	list := h.expect(http.StatusOK, "GET", "/v1/allocations?state=active&resource_class=compute", latest, nil).json(t)["allocations"].([]any)
	if len(list) != 10 {
		t.Fatalf("%d active in list", len(list))
	}
}

func TestAllocationResume(t *testing.T) {
	h := newAPI(t)
	n := h.availableNode(map[string]any{"name": "n1", "resource_class": "gold"})
	// An allocation a previous run of this conductor left allocating.
	host := "test-conductor"
	a := &storage.Allocation{State: "allocating", ResourceClass: ptr("gold"), ConductorAffinity: &host, CreatedAt: time.Now()}
	if err := h.store.CreateAllocation(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := h.cond.ResumeAllocations(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.waitAllocation(a.UUID); got["state"] != "active" || got["node_uuid"] != n["uuid"] {
		t.Fatalf("resumed: %v", got)
	}
}

func TestAllocationRequestErrors(t *testing.T) {
	h := newAPI(t)
	h.availableNode(map[string]any{"name": "n1", "resource_class": "gold"})
	existing := h.allocate(map[string]any{"resource_class": "gold", "name": "taken"})
	long := strings.Repeat("x", 81)
	h.wantFaults(t, "POST", "/v1/allocations", []verFault{
		{latest, map[string]any{}, 400, "The resource_class field is mandatory when not backfilling"},
		{latest, map[string]any{"resource_class": ""}, 400, "The resource_class field is mandatory when not backfilling"},
		{latest, map[string]any{"resource_class": "gold", "bogus": 1}, 400, "Schema error for allocation: Additional properties are not allowed ('bogus' was unexpected)"},
		{latest, map[string]any{"resource_class": "gold", "bogus": 1, "abc": 2}, 400, "Schema error for allocation: Additional properties are not allowed ('abc', 'bogus' were unexpected)"},
		{latest, map[string]any{"resource_class": 5}, 400, "Schema error for allocation: 5 is not of type 'string', 'null'"},
		{latest, map[string]any{"resource_class": long}, 400, "Schema error for allocation: '" + long + "' is too long"},
		{latest, map[string]any{"resource_class": "gold", "traits": []string{"bad"}}, 400, "Schema error for allocation: 'bad' is not valid under any of the given schemas. Possible root cause: 'bad' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{latest, map[string]any{"resource_class": "gold", "traits": "CUSTOM_A"}, 400, "Schema error for allocation: 'CUSTOM_A' is not of type 'array', 'null'"},
		{latest, map[string]any{"resource_class": "gold", "candidate_nodes": "n1"}, 400, "Schema error for allocation: 'n1' is not of type 'array', 'null'"},
		{latest, map[string]any{"resource_class": "gold", "candidate_nodes": []any{1}}, 400, "Schema error for allocation: 1 is not of type 'string'"},
		{latest, map[string]any{"resource_class": "gold", "extra": []any{}}, 400, "Schema error for allocation: [] is not of type 'object', 'null'"},
		{latest, map[string]any{"resource_class": "gold", "owner": 5}, 400, "Schema error for allocation: 5 is not of type 'string', 'null'"},
		{latest, []any{}, 400, "Schema error for allocation: [] is not of type 'object'"},
		// jsonschema 4.26's best_match: at equal depth the greater path wins.
		{latest, map[string]any{"resource_class": "gold", "traits": []string{""}, "candidate_nodes": []any{1}}, 400, "Schema error for allocation: '' should be non-empty"},
		{latest, map[string]any{"resource_class": 5, "bogus": 1}, 400, "Schema error for allocation: Additional properties are not allowed ('bogus' was unexpected)"},
		{latest, map[string]any{"resource_class": "gold", "uuid": "notauuid"}, 400, "Expected UUID for uuid: notauuid"},
		{latest, map[string]any{"resource_class": "gold", "name": "bad name"}, 400, "Cannot create allocation with invalid name 'bad name'"},
		{latest, map[string]any{"resource_class": "gold", "name": "taken"}, 409, "An allocation with name taken already exists."},
		{latest, map[string]any{"resource_class": "gold", "uuid": existing["uuid"]}, 409, fmt.Sprintf("An allocation with UUID %s already exists.", existing["uuid"])},
		{latest, map[string]any{"resource_class": "gold", "candidate_nodes": []string{"nope", "n1"}}, 400, "Nodes cannot be found: nope"},
		{latest, map[string]any{"resource_class": "gold", "candidate_nodes": []string{"bad name!"}}, 400, "Nodes cannot be found: bad name!"},
		{"1.59", map[string]any{"resource_class": "gold", "owner": "proj"}, 406, "Request not acceptable."},
		{"1.51", map[string]any{"resource_class": "gold"}, 405, "The API version does not allow allocations"},
	})
}

func TestAllocationList(t *testing.T) {
	h := newAPI(t)
	n := h.availableNode(map[string]any{"name": "n1", "resource_class": "gold"})
	var ids []string
	for i, rc := range []string{"gold", "silver", "gold"} {
		a := h.allocate(map[string]any{"resource_class": rc, "name": fmt.Sprintf("a%d", i)})
		ids = append(ids, a["uuid"].(string))
	}
	names := func(path, ver string) []string {
		t.Helper()
		var out []string
		for _, x := range h.expect(http.StatusOK, "GET", path, ver, nil).json(t)["allocations"].([]any) {
			out = append(out, fmt.Sprint(x.(map[string]any)["name"]))
		}
		return out
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{"/v1/allocations", "[a0 a1 a2]"},
		{"/v1/allocations?state=error", "[a1 a2]"},
		{"/v1/allocations?state=active", "[a0]"},
		{"/v1/allocations?resource_class=silver", "[a1]"},
		{"/v1/allocations?node=n1", "[a0]"},
		{"/v1/allocations?node=" + n["uuid"].(string), "[a0]"},
		{"/v1/allocations?sort_key=name&sort_dir=desc", "[a2 a1 a0]"},
		{"/v1/allocations?marker=" + ids[0], "[a1 a2]"},
		{"/v1/allocations?fields=name&limit=2", "[a0 a1]"},
	} {
		if got := fmt.Sprint(names(tc.path, latest)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.path, got, tc.want)
		}
	}
	page := h.expect(http.StatusOK, "GET", "/v1/allocations?fields=name&limit=2", latest, nil).json(t)
	if next, _ := page["next"].(string); !strings.Contains(next, "marker="+ids[1]) || !strings.HasPrefix(next, h.srv.URL+"/v1/allocations?") {
		t.Fatalf("next: %v", page["next"])
	}
	// An empty fields list leaves the links only.
	if got := h.expect(http.StatusOK, "GET", "/v1/allocations/a0?fields=", latest, nil).json(t); len(got) != 1 || got["links"] == nil {
		t.Fatalf("fields=: %v", got)
	}
	// Fields come in the view's order, whatever the request's.
	body := string(h.expect(http.StatusOK, "GET", "/v1/allocations?fields=owner,NAME&limit=1", latest, nil).body)
	if !strings.HasPrefix(body, `{"allocations": [{"name": "a0", "owner": null, "links": [`) {
		t.Fatalf("fields order: %s", body)
	}
	// Full objects by default, as Ironic lists allocations.
	first := h.expect(http.StatusOK, "GET", "/v1/allocations?limit=1", "1.52", nil).json(t)["allocations"].([]any)[0].(map[string]any)
	if len(first) != 12 {
		t.Fatalf("list entry at 1.52 has %d fields: %v", len(first), first)
	}

	m := uuid.NewString()
	for _, tc := range []struct {
		path, ver string
		status    int
		msg       string
	}{
		{"/v1/allocations?sort_key=traits", latest, 400, "The sort_key value traits is an invalid field for sorting"},
		{"/v1/allocations?sort_key=bogus", latest, 400, `The sort_key value "bogus" is an invalid field for sorting`},
		{"/v1/allocations?sort_dir=up", latest, 400, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"},
		{"/v1/allocations?marker=nope", latest, 400, "Expected UUID for marker: nope"},
		{"/v1/allocations?marker=" + m, latest, 404, "Allocation " + m + " could not be found."},
		{"/v1/allocations?limit=x", latest, 400, "Expected an integer for limit: x"},
		{"/v1/allocations?limit=0", latest, 400, "Limit must be positive"},
		{"/v1/allocations?detail=true", latest, 400, "Unexpected arguments: detail"},
		{"/v1/allocations?node=nope", latest, 400, "Node nope could not be found."},
		{"/v1/allocations?node=bad!name", latest, 400, "Expected UUID or name for node: bad!name"},
		{"/v1/allocations?fields=bogus", latest, 400, `Field(s) "bogus" are not valid`},
		{"/v1/allocations?fields=owner", "1.59", 406, "Request not acceptable."},
		{"/v1/allocations?owner=x", "1.59", 406, "Request not acceptable."},
		{"/v1/allocations", "1.51", 404, "The API version does not allow allocations"},
		{"/v1/allocations/a0", "1.51", 404, "The API version does not allow allocations"},
		{"/v1/nodes/n1/allocation", "1.51", 404, ""},
	} {
		wantFault(t, h.do("GET", tc.path, tc.ver, nil), tc.status, tc.msg)
	}
	wantFault(t, h.do("DELETE", "/v1/allocations/a0", "1.51", nil), 405, "The API version does not allow allocations")
	wantFault(t, h.do("DELETE", "/v1/allocations/bad!name", latest, nil), 400, "Expected UUID or name for allocation_ident: bad!name")
	h.expect(http.StatusMethodNotAllowed, "PUT", "/v1/allocations/a0", latest, nil)
}

func TestAllocationPatch(t *testing.T) {
	h := newAPI(t)
	a := h.allocate(map[string]any{"resource_class": "gold", "name": "a1", "extra": map[string]any{"x": 1}})
	h.allocate(map[string]any{"resource_class": "gold", "name": "other"})
	id := a["uuid"].(string)
	op := func(o, path string, v ...any) map[string]any {
		m := map[string]any{"op": o, "path": path}
		if len(v) > 0 {
			m["value"] = v[0]
		}
		return m
	}

	got := h.expect(http.StatusOK, "PATCH", "/v1/allocations/a1", latest, []any{op("replace", "/name", "a2"), op("add", "/extra/foo", "bar")}).json(t)
	if got["name"] != "a2" || fmt.Sprint(got["extra"]) != "map[foo:bar x:1]" || got["updated_at"] == a["updated_at"] {
		t.Fatalf("patched: %v", got)
	}
	// An empty patch changes nothing, not even updated_at.
	same := h.expect(http.StatusOK, "PATCH", "/v1/allocations/"+id, latest, []any{}).json(t)
	if same["updated_at"] != got["updated_at"] {
		t.Fatalf("empty patch touched updated_at")
	}
	got = h.expect(http.StatusOK, "PATCH", "/v1/allocations/a2", latest, []any{op("remove", "/name"), op("replace", "/extra", nil)}).json(t)
	if got["name"] != nil || fmt.Sprint(got["extra"]) != "map[]" {
		t.Fatalf("removed: %v", got)
	}
	h.expect(http.StatusOK, "PATCH", "/v1/allocations/"+id, latest, []any{op("add", "/name", id)})

	path := "/v1/allocations/" + id
	h.wantFaults(t, "PATCH", path, []verFault{
		{latest, []any{op("replace", "/resource_class", "x")}, 400, "Cannot patch /resource_class. Only the following can be updated: name, extra"},
		{latest, []any{op("replace", "/owner", "x")}, 400, "Cannot patch /owner. Only the following can be updated: name, extra"},
		{latest, []any{op("replace", "/name", "bad name")}, 400, "Cannot update allocation with invalid name 'bad name'"},
		{latest, []any{op("replace", "/name", 5)}, 400, "Cannot update allocation with invalid name '5'"},
		{latest, []any{op("replace", "/name", "other")}, 409, "An allocation with name other already exists."},
		{latest, []any{op("remove", "/extra/nope")}, 400, "Couldn't apply patch '{'op': 'remove', 'path': '/extra/nope'}'. Reason: can't remove a non-existent object 'nope'"},
		{latest, []any{op("replace", "/extra/a/b", 1)}, 400, "Couldn't apply patch '{'op': 'replace', 'path': '/extra/a/b', 'value': 1}'. Reason: member 'a' not found in {}"},
		{latest, []any{op("replace", "/extra", []any{})}, 400, "Schema error for patch: [] is not of type 'object', 'null'"},
		{latest, []any{op("test", "/name", "x")}, 400, "Schema error for patch: 'test' is not one of ['add', 'replace', 'remove']"},
		{latest, []any{op("replace", "name", "x")}, 400, `Schema error for patch: 'name' does not match '^(/[\\w-]+)+$'`},
		{latest, []any{map[string]any{"path": "/name"}}, 400, "Schema error for patch: 'op' is a required property"},
		{latest, []any{map[string]any{"op": "move", "from": "/name", "path": "/extra"}}, 400, "Schema error for patch: Additional properties are not allowed ('from' was unexpected)"},
		{latest, map[string]any{}, 400, "Schema error for patch: {} is not of type 'array'"},
		{"1.56", []any{op("replace", "/name", "x")}, 405, "The API version does not allow updating allocations"},
		{"1.51", []any{}, 405, "The API version does not allow allocations"},
	})
	wantFault(t, h.do("PATCH", "/v1/allocations/nope", latest, []any{op("replace", "/name", "x")}), 404, "Allocation nope could not be found.")
	wantFault(t, h.do("PATCH", "/v1/allocations/bad!name", latest, []any{op("replace", "/name", "x")}), 400, "Expected a logical name or UUID but received bad!name.")
}

// A node locked by other work is retried (Ironic's node_locked_retry_*):
// released within the retries, it is allocated; held, the allocation fails.
func TestAllocationRetriesLockedNode(t *testing.T) {
	h := newAPI(t)
	n := h.availableNode(map[string]any{"name": "busy", "resource_class": "gold"})
	id := n["uuid"].(string)
	lock := func(holder *string) {
		t.Helper()
		if _, err := h.store.UpdateNode(context.Background(), id, func(n *storage.Node) (*storage.Event, error) {
			n.Reservation = holder
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	lock(ptr("other-host"))
	a := h.expect(http.StatusCreated, "POST", "/v1/allocations", latest, map[string]any{"resource_class": "gold"}).json(t)
	time.Sleep(200 * time.Millisecond)
	if got := h.expect(http.StatusOK, "GET", "/v1/allocations/"+a["uuid"].(string), latest, nil).json(t); got["state"] != "allocating" {
		t.Fatalf("allocation did not wait for the locked node: %v", got)
	}
	lock(nil)
	if got := h.waitAllocation(a["uuid"].(string)); got["state"] != "active" || got["node_uuid"] != id {
		t.Fatalf("after release: %v", got)
	}
	// Freeing a locked node is refused as NodeLocked.
	lock(ptr("other-host"))
	wantFault(t, h.do("DELETE", "/v1/allocations/"+a["uuid"].(string), latest, nil), 409,
		"Node "+id+" is locked by host other-host, please retry after the current operation is completed.")
	lock(nil)
	h.expect(http.StatusNoContent, "DELETE", "/v1/allocations/"+a["uuid"].(string), latest, nil)

	lock(ptr("other-host"))
	b := h.expect(http.StatusCreated, "POST", "/v1/allocations", latest, map[string]any{"resource_class": "gold"}).json(t)
	got := h.waitAllocation(b["uuid"].(string))
	want := fmt.Sprintf("Failed to process allocation %s: could not reserve any of 1 suitable nodes.", b["uuid"])
	if got["state"] != "error" || got["last_error"] != want {
		t.Fatalf("held lock: %v %v", got["state"], got["last_error"])
	}
}
