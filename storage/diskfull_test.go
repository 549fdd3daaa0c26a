package storage

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"castiron/fault"
	"castiron/storage/disktest"
)

// TestDiskFull: on a data directory whose disk fills up, writes fail with
// fault.StorageFull (nothing half-written), concurrent ones too, reads keep
// working, leases can be read, and once space is freed writes succeed
// again; after a reopen every acknowledged node is there and SQLite's
// integrity check passes.
func TestDiskFull(t *testing.T) {
	if onPostgres() {
		t.Skip("the disk of a PostgreSQL server is not the test's to fill")
	}
	ctx := context.Background()
	dir := disktest.Small(t, 4)
	path := filepath.Join(dir, "castiron.db")
	s := openAt(t, path)
	var acked []string
	create := func(i int) error {
		n := newNode(fmt.Sprintf("node-%d", i))
		if err := s.CreateNode(ctx, n); err != nil {
			return err
		}
		acked = append(acked, n.UUID)
		return nil
	}
	for i := 0; i < 20; i++ {
		if err := create(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutLease(ctx, Lease{MAC: "52:54:00:00:00:01", IP: netip.MustParseAddr("10.0.0.5"), Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, free := disktest.Fill(t, dir)

	// The WAL may still have room of its own: write until a write fails.
	var full error
	i := 20
	for ; i < 20000 && full == nil; i++ {
		full = create(i)
	}
	if !fault.Is(full, fault.StorageFull) {
		t.Fatalf("create on a full disk: %v (%T), want a fault.StorageFull", full, full)
	}
	t.Logf("disk full after %d creates: %v", len(acked), full)
	// Concurrent writes share commits: each is refused alike.
	errs := make(chan error, 8)
	for k := 0; k < 8; k++ {
		go func(k int) { errs <- s.CreateNode(ctx, newNode(fmt.Sprintf("burst-%d", k))) }(k)
	}
	for k := 0; k < 8; k++ {
		if err := <-errs; !fault.Is(err, fault.StorageFull) {
			t.Errorf("concurrent create on a full disk: %v, want a fault.StorageFull", err)
		}
	}
	if _, err := s.UpdateNode(ctx, acked[0], func(n *Node) (*Event, error) {
		n.Extra = JSONObject{"big": string(make([]byte, 64<<10))}
		return nil, nil
	}); !fault.Is(err, fault.StorageFull) {
		t.Errorf("update on a full disk: %v, want a fault.StorageFull", err)
	}
	// Reads go on.
	got, err := s.ListNodes(ctx, NodeQuery{})
	if err != nil {
		t.Fatalf("list on a full disk: %v", err)
	}
	if len(got) != len(acked) {
		t.Errorf("list on a full disk: %d nodes, want the %d acknowledged", len(got), len(acked))
	}
	if _, err := s.GetNode(ctx, acked[len(acked)-1]); err != nil {
		t.Errorf("get on a full disk: %v", err)
	}
	if _, err := s.GetLease(ctx, "52:54:00:00:00:01"); err != nil {
		t.Errorf("lease on a full disk: %v", err)
	}

	free()
	if err := create(i); err != nil {
		t.Fatalf("create once space is back: %v", err)
	}
	s = reopen(t, s, path)
	for _, id := range acked {
		if _, err := s.GetNode(ctx, id); err != nil {
			t.Errorf("acknowledged node %s after reopen: %v", id, err)
		}
	}
	var check string
	if err := s.r.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
}
