package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/fake"
	"castiron/fault"
	"castiron/storage"
)

// ambiguousStore fails the next node write as the store does when the
// PostgreSQL server goes away during a COMMIT: fault.Unavailable, with the
// write stored (commit) or not.
type ambiguousStore struct {
	storage.Store
	mu        sync.Mutex
	armed     bool
	commit    bool
	committed *storage.Node // what the failed write stored, when it did
}

var errRollback = errors.New("test: roll back")

func (s *ambiguousStore) arm(commit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.commit, s.committed = true, commit, nil
}

// CreateNode stores the node and answers fault.Unavailable when armed.
func (s *ambiguousStore) CreateNode(ctx context.Context, n *storage.Node) error {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if err := s.Store.CreateNode(ctx, n); err != nil || !armed {
		return err
	}
	return fault.New(fault.Unavailable, "castiron's database server cannot be reached: the change may not have been stored. Retry shortly.")
}

func (s *ambiguousStore) UpdateNode(ctx context.Context, ident string, fn storage.NodeUpdate) (*storage.Node, error) {
	s.mu.Lock()
	armed, commit := s.armed, s.commit
	s.armed = false
	s.mu.Unlock()
	if !armed {
		return s.Store.UpdateNode(ctx, ident, fn)
	}
	lost := fault.New(fault.Unavailable, "castiron's database server cannot be reached: the change may not have been stored. Retry shortly.")
	if commit {
		n, err := s.Store.UpdateNode(ctx, ident, fn)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.committed = n
		s.mu.Unlock()
		return nil, lost
	}
	_, err := s.Store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		if _, err := fn(n); err != nil {
			return nil, err
		}
		return nil, errRollback
	})
	if !errors.Is(err, errRollback) {
		return nil, err
	}
	return nil, lost
}

// heldPower blocks power changes until release is closed: a running task
// holding its node's reservation.
type heldPower struct {
	*fake.Driver
	entered chan struct{}
	release chan struct{}
}

func (d *heldPower) SetPowerState(ctx context.Context, n driver.Node, target string, timeout time.Duration) error {
	d.entered <- struct{}{}
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	return d.Driver.SetPowerState(ctx, n, target, timeout)
}

func TestOrphanedReservationReleased(t *testing.T) {
	ctx := context.Background()
	st, err := storage.Open(ctx, filepath.Join(t.TempDir(), "castiron.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ws := &ambiguousStore{Store: st}
	d := &heldPower{Driver: fake.New(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	const interval = 20 * time.Millisecond
	c := New(ws, NewRegistry(NewFakeHardware(d), NewManualManagement(d)), Config{
		Hostname:            "test-conductor",
		OrphanCheckInterval: interval,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	create := func() *storage.Node {
		n := &storage.Node{Driver: "fake-hardware"}
		if err := c.CreateNode(ctx, n, true); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// B: its first reserving write fails without being stored (a suspect
	// that was never ours), then a retry reserves it for a task that runs
	// until the end of the test: that reservation must stay.
	b := create()
	ws.arm(false)
	if err := c.SetPower(ctx, b.UUID, driver.PowerOn, 0); !fault.Is(err, fault.Unavailable) {
		t.Fatalf("power on with the write lost: %v, want Unavailable", err)
	}
	if err := c.SetPower(ctx, b.UUID, driver.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	<-d.entered

	// A: manage's reserving write is stored, but the answer is lost: the
	// verb fails (503) and starts no task.
	a := create()
	ws.arm(true)
	if err := c.Provision(ctx, a.UUID, ProvisionRequest{Target: "manage"}); !fault.Is(err, fault.Unavailable) {
		t.Fatalf("manage with the answer lost: %v, want Unavailable", err)
	}
	ws.mu.Lock()
	stored := ws.committed
	ws.mu.Unlock()
	if stored == nil || deref(stored.Reservation) != "test-conductor" || stored.ProvisionState != string(Verifying) {
		t.Fatalf("the lost write stored %+v, want the node reserved in verifying", stored)
	}

	// Released within a bound of a few check intervals (the machine is shared).
	start := time.Now()
	deadline := start.Add(5 * time.Second)
	var n *storage.Node
	for {
		if n, err = st.GetNode(ctx, a.UUID); err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still reserved by %s in %q after %s", a.UUID, *n.Reservation, n.ProvisionState, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("orphaned reservation released %s after the verb failed (check interval %s)", time.Since(start).Round(time.Millisecond), interval)
	if n.ProvisionState != string(Enroll) || n.TargetProvisionState != nil || !strings.Contains(deref(n.LastError), "could not be confirmed") {
		t.Fatalf("released node: state %q target %v last_error %q; want enroll, no target, the reason", n.ProvisionState, deref(n.TargetProvisionState), deref(n.LastError))
	}
	// The client's retry now succeeds.
	if err := c.Provision(ctx, a.UUID, ProvisionRequest{Target: "manage"}); err != nil {
		t.Fatalf("retried manage: %v", err)
	}

	// A node created reserved (discovery's) whose create answer was lost.
	ws.arm(true)
	dn := &storage.Node{UUID: "0d6f8e0a-4c1b-4f5e-9a57-2f3c1b7e9d10", Driver: "fake-hardware", Reservation: strp("test-conductor")}
	if err := c.store.CreateNode(ctx, dn); !fault.Is(err, fault.Unavailable) {
		t.Fatalf("create with the answer lost: %v, want Unavailable", err)
	}
	for {
		if n, err = st.GetNode(ctx, dn.UUID); err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("created node %s still reserved", dn.UUID)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// B's task still holds its node after many more checks.
	time.Sleep(10 * interval)
	if n, err = st.GetNode(ctx, b.UUID); err != nil {
		t.Fatal(err)
	}
	if deref(n.Reservation) != "test-conductor" || deref(n.TargetPowerState) != driver.PowerOn || n.LastError != nil {
		t.Fatalf("running task's node: reservation %q target power %q last_error %q; want it untouched", deref(n.Reservation), deref(n.TargetPowerState), deref(n.LastError))
	}
	close(d.release)
	deadline = time.Now().Add(5 * time.Second)
	for {
		if n, err = st.GetNode(ctx, b.UUID); err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still reserved after its task was let go", b.UUID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if deref(n.PowerState) != driver.PowerOn || n.LastError != nil {
		t.Fatalf("B after its task: power %q last_error %q", deref(n.PowerState), deref(n.LastError))
	}
	for {
		if n, err = st.GetNode(ctx, a.UUID); err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil && n.ProvisionState == string(Manageable) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A after the retried manage: %q reserved %v", n.ProvisionState, deref(n.Reservation))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
