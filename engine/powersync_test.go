package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/ipmi"
	"castiron/storage"
)

// syncRig is a started conductor with the ipmi hardware type over a real
// SQLite file, and a fleet of simulated IPMI BMCs on loopback.
type syncRig struct {
	c     *Conductor
	store *storage.SQLite
	fleet *ipmisim.Fleet
	ipmi  *ipmi.Driver
}

func newSyncRig(t *testing.T, sim ipmisim.Config, opts ...func(*Config)) *syncRig {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, filepath.Join(t.TempDir(), "castiron.db"))
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := ipmisim.Start(ctx, sim)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := ipmi.New(ipmi.Config{Logger: quiet, Timeout: 200 * time.Millisecond, Retries: 1})
	cfg := Config{
		Hostname:          "test-conductor",
		Logger:            quiet,
		PowerSyncInterval: time.Hour, // passes are run by the tests
	}
	for _, o := range opts {
		o(&cfg)
	}
	c := New(st, NewRegistry(NewIPMIHardware(d, d, ipmi.Properties())), cfg)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if n := d.OpenSessions(); n != 0 {
			t.Errorf("%d BMC sessions still open after Stop", n)
		}
		fleet.Close()
		st.Close()
	})
	return &syncRig{c: c, store: st, fleet: fleet, ipmi: d}
}

// node enrolls a manageable ipmi node for BMC b whose recorded power is
// power.
func (r *syncRig) node(t *testing.T, b *ipmisim.BMC, power string) *storage.Node {
	t.Helper()
	ctx := context.Background()
	n := &storage.Node{Driver: "ipmi", DriverInfo: map[string]any{
		"ipmi_address": b.Host(), "ipmi_port": b.Port(), "ipmi_cipher_suite": 17,
		"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword,
	}}
	if err := r.c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	n, err := r.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.ProvisionState = string(Manageable)
		n.PowerState = strp(power)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *syncRig) get(t *testing.T, uuid string) *storage.Node {
	t.Helper()
	n, err := r.store.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Every node's power change behind castiron's back is recorded in one
// pass; reads of one BMC never overlap (PowerSyncPerBMC 1), reads of
// different BMCs do; the second pass reuses the sessions of the first.
func TestPowerSyncRecordsChanges(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 8, LatencyMin: 10 * time.Millisecond, LatencyMax: 30 * time.Millisecond})
	ctx := context.Background()
	var nodes []*storage.Node
	want := map[string]string{}
	for i, b := range r.fleet.BMCs {
		// Three nodes behind each of the first two BMCs (a chassis of
		// blades), one behind each other BMC.
		k := 1
		if i < 2 {
			k = 3
		}
		for range k {
			n := r.node(t, b, driver.PowerOff)
			nodes = append(nodes, n)
			want[n.UUID] = driver.PowerOff
			if i%2 == 0 {
				want[n.UUID] = driver.PowerOn
			}
		}
		if i%2 == 0 {
			b.SetPower(true)
		}
	}
	start := time.Now()
	if err := r.c.syncPowerStates(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("pass over %d nodes on %d BMCs: %v", len(nodes), len(r.fleet.BMCs), time.Since(start))
	for _, n := range nodes {
		if got := deref(r.get(t, n.UUID).PowerState); got != want[n.UUID] {
			t.Errorf("node %s: power %q, want %q", n.UUID, got, want[n.UUID])
		}
	}
	for i, b := range r.fleet.BMCs {
		if m := b.Stats().MaxInFlight; m != 1 {
			t.Errorf("BMC %d had %d requests in flight at once, want 1", i, m)
		}
	}
	before := r.fleet.Stats()
	if err := r.c.syncPowerStates(ctx); err != nil {
		t.Fatal(err)
	}
	after := r.fleet.Stats()
	if reads, pkts := after.Reads-before.Reads, after.Received-before.Received; reads != uint64(len(nodes)) || pkts != reads {
		t.Errorf("second pass: %d reads in %d packets, want %d in as many (kept sessions)", reads, pkts, len(nodes))
	}
	if r.ipmi.OpenSessions() != len(r.fleet.BMCs) {
		t.Errorf("%d sessions kept, want one per BMC (%d)", r.ipmi.OpenSessions(), len(r.fleet.BMCs))
	}

	// PowerSyncPerBMC 3: the three nodes of a shared BMC are read at once.
	r.c.cfg.PowerSyncPerBMC = 3
	r.c.readBMCs(ctx, nodes, func(ctx context.Context, n *storage.Node) {
		hw, _ := r.c.hardwareOf(n)
		if _, _, _, err := r.c.readPower(ctx, hw, n); err != nil {
			t.Error(err)
		}
	})
	if m := r.fleet.BMCs[0].Stats().MaxInFlight; m < 2 || m > 3 {
		t.Errorf("shared BMC with 3 lanes: %d requests in flight at most, want 2-3", m)
	}
}

// A dead BMC fails its node's reads, bounded by PowerSyncTimeout, while
// the other nodes are synced; after PowerSyncMaxRetries failures the node
// goes to maintenance with fault "power failure" and power state None, as
// in Ironic; once the BMC answers again, recovery takes it out.
func TestPowerSyncFailureAndRecovery(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 4, LatencyMin: 5 * time.Millisecond, LatencyMax: 10 * time.Millisecond},
		func(c *Config) { c.PowerSyncTimeout = 500 * time.Millisecond; c.PowerSyncWorkers = 2 })
	ctx := context.Background()
	dead := r.fleet.BMCs[0]
	dead.SetDead(true)
	deadNode := r.node(t, dead, driver.PowerOn)
	var others []*storage.Node
	for _, b := range r.fleet.BMCs[1:] {
		others = append(others, r.node(t, b, driver.PowerOn))
	}
	for pass := 1; pass <= 4; pass++ {
		for _, b := range r.fleet.BMCs[1:] {
			b.SetPower(pass%2 == 1)
		}
		start := time.Now()
		if err := r.c.syncPowerStates(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("pass %d: %v", pass, time.Since(start))
		want := map[bool]string{true: driver.PowerOn, false: driver.PowerOff}[pass%2 == 1]
		for _, n := range others {
			if got := deref(r.get(t, n.UUID).PowerState); got != want {
				t.Fatalf("pass %d: healthy node's power %q, want %q", pass, got, want)
			}
		}
		n := r.get(t, deadNode.UUID)
		if pass <= 3 {
			if n.Maintenance || deref(n.PowerState) != driver.PowerOn {
				t.Fatalf("pass %d: dead BMC's node maintenance=%v power=%q, want untouched", pass, n.Maintenance, deref(n.PowerState))
			}
			continue
		}
		if !n.Maintenance || deref(n.Fault) != "power failure" || n.PowerState != nil ||
			!strings.Contains(deref(n.MaintenanceReason), "max retries exceeded") || !strings.Contains(deref(n.LastError), "max retries exceeded") {
			t.Fatalf("after 4 failures: maintenance=%v fault=%q power=%v reason=%q", n.Maintenance, deref(n.Fault), n.PowerState, deref(n.MaintenanceReason))
		}
	}
	// In maintenance, the sync leaves it alone.
	reads := dead.Stats().Received
	if err := r.c.syncPowerStates(ctx); err != nil {
		t.Fatal(err)
	}
	if dead.Stats().Received != reads {
		t.Fatal("power sync read a node in maintenance")
	}
	// Still dead: recovery leaves it in maintenance.
	if err := r.c.recoverPowerFailures(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.get(t, deadNode.UUID).Maintenance {
		t.Fatal("recovered while the BMC is dead")
	}
	dead.SetDead(false)
	dead.SetPower(false)
	if err := r.c.recoverPowerFailures(ctx); err != nil {
		t.Fatal(err)
	}
	n := r.get(t, deadNode.UUID)
	if n.Maintenance || n.Fault != nil || n.MaintenanceReason != nil || deref(n.PowerState) != driver.PowerOff {
		t.Fatalf("after recovery: maintenance=%v fault=%v reason=%v power=%q", n.Maintenance, n.Fault, n.MaintenanceReason, deref(n.PowerState))
	}
	if got := r.c.psync.failures(deadNode.UUID); got != 0 {
		t.Fatalf("failure count %d after recovery", got)
	}
}
