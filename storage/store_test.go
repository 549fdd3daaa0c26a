package storage

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"castiron/fault"
)

func TestConductors(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	first := time.Date(2025, 2, 3, 4, 5, 6, 789012345, time.UTC)
	c := &Conductor{Hostname: "c2", ConductorGroup: "g", Drivers: []string{"ipmi", "fake-hardware"}, CreatedAt: first}
	if err := s.RegisterConductor(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetConductor(ctx, "c2")
	if err != nil || !reflect.DeepEqual(got, c) || !got.Online || got.UpdatedAt == nil {
		t.Fatalf("got %+v (%v), want %+v", got, err, c)
	}
	if err := s.UnregisterConductor(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetConductor(ctx, "c2"); got.Online {
		t.Fatal("still online after unregister")
	}
	// Re-register keeps the first created_at and comes back online.
	again := &Conductor{Hostname: "c2", Drivers: []string{"ipmi"}}
	if err := s.RegisterConductor(ctx, again); err != nil {
		t.Fatal(err)
	}
	if !again.CreatedAt.Equal(first.Truncate(time.Microsecond)) {
		t.Fatalf("CreatedAt after re-register = %v, want %v", again.CreatedAt, first)
	}
	got, _ = s.GetConductor(ctx, "c2")
	if !got.Online || !reflect.DeepEqual(got.Drivers, []string{"ipmi"}) || got.ConductorGroup != "" || !got.CreatedAt.Equal(again.CreatedAt) {
		t.Fatalf("after re-register: %+v", got)
	}
	beat := time.Date(2030, 1, 1, 0, 0, 0, 1000, time.UTC)
	if err := s.UnregisterConductor(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchConductor(ctx, "c2", beat); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetConductor(ctx, "c2")
	if !got.UpdatedAt.Equal(beat) || !got.Online {
		t.Fatalf("after touch: %+v", got)
	}
	for _, h := range []string{"c3", "c1"} {
		if err := s.RegisterConductor(ctx, &Conductor{Hostname: h}); err != nil {
			t.Fatal(err)
		}
	}
	hosts := func(c *Conductor) string { return c.Hostname }
	checkLists(t, s.ListConductors, hosts, []listCase[Page]{
		{"default", Page{}, []string{"c1", "c2", "c3"}},
		{"id means default", Page{SortKey: "id"}, []string{"c1", "c2", "c3"}},
		{"desc", Page{SortDir: Desc}, []string{"c3", "c2", "c1"}},
		{"marker", Page{Marker: "c1", Limit: 1}, []string{"c2"}},
		{"by created_at", Page{SortKey: "created_at", Limit: 1}, []string{"c2"}},
	})
}

func TestEvents(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "n", "other")
	n, other := nodes[0], nodes[1]
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var evs []*Event
	for i := 0; i < 5; i++ {
		// Created out of time order: listing follows created_at.
		e := &Event{NodeUUID: n.UUID, CreatedAt: base.Add(time.Duration((i*3)%5) * time.Second),
			Conductor: "c", EventType: "provisioning", Severity: "INFO", Event: fmt.Sprintf("e%d", i),
			User: "admin", Verb: "manage", FromState: "enroll", ToState: "verifying"}
		if err := s.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if err := s.AddEvent(ctx, &Event{NodeUUID: other.UUID, Event: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEvent(ctx, n.UUID, evs[2].UUID)
	if err != nil || !reflect.DeepEqual(got, evs[2]) {
		t.Fatalf("GetEvent = %+v, %v; want %+v", got, err, evs[2])
	}
	_, err = s.GetEvent(ctx, other.UUID, evs[2].UUID)
	wantKind(t, err, fault.NotFound, "storage: no node_history row "+evs[2].UUID)

	events := func(ctx context.Context, p Page) ([]*Event, error) { return s.ListEvents(ctx, n.UUID, p) }
	checkLists(t, events, func(e *Event) string { return e.Event }, []listCase[Page]{
		{"oldest first", Page{}, []string{"e0", "e2", "e4", "e1", "e3"}},
		{"newest first", Page{SortDir: Desc}, []string{"e3", "e1", "e4", "e2", "e0"}},
		{"after marker", Page{Marker: evs[2].UUID, Limit: 2}, []string{"e4", "e1"}},
	})
	// A marker from another node's history is not found in this one.
	oth, _ := s.ListEvents(ctx, other.UUID, Page{})
	_, err = s.ListEvents(ctx, n.UUID, Page{Marker: oth[0].UUID})
	wantKind(t, err, fault.NotFound, "")
	// A node without events lists empty, not NotFound.
	empty := mustCreateNode(t, s, newNode("empty"))
	if es, err := s.ListEvents(ctx, empty.UUID, Page{}); err != nil || len(es) != 0 {
		t.Fatalf("events of empty node = %v, %v", es, err)
	}
}

func TestDeleteNodeCascades(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "n", "keep")
	n, keep := nodes[0], nodes[1]
	for i, node := range []*Node{n, n, keep} {
		mustCreate(t, s.CreatePort, &Port{NodeUUID: node.UUID, Address: fmt.Sprintf("52:54:00:00:00:%02x", i)})
		if err := s.AddEvent(ctx, &Event{NodeUUID: node.UUID, Event: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	count := func(table, nodeUUID string) int {
		var c int
		if err := s.reader().queryRow(ctx, "SELECT COUNT(*) FROM "+table+" WHERE node_uuid = ?", nodeUUID).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if p, h := count("ports", n.UUID), count("node_history", n.UUID); p != 0 || h != 0 {
		t.Fatalf("left behind %d ports, %d events", p, h)
	}
	if p, h := count("ports", keep.UUID), count("node_history", keep.UUID); p != 1 || h != 1 {
		t.Fatalf("other node has %d ports, %d events; want 1, 1", p, h)
	}
	_, err := s.GetNode(ctx, n.UUID)
	wantKind(t, err, fault.NotFound, "")
	wantKind(t, s.DeleteNode(ctx, n.UUID), fault.NotFound, "")
}

func TestReleaseAllReservations(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var mine []string
	for i := 0; i < 4; i++ {
		n := newNode(fmt.Sprintf("n%d", i))
		switch i {
		case 0, 2:
			n.Reservation = ptr("me")
			mine = append(mine, n.UUID)
		case 1:
			n.Reservation = ptr("other")
		}
		mustCreateNode(t, s, n)
	}
	got, err := s.ReleaseAllReservations(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	sort.Strings(mine)
	if !reflect.DeepEqual(got, mine) {
		t.Fatalf("released %v, want %v", got, mine)
	}
	reserved, _ := s.ListNodes(ctx, NodeQuery{Reserved: ptr(true)})
	if r := names(reserved); !reflect.DeepEqual(r, []string{"n1"}) {
		t.Fatalf("still reserved: %v", r)
	}
	if again, err := s.ReleaseAllReservations(ctx, "me"); err != nil || len(again) != 0 || again == nil {
		t.Fatalf("second release = %v, %v; want empty", again, err)
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := testDatabase(t)
	s := openAt(t, path)
	n := fullNode()
	mustCreate(t, s.CreateNode, n)
	for i := 0; i < 2; i++ {
		s = reopen(t, s, path)
		got, err := s.GetNode(ctx, n.UUID)
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("after reopen: %+v (%v)", got, err)
		}
		ms, _ := loadMigrations()
		var applied, distinct int
		if err := s.r.db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations").Scan(&applied, &distinct); err != nil {
			t.Fatal(err)
		}
		if applied != len(ms) || distinct != len(ms) {
			t.Fatalf("schema_migrations has %d rows (%d versions), want %d", applied, distinct, len(ms))
		}
		var mode string
		if onPostgres() {
			// PostgreSQL has its own write-ahead log.
		} else if err := s.r.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal_mode = %q, %v", mode, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadersAreReadOnly(t *testing.T) {
	s := openTest(t)
	if _, err := s.r.db.ExecContext(context.Background(), "DELETE FROM nodes"); err == nil {
		t.Fatal("reader pool accepted a write")
	}
}

func TestMigrationsOrdered(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("migrations = %v", ms)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].version <= ms[i-1].version {
			t.Fatalf("migrations out of order: %s after %s", ms[i].name, ms[i-1].name)
		}
	}
}
