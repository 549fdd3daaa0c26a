package storage

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func newAllocation(name string) *Allocation {
	a := &Allocation{State: "allocating", ResourceClass: ptr("gold"), CreatedAt: time.Now()}
	if name != "" {
		a.Name = ptr(name)
	}
	return a
}

// bind makes a hold n as the engine does.
func bind(t *testing.T, s *SQLite, a *Allocation, n *Node) {
	t.Helper()
	_, _, err := s.UpdateAllocationAndNode(context.Background(), a.UUID, n.UUID, func(a *Allocation, n *Node) error {
		a.State, a.NodeUUID = "active", &n.UUID
		n.AllocationUUID, n.InstanceUUID = &a.UUID, &a.UUID
		return nil
	})
	if err != nil {
		t.Fatalf("bind %s to %s: %v", a.UUID, n.UUID, err)
	}
}

func TestAllocationRoundTrip(t *testing.T) {
	s, nodes := openWithNodes(t, "n1")
	ctx := context.Background()
	n := nodes[0]
	zone := time.FixedZone("X", 3600)
	in := &Allocation{
		UUID: uuid.NewString(), Name: ptr("alloc-1"), NodeUUID: &n.UUID, State: "active",
		Owner: ptr("project-a"), LastError: ptr("old error"), ResourceClass: ptr("gold"),
		Traits: []string{"CUSTOM_A", "HW_CPU_X86_VMX"}, CandidateNodes: []string{n.UUID},
		Extra: JSONObject{"k": "v", "n": float64(1)}, ConductorAffinity: ptr("host-1"),
		CreatedAt: time.Date(2024, 3, 1, 10, 0, 0, 123456789, zone),
		UpdatedAt: ptr(time.Date(2024, 3, 1, 11, 0, 0, 987654321, zone)),
	}
	allFieldsSet(t, in)
	mustCreate(t, s.CreateAllocation, in)
	for _, ident := range []string{in.UUID, "alloc-1"} {
		got, err := s.GetAllocation(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("GetAllocation(%s)\n got %+v\nwant %+v", ident, got, in)
		}
	}
	if got, err := s.GetAllocation(ctx, "ALLOC-1"); err == nil {
		t.Fatalf("names are case-sensitive, got %s", got.UUID)
	}
	wantKind(t, mustErr(s.GetAllocation(ctx, "nope")), fault.NotFound, "storage: no allocations row nope")
	u := uuid.NewString()
	wantKind(t, mustErr(s.GetAllocation(ctx, u)), fault.NotFound, "storage: no allocations row "+u)

	// Defaults: a UUID, non-nil lists and map.
	a := mustCreate(t, s.CreateAllocation, &Allocation{State: "allocating"})
	got, err := s.GetAllocation(ctx, a.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Traits == nil || got.CandidateNodes == nil || got.Extra == nil || got.Name != nil {
		t.Fatalf("defaults: %+v", got)
	}
}

func mustErr[T any](_ T, err error) error { return err }

func TestAllocationDuplicatesAndUnknownNode(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustCreate(t, s.CreateAllocation, newAllocation("dup"))
	wantKind(t, s.CreateAllocation(ctx, newAllocation("dup")), fault.Conflict, "storage: allocations (name)=(dup) already exists")
	b := newAllocation("")
	b.UUID = a.UUID
	wantKind(t, s.CreateAllocation(ctx, b), fault.Conflict, "storage: allocations (uuid)=("+a.UUID+") already exists")
	c := newAllocation("c")
	c.NodeUUID = ptr(uuid.NewString())
	wantKind(t, s.CreateAllocation(ctx, c), fault.NotFound, "storage: no nodes row "+*c.NodeUUID)
	wantKind(t, s.CreateAllocation(ctx, &Allocation{UUID: "not-a-uuid", State: "allocating"}), fault.Invalid, "")

	other := mustCreate(t, s.CreateAllocation, newAllocation("other"))
	_, err := s.UpdateAllocation(ctx, other.UUID, func(a *Allocation) error { a.Name = ptr("dup"); return nil })
	wantKind(t, err, fault.Conflict, "storage: allocations (name)=(dup) already exists")
}

func TestListAllocations(t *testing.T) {
	s, nodes := openWithNodes(t, "n1")
	ctx := context.Background()
	n := nodes[0]
	var all []*Allocation
	for i, spec := range []struct{ rc, state, owner string }{
		{"gold", "allocating", ""}, {"gold", "error", "p1"}, {"silver", "active", "p1"},
		{"gold", "active", "p2"}, {"silver", "error", ""},
	} {
		a := newAllocation("a" + string(rune('0'+i)))
		a.ResourceClass, a.State = &spec.rc, spec.state
		if spec.owner != "" {
			a.Owner = ptr(spec.owner)
		}
		if i == 2 {
			a.NodeUUID = &n.UUID
		}
		all = append(all, mustCreate(t, s.CreateAllocation, a))
	}
	checkLists(t, s.ListAllocations, func(a *Allocation) string { return *a.Name }, []listCase[AllocationQuery]{
		{"all", AllocationQuery{}, []string{"a0", "a1", "a2", "a3", "a4"}},
		{"resource class", AllocationQuery{ResourceClass: ptr("gold")}, []string{"a0", "a1", "a3"}},
		{"state", AllocationQuery{State: ptr("error")}, []string{"a1", "a4"}},
		{"owner", AllocationQuery{Owner: ptr("p1")}, []string{"a1", "a2"}},
		{"node", AllocationQuery{NodeUUID: &n.UUID}, []string{"a2"}},
		{"resource class and state", AllocationQuery{ResourceClass: ptr("silver"), State: ptr("active")}, []string{"a2"}},
		{"limit", AllocationQuery{Page: Page{Limit: 2}}, []string{"a0", "a1"}},
		{"limit after marker", AllocationQuery{Page: Page{Limit: 2, Marker: all[1].UUID}}, []string{"a2", "a3"}},
		{"by name desc", AllocationQuery{Page: Page{SortKey: "name", SortDir: Desc}}, []string{"a4", "a3", "a2", "a1", "a0"}},
		{"by state, limit", AllocationQuery{Page: Page{SortKey: "state", Limit: 3}}, []string{"a2", "a3", "a0"}},
	})
	wantListRefusals(t, func(p Page) error { return mustErr(s.ListAllocations(ctx, AllocationQuery{Page: p})) }, "allocations", uuid.NewString(), "traits")
}

func TestUpdateAllocationAndNode(t *testing.T) {
	s, nodes := openWithNodes(t, "n1", "n2")
	ctx := context.Background()
	n1, n2 := nodes[0], nodes[1]
	a := mustCreate(t, s.CreateAllocation, newAllocation("a"))
	bind(t, s, a, n1)

	got, err := s.GetNode(ctx, n1.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if deref(got.AllocationUUID) != a.UUID || deref(got.InstanceUUID) != a.UUID || got.UpdatedAt == nil {
		t.Fatalf("node after bind: allocation %v instance %v", got.AllocationUUID, got.InstanceUUID)
	}
	ga, _ := s.GetAllocation(ctx, a.UUID)
	if ga.State != "active" || deref(ga.NodeUUID) != n1.UUID || ga.UpdatedAt == nil {
		t.Fatalf("allocation after bind: %+v", ga)
	}

	// instance_uuid is unique: a second node cannot take the same one, and
	// the allocation is left as it was (one transaction).
	_, _, err = s.UpdateAllocationAndNode(ctx, a.UUID, n2.UUID, func(a *Allocation, n *Node) error {
		a.LastError = ptr("changed")
		n.InstanceUUID = &a.UUID
		return nil
	})
	wantKind(t, err, fault.Conflict, "storage: nodes (instance_uuid)=("+a.UUID+") already exists")
	if ga, _ := s.GetAllocation(ctx, a.UUID); ga.LastError != nil {
		t.Fatal("failed transaction changed the allocation")
	}

	// fn's error rolls back both and comes back unchanged.
	boom := errors.New("boom")
	_, _, err = s.UpdateAllocationAndNode(ctx, a.UUID, n2.UUID, func(a *Allocation, n *Node) error {
		n.Maintenance = true
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if n, _ := s.GetNode(ctx, n2.UUID); n.Maintenance {
		t.Fatal("rolled-back change is visible")
	}
	_, _, err = s.UpdateAllocationAndNode(ctx, "nope", n2.UUID, func(*Allocation, *Node) error { return nil })
	wantKind(t, err, fault.NotFound, "storage: no allocations row nope")
	_, _, err = s.UpdateAllocationAndNode(ctx, a.UUID, "nope", func(*Allocation, *Node) error { return nil })
	wantKind(t, err, fault.NotFound, "storage: no nodes row nope")
}

func TestDeleteAllocation(t *testing.T) {
	s, nodes := openWithNodes(t, "n1")
	ctx := context.Background()
	n := nodes[0]
	a := mustCreate(t, s.CreateAllocation, newAllocation("a"))
	bind(t, s, a, n)

	// A refusing check leaves both alone.
	refused := fault.New(fault.Conflict, "no")
	var seen *Node
	err := s.DeleteAllocation(ctx, "a", func(a *Allocation, n *Node) error { seen = n; return refused })
	if err != refused {
		t.Fatalf("err = %v", err)
	}
	if seen == nil || seen.UUID != n.UUID {
		t.Fatalf("check saw node %v", seen)
	}
	if _, err := s.GetAllocation(ctx, a.UUID); err != nil {
		t.Fatal(err)
	}

	if err := s.DeleteAllocation(ctx, a.UUID, nil); err != nil {
		t.Fatal(err)
	}
	wantKind(t, mustErr(s.GetAllocation(ctx, a.UUID)), fault.NotFound, "")
	got, _ := s.GetNode(ctx, n.UUID)
	if got.AllocationUUID != nil || got.InstanceUUID != nil {
		t.Fatalf("node not freed: allocation %v instance %v", got.AllocationUUID, got.InstanceUUID)
	}
	wantKind(t, s.DeleteAllocation(ctx, a.UUID, nil), fault.NotFound, "storage: no allocations row "+a.UUID)

	// Without a node, check gets nil.
	b := mustCreate(t, s.CreateAllocation, newAllocation("b"))
	seen = n
	if err := s.DeleteAllocation(ctx, b.UUID, func(_ *Allocation, n *Node) error { seen = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if seen != nil {
		t.Fatal("check got a node for an allocation without one")
	}
}

func TestAllocationFollowsNode(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()

	// Deleting the node deletes its allocation.
	n1 := mustCreateNode(t, s, newNode("n1"))
	a1 := mustCreate(t, s.CreateAllocation, newAllocation("a1"))
	bind(t, s, a1, n1)
	if err := s.DeleteNode(ctx, n1.UUID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, mustErr(s.GetAllocation(ctx, a1.UUID)), fault.NotFound, "")

	// Clearing the node's instance_uuid (undeploy) deletes it too, and
	// frees allocation_uuid; other node updates leave it alone.
	n2 := mustCreateNode(t, s, newNode("n2"))
	a2 := mustCreate(t, s.CreateAllocation, newAllocation("a2"))
	bind(t, s, a2, n2)
	if _, err := s.UpdateNode(ctx, n2.UUID, func(n *Node) (*Event, error) { n.Maintenance = true; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAllocation(ctx, a2.UUID); err != nil {
		t.Fatalf("unrelated node update: %v", err)
	}
	if _, err := s.UpdateNode(ctx, n2.UUID, func(n *Node) (*Event, error) { n.InstanceUUID = nil; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	wantKind(t, mustErr(s.GetAllocation(ctx, a2.UUID)), fault.NotFound, "")
	if got, _ := s.GetNode(ctx, n2.UUID); got.AllocationUUID != nil {
		t.Fatalf("allocation_uuid = %v", *got.AllocationUUID)
	}

	// Unbound allocations are untouched by node changes.
	a3 := mustCreate(t, s.CreateAllocation, newAllocation("a3"))
	if err := s.DeleteNode(ctx, n2.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAllocation(ctx, a3.UUID); err != nil {
		t.Fatal(err)
	}
}

func TestListShards(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	got, err := s.ListShards(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for i, sh := range []string{"s1", "", "s2", "s1", "s2", "s1", "", "s0"} {
		n := newNode("n" + string(rune('a'+i)))
		if sh != "" {
			n.Shard = ptr(sh)
		}
		if i == 7 {
			n.ParentNode = ptr(uuid.NewString()) // children count too
		}
		mustCreateNode(t, s, n)
	}
	got, err = s.ListShards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name  string
		count int
	}
	var rows []row
	for _, sh := range got {
		name := "<nil>"
		if sh.Name != nil {
			name = *sh.Name
		}
		rows = append(rows, row{name, sh.Count})
	}
	want := []row{{"s1", 3}, {"<nil>", 2}, {"s2", 2}, {"s0", 1}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("shards = %v, want %v", rows, want)
	}
}
