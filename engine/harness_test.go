package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"castiron/engine/driver/fake"
	"castiron/storage"
)

// harness is a started conductor over a real SQLite file.
type harness struct {
	c     *Conductor
	store *storage.SQLite
}

func newHarness(t testing.TB, opts ...func(*Config)) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, filepath.Join(t.TempDir(), "castiron.db"))
	if err != nil {
		t.Fatal(err)
	}
	d := fake.New()
	cfg := Config{
		Hostname:       "test-conductor",
		AutomatedClean: true,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	c := New(st, NewRegistry(NewFakeHardware(d), NewManualManagement(d)), cfg)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return &harness{c: c, store: st}
}

// nodeIn creates a fake-hardware node and puts it straight into state st
// (bypassing the machine, as only a test may), applying extra changes.
func (h *harness) nodeIn(t testing.TB, st State, extra func(*storage.Node)) *storage.Node {
	t.Helper()
	ctx := context.Background()
	n := &storage.Node{Driver: "fake-hardware"}
	if err := h.c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	n, err := h.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.ProvisionState = string(st)
		if tgt := states[st].Target; tgt != "" {
			n.TargetProvisionState = strp(string(tgt))
		}
		now := time.Now().UTC()
		n.ProvisionUpdatedAt = &now
		n.InstanceInfo["image_source"] = "http://127.0.0.1/image.raw"
		if extra != nil {
			extra(n)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitIdle waits until no task holds the node.
func (h *harness) waitIdle(t testing.TB, uuid string) *storage.Node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := h.store.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still reserved in %q", uuid, n.ProvisionState)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitState waits until the node is idle in state want.
func (h *harness) waitState(t testing.TB, uuid string, want State) *storage.Node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := h.waitIdle(t, uuid)
		if State(n.ProvisionState) == want {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s in %q (last_error %v), want %q", uuid, n.ProvisionState, deref(n.LastError), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
