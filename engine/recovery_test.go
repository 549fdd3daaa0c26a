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
	if err := h.store.RegisterConductor(ctx, &storage.Conductor{Hostname: dead, Drivers: []string{"fake-hardware"}, Online: true, CreatedAt: long}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.TouchConductor(ctx, dead, long); err != nil {
		t.Fatal(err)
	}
	stuck := h.nodeIn(t, Cleaning, func(n *storage.Node) { n.Reservation = &dead })
	power := h.nodeIn(t, Manageable, func(n *storage.Node) { n.Reservation = &dead; n.TargetPowerState = strp("power on") })
	mine := h.nodeIn(t, Manageable, nil)
	if err := h.c.takeOverDead(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := h.store.GetNode(ctx, stuck.UUID)
	if State(s.ProvisionState) != CleanFail || s.Reservation != nil || !strings.Contains(deref(s.LastError), dead) {
		t.Fatalf("stuck node: %q %v %q", s.ProvisionState, s.Reservation, deref(s.LastError))
	}
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
