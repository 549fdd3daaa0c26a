package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver/fake"
	"castiron/storage"
)

func TestWaitStateTimesOut(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.CallbackTimeout = 100 * time.Millisecond
		c.TimeoutCheckInterval = 20 * time.Millisecond
	})
	ctx := context.Background()
	n := h.nodeIn(t, Manageable, func(n *storage.Node) { n.InspectInterface = "agent" })
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "inspect"}); err != nil {
		t.Fatal(err)
	}
	h.waitState(t, n.UUID, InspectWait)
	got := h.waitState(t, n.UUID, InspectFail)
	if got.LastError == nil || !strings.Contains(*got.LastError, "Timeout reached while waiting for callback") {
		t.Fatalf("last_error %v", deref(got.LastError))
	}
	if deref(got.TargetProvisionState) != string(Manageable) {
		t.Fatalf("target %q", deref(got.TargetProvisionState))
	}
}

// TestRestartRecovery simulates a conductor that died: rows left reserved
// in transitional states by "crashed-host", then a new conductor of the same
// name starts on the same database.
func TestRestartRecovery(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "castiron.db")
	st, err := storage.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	host := "crashed-host"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := fake.New()
	reg := NewRegistry(NewFakeHardware(d))
	old := New(st, reg, Config{Hostname: host, Logger: quiet})

	mk := func(state State, mutate func(n *storage.Node)) string {
		n := &storage.Node{Driver: "fake-hardware"}
		if err := old.CreateNode(ctx, n, true); err != nil {
			t.Fatal(err)
		}
		_, err := st.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
			n.ProvisionState = string(state)
			n.TargetProvisionState = strp(string(states[state].Target))
			n.Reservation = &host
			past := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
			n.ProvisionUpdatedAt = &past
			if mutate != nil {
				mutate(n)
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n.UUID
	}
	deploying := mk(Deploying, nil)
	verifying := mk(Verifying, nil)
	deleting := mk(Deleting, nil)
	waiting := mk(InspectWait, func(n *storage.Node) { n.Reservation = nil })
	powering := mk(Active, func(n *storage.Node) { n.TargetPowerState = strp("power on"); n.TargetProvisionState = nil })
	before, _ := st.GetNode(ctx, waiting)

	c := New(st, reg, Config{Hostname: host, Logger: quiet})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)

	for id, want := range map[string]State{deploying: DeployFail, verifying: Enroll, deleting: Error, waiting: InspectWait, powering: Active} {
		n, err := st.GetNode(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if State(n.ProvisionState) != want || n.Reservation != nil {
			t.Errorf("%s: state %q reservation %v, want %q and none", id, n.ProvisionState, deref(n.Reservation), want)
		}
		if want != InspectWait && (n.LastError == nil || !strings.Contains(*n.LastError, "restart")) {
			t.Errorf("%s: last_error %q does not explain the restart", id, deref(n.LastError))
		}
	}
	after, _ := st.GetNode(ctx, waiting)
	if !after.ProvisionUpdatedAt.Equal(*before.ProvisionUpdatedAt) {
		t.Errorf("inspect wait deadline moved: %v -> %v", before.ProvisionUpdatedAt, after.ProvisionUpdatedAt)
	}
	p, _ := st.GetNode(ctx, powering)
	if p.TargetPowerState != nil {
		t.Errorf("target_power_state %q survived the restart", *p.TargetPowerState)
	}
	if v, _ := st.GetNode(ctx, verifying); deref(v.TargetProvisionState) != "" {
		t.Errorf("verifying->enroll left target %q", deref(v.TargetProvisionState))
	}
}

// TestTakeOverFromDeadConductor: a conductor renamed across a crash leaves
// reservations under its old name; once that name stops heartbeating they are
// released and its stuck nodes failed.
func TestTakeOverFromDeadConductor(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	dead := "old-name"
	long := time.Now().UTC().Add(-time.Hour)
	otherConductor(t, h, dead, long, true)
	stuck := h.nodeIn(t, Cleaning, func(n *storage.Node) { n.Reservation = &dead })
	power := h.nodeIn(t, Manageable, func(n *storage.Node) { n.Reservation = &dead; n.TargetPowerState = strp("power on") })
	mine := h.nodeIn(t, Manageable, nil)
	takeOverFailed(t, h, stuck.UUID, CleanFail, dead)
	p, _ := h.store.GetNode(ctx, power.UUID)
	if p.Reservation != nil || p.TargetPowerState != nil || State(p.ProvisionState) != Manageable {
		t.Fatalf("power node: %v %v %q", p.Reservation, p.TargetPowerState, p.ProvisionState)
	}
	if err := h.c.Provision(ctx, mine.UUID, ProvisionRequest{Target: "provide"}); err != nil {
		t.Fatal(err)
	}
	cd, _ := h.store.GetConductor(ctx, dead)
	if cd.Online {
		t.Fatal("dead conductor still online")
	}
}

// TestTakeOverFromStoppedConductor: a conductor stopped with SIGTERM marks
// itself offline but leaves the reservations of the tasks the stop
// interrupted (for its own restart). If it does not come back within the
// heartbeat timeout, the others release them and fail its stuck nodes, as
// Ironic's orphan check does; a stopped conductor whose heartbeat is still
// recent is left alone (its restart recovers its own nodes).
func TestTakeOverFromStoppedConductor(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	stopped, recent := "stopped", "restarting"
	long := time.Now().UTC().Add(-time.Hour)
	otherConductor(t, h, stopped, long, false)
	otherConductor(t, h, recent, time.Now().UTC(), false)
	stuck := h.nodeIn(t, Deploying, func(n *storage.Node) { n.Reservation = &stopped })
	kept := h.nodeIn(t, Deploying, func(n *storage.Node) { n.Reservation = &recent })
	takeOverFailed(t, h, stuck.UUID, DeployFail, stopped)
	k, _ := h.store.GetNode(ctx, kept.UUID)
	if State(k.ProvisionState) != Deploying || deref(k.Reservation) != recent {
		t.Fatalf("node of a conductor stopped just now: %q %v", k.ProvisionState, k.Reservation)
	}
	// Each stale heartbeat is handled once, not every round: a reservation
	// under the stale name that appears later (planted here) stays.
	again := h.nodeIn(t, Manageable, func(n *storage.Node) { n.Reservation = &stopped })
	if err := h.c.takeOverDead(ctx); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.store.GetNode(ctx, again.UUID); deref(a.Reservation) != stopped {
		t.Fatalf("the same stale heartbeat was taken over twice")
	}
}

// otherConductor registers another conductor whose last heartbeat was at
// at; not online: it stopped (SIGTERM) after that heartbeat.
func otherConductor(t *testing.T, h *harness, name string, at time.Time, online bool) {
	t.Helper()
	ctx := context.Background()
	if err := h.store.RegisterConductor(ctx, &storage.Conductor{Hostname: name, Drivers: []string{"fake-hardware"}, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.TouchConductor(ctx, name, at); err != nil {
		t.Fatal(err)
	}
	if !online {
		if err := h.store.UnregisterConductor(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
}

// takeOverFailed runs a takeover round and wants node failed into state,
// unreserved, with a last_error naming the conductor it was taken from.
func takeOverFailed(t *testing.T, h *harness, node string, state State, from string) {
	t.Helper()
	ctx := context.Background()
	if err := h.c.takeOverDead(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := h.store.GetNode(ctx, node)
	if State(n.ProvisionState) != state || n.Reservation != nil || !strings.Contains(deref(n.LastError), from) {
		t.Fatalf("node left by %s: %q %v %q", from, n.ProvisionState, n.Reservation, deref(n.LastError))
	}
}
