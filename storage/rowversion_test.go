package storage

import (
	"context"
	"reflect"
	"testing"

	"castiron/fault"
)

// TestNodeRowVersion: every way a node row is written gives it a row
// version it never had before, and GetNodeVersion reads the one stored
// (the API's view cache relies on both).
func TestNodeRowVersion(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "rv")
	n := nodes[0]
	seen := map[int64]bool{}
	// current checks that GetNodeVersion (by uuid and by name) and GetNode
	// agree on a version not seen before, and returns it.
	current := func(what string) int64 {
		t.Helper()
		full, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ident := range []string{n.UUID, "rv"} {
			v, err := s.GetNodeVersion(ctx, ident)
			if err != nil {
				t.Fatalf("%s: GetNodeVersion(%s): %v", what, ident, err)
			}
			want := &NodeVersion{id: full.ID, UUID: full.UUID, RowVersion: full.RowVersion, ConductorGroup: full.ConductorGroup, Driver: full.Driver}
			if !reflect.DeepEqual(v, want) {
				t.Fatalf("%s: GetNodeVersion(%s) = %+v, want %+v", what, ident, v, want)
			}
		}
		if seen[full.RowVersion] {
			t.Fatalf("%s: row version %d seen before", what, full.RowVersion)
		}
		seen[full.RowVersion] = true
		return full.RowVersion
	}
	if v := current("create"); v != n.RowVersion {
		t.Fatalf("created with %d, stored %d", n.RowVersion, v)
	}

	upd, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) { n.Reservation = ptr("me"); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if v := current("update"); v != upd.RowVersion {
		t.Fatalf("update returned version %d, stored %d", upd.RowVersion, v)
	}
	// An update that changes nothing still writes (updated_at): a new version.
	if _, err := s.UpdateNode(ctx, n.UUID, func(*Node) (*Event, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	current("empty update")

	if _, err := s.ReleaseAllReservations(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	current("release reservations")

	a := mustCreate(t, s.CreateAllocation, &Allocation{State: "allocating"})
	if _, _, err := s.UpdateAllocationAndNode(ctx, a.UUID, n.UUID, func(a *Allocation, n *Node) error {
		a.NodeUUID, n.AllocationUUID, n.InstanceUUID = &n.UUID, &a.UUID, ptr("6a2c1a5e-7d0b-4c5e-9d7e-0f4d3c2b1a00")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	current("allocation and node")
	if err := s.DeleteAllocation(ctx, a.UUID, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetNode(ctx, n.UUID); got.AllocationUUID != nil {
		t.Fatalf("allocation still on the node: %v", *got.AllocationUUID)
	}
	current("delete allocation")

	// Deleted and created again under the same uuid (and, on SQLite, the
	// same id): not a version the old row had.
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetNodeVersion(ctx, n.UUID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("deleted node: %v, want not found", err)
	}
	again := newNode("rv")
	again.UUID = n.UUID
	mustCreateNode(t, s, again)
	current("created again")

	if _, err := s.GetNodeVersion(ctx, "no-such-node"); !fault.Is(err, fault.NotFound) {
		t.Fatalf("unknown name: %v, want not found", err)
	}
}

// TestListNodesByUUIDs: NodeQuery.UUIDs narrows a list to those nodes; an
// empty set matches none.
func TestListNodesByUUIDs(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b", "c")
	got, err := s.ListNodes(ctx, NodeQuery{UUIDs: []string{nodes[2].UUID, nodes[0].UUID}, Columns: []string{"uuid", "row_version"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].UUID != nodes[0].UUID || got[1].UUID != nodes[2].UUID || got[0].RowVersion == 0 || got[0].Name != nil {
		t.Fatalf("got %+v %+v", got[0], got[1])
	}
	if none, err := s.ListNodes(ctx, NodeQuery{UUIDs: []string{}}); err != nil || len(none) != 0 {
		t.Fatalf("empty set: %v, %v", none, err)
	}
}

// TestListNodeVersions: the versions list pages, sorts and filters as the
// node list does.
func TestListNodeVersions(t *testing.T) {
	ctx := context.Background()
	s, _ := openWithNodes(t, "d", "b", "e", "a", "c")
	if _, err := s.UpdateNode(ctx, "e", func(n *Node) (*Event, error) { n.Maintenance = true; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	all, _ := s.ListNodes(ctx, NodeQuery{})
	for _, q := range []NodeQuery{
		{},
		{Page: Page{Limit: 2}},
		{Page: Page{Limit: 2, Marker: all[1].UUID}},
		{Page: Page{SortKey: "name", SortDir: Desc, Limit: 3, Marker: all[0].UUID}},
		{Maintenance: ptr(false)},
		{UUIDs: []string{all[4].UUID, all[2].UUID}},
	} {
		nodes, err := s.ListNodes(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := s.ListNodeVersions(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var want, got []NodeVersion
		for _, n := range nodes {
			want = append(want, NodeVersion{id: n.ID, UUID: n.UUID, RowVersion: n.RowVersion, ConductorGroup: n.ConductorGroup, Driver: n.Driver})
		}
		for _, v := range vs {
			got = append(got, *v)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: versions %+v, nodes %+v", q, got, want)
		}
	}
	some, err := s.ListNodeVersions(ctx, NodeQuery{Columns: []string{"row_version"}})
	if err != nil || len(some) != 5 || some[0].UUID != all[0].UUID || some[0].RowVersion != all[0].RowVersion || some[0].Driver != "" {
		t.Fatalf("only row_version: %+v, %v", some[0], err)
	}
	if _, err := s.ListNodeVersions(ctx, NodeQuery{Page: Page{SortKey: "properties"}}); err == nil {
		t.Fatal("sorted by a JSON column")
	}
}
