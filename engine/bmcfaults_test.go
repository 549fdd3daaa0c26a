package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/storage"
)

// BMC faults (issue 26, item 3): BMCs that drop packets, answer later than
// the request timeout, answer 5xx, forget their sessions or vanish in the
// middle of an operation, driven through the real conductor with both of
// castiron's simulators. Every verb must end in Ironic's state for a
// failure, with a last_error, no reservation left, within a bound of
// seconds; the node must work again once the BMC does. Request timeouts
// are short so each case is bounded by a few seconds.

// verbBound is the most any verb may take against a faulty BMC here: the
// request timeouts and power timeouts below are a fraction of it.
const verbBound = 15 * time.Second

// faultCase is one fault of one simulator: apply makes the BMC faulty,
// heal makes it answer again.
type faultCase struct {
	name        string
	apply, heal func()
	// ok: the driver rides the fault out and every verb succeeds.
	ok bool
	// only, when set, picks the verbs this fault applies to.
	only func(v verb) bool
	// either: a lossy BMC; each verb may succeed (retries) or fail, but
	// ends bounded and unreserved, and a failure is the verb's failure.
	either bool
}

// enrollAt creates n and puts it in state with power off (as if verified).
func enrollAt(t *testing.T, c *Conductor, st *storage.SQLite, n *storage.Node, state State, mutate func(n *storage.Node)) *storage.Node {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	n, err := st.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.ProvisionState = string(state)
		n.PowerState = strp(driver.PowerOff)
		if mutate != nil {
			mutate(n)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// settled waits, at most verbBound, for the node to be unreserved with no
// power change pending and out of every in-progress state, and returns it
// with the time it took.
func settled(t *testing.T, st *storage.SQLite, uuid string, start time.Time) (*storage.Node, time.Duration) {
	t.Helper()
	busy := map[string]bool{"verifying": true, "inspecting": true, "deploying": true, "cleaning": true}
	for {
		n, err := st.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil && n.TargetPowerState == nil && !busy[n.ProvisionState] {
			return n, time.Since(start)
		}
		if time.Since(start) > verbBound {
			t.Fatalf("node %s stuck after %v: state %q target_power %v reservation %v last_error %q",
				uuid, verbBound, n.ProvisionState, deref(n.TargetPowerState), deref(n.Reservation), deref(n.LastError))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// verb is one operation run against a faulty BMC: run starts it on a
// fresh node and returns the error of its synchronous part; check judges
// the settled node.
type verb struct {
	name  string
	state State
	// mutate sets up the fresh node (interfaces, power) before the verb.
	mutate func(n *storage.Node)
	run    func(ctx context.Context, c *Conductor, uuid string) error
	// sync: the verb answers its failure to the caller (boot device).
	sync      bool
	wantState string
	wantError string
}

func powerVerb(target string) verb {
	return verb{name: "power " + target, state: Manageable,
		run: func(ctx context.Context, c *Conductor, uuid string) error {
			return c.SetPower(ctx, uuid, target, 2*time.Second)
		},
		wantState: "manageable", wantError: "Failed to change power state"}
}

func commonVerbs() []verb {
	return []verb{
		powerVerb(driver.PowerOn),
		powerVerb(driver.PowerOff),
		powerVerb(driver.Rebooting),
		{name: "boot device", state: Manageable, sync: true,
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.SetBootDevice(ctx, uuid, driver.BootPXE, false)
			},
			wantState: "manageable", wantError: "Failed to set boot device"},
		// manage: verifying reads the BMC; Ironic's verify failure
		// returns the node to enroll with last_error.
		{name: "manage", state: Enroll,
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "manage"})
			},
			wantState: "enroll", wantError: "Failed to"},
		// inspect by the agent: the ramdisk is booted by the network
		// (boot device pxe, power on): a power failure ends in inspect
		// failed.
		{name: "inspect (agent, powers on)", state: Manageable,
			mutate: func(n *storage.Node) { n.InspectInterface = "agent" },
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "inspect"})
			},
			wantState: "inspect failed", wantError: "failed to"},
		// deploy by the agent: the ramdisk is booted the same way; a
		// power failure ends in deploy failed.
		{name: "deploy (direct, powers on)", state: Available,
			mutate: func(n *storage.Node) {
				n.InstanceInfo = storage.JSONObject{"image_source": "http://127.0.0.1:1/image.qcow2",
					"image_os_hash_algo": "sha256", "image_os_hash_value": strings.Repeat("0", 64)}
			},
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "active"})
			},
			wantState: "deploy failed", wantError: "failed to"},
		// provide with automated cleaning by the agent: clean failed.
		{name: "provide (automated clean, powers on)", state: Manageable,
			mutate: func(n *storage.Node) { n.AutomatedClean = boolp(true) },
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "provide"})
			},
			wantState: "clean failed", wantError: "failed to"},
	}
}

// runVerbs runs every verb against the BMC made faulty by fc, then checks
// that each works again once the BMC heals.
func runVerbs(t *testing.T, fc faultCase, verbs []verb, newNode func(t *testing.T, v verb) *storage.Node,
	c *Conductor, st *storage.SQLite, table *[]string) {
	ctx := context.Background()
	for _, v := range verbs {
		if fc.only != nil && !fc.only(v) {
			continue
		}
		n := newNode(t, v)
		// The BMC starts where the verb has work to do: off, but on for
		// a power off.
		pre := driver.PowerOff
		if v.name == "power "+driver.PowerOff {
			pre = driver.PowerOn
		}
		if err := c.SetPower(ctx, n.UUID, pre, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if got, _ := settled(t, st, n.UUID, time.Now()); got.LastError != nil {
			t.Fatalf("%s: %s before the fault: %s", v.name, pre, deref(got.LastError))
		}
		fc.apply()
		start := time.Now()
		err := v.run(ctx, c, n.UUID)
		var got *storage.Node
		var took time.Duration
		failedAsWanted := func() bool {
			return got.ProvisionState == v.wantState && strings.Contains(deref(got.LastError), v.wantError)
		}
		switch {
		case fc.either && v.sync:
			took = time.Since(start)
			got, _ = settled(t, st, n.UUID, start)
			if err != nil && !strings.Contains(err.Error(), v.wantError) {
				t.Errorf("%s / %s: error %q, want %q", fc.name, v.name, err, v.wantError)
			}
		case fc.either:
			if err != nil {
				t.Fatalf("%s / %s: %v", fc.name, v.name, err)
			}
			got, took = settled(t, st, n.UUID, start)
			if got.LastError != nil && !failedAsWanted() {
				t.Errorf("%s / %s: state %q last_error %q, want success or %q with %q", fc.name, v.name, got.ProvisionState, deref(got.LastError), v.wantState, v.wantError)
			}
		case fc.ok:
			if err != nil {
				t.Errorf("%s / %s: %v", fc.name, v.name, err)
			}
			got, took = settled(t, st, n.UUID, start)
			if got.LastError != nil || strings.Contains(got.ProvisionState, "fail") || got.ProvisionState == "enroll" {
				t.Errorf("%s / %s: state %q last_error %q, want success", fc.name, v.name, got.ProvisionState, deref(got.LastError))
			}
		case v.sync:
			took = time.Since(start)
			if err == nil {
				t.Errorf("%s / %s: no error from a faulty BMC", fc.name, v.name)
			}
			got, _ = settled(t, st, n.UUID, start)
			if err != nil && !strings.Contains(err.Error(), v.wantError) {
				t.Errorf("%s / %s: error %q, want %q", fc.name, v.name, err, v.wantError)
			}
		default:
			if err != nil {
				t.Fatalf("%s / %s: %v", fc.name, v.name, err)
			}
			got, took = settled(t, st, n.UUID, start)
			if !failedAsWanted() {
				t.Errorf("%s / %s: state %q last_error %q, want %q with %q", fc.name, v.name, got.ProvisionState, deref(got.LastError), v.wantState, v.wantError)
			}
		}
		msg := deref(got.LastError)
		if (fc.ok || fc.either) && msg == "" && (err == nil || !v.sync) {
			msg = "(succeeded)"
		}
		if v.sync && err != nil {
			msg = err.Error()
		}
		if len(msg) > 140 && !testing.Verbose() {
			msg = msg[:140] + "…"
		}
		*table = append(*table, fmt.Sprintf("| %s | %s | %s | %.1fs | %s |", fc.name, v.name, got.ProvisionState, took.Seconds(), msg))
		fc.heal()
		// The node is not left stuck: the same verb now succeeds (a
		// failed provision state is left by its own verbs; the power
		// verbs prove the node is free).
		if err := c.SetPower(ctx, n.UUID, driver.PowerOn, 5*time.Second); err != nil {
			t.Fatalf("%s / %s: power on after healing: %v", fc.name, v.name, err)
		}
		if after, _ := settled(t, st, n.UUID, time.Now()); after.LastError != nil || deref(after.PowerState) != driver.PowerOn {
			t.Errorf("%s / %s: after healing: power %q last_error %q", fc.name, v.name, deref(after.PowerState), deref(after.LastError))
		}
	}
}

func TestBMCFaultsIPMI(t *testing.T) {
	verbs := commonVerbs()
	// One BMC per verb: a BMC that vanished mid-operation keeps the
	// session it was in (the close never reached it) until its 60s
	// inactivity timeout, and refuses a fifth (IPMI's minimum of 4
	// sessions), as real BMCs do; a fresh BMC per verb keeps the cases
	// apart.
	r := newSyncRig(t, ipmisim.Config{N: len(verbs)}, func(c *Config) { c.PowerTimeout = 2 * time.Second })
	var b *ipmisim.BMC
	// fresh closes the sessions the driver keeps for power reads, so that
	// the next operation sets one up and the packet counts below hold.
	fresh := func() { r.ipmi.CloseSessions(context.Background()) }
	faults := []faultCase{
		{name: "dead (drops every packet)", apply: func() { b.SetDead(true) }, heal: func() { b.SetDead(false) }},
		// Every answer later than the driver's whole exchange (two
		// sends of 200ms).
		{name: "answers slower than the request timeout", apply: func() { b.SetSlow(time.Second) }, heal: func() { b.SetSlow(0) }},
		// 30% of the packets lost: the driver's re-sends ride some of
		// it out; whatever fails, fails cleanly and in time.
		{name: "drops 30% of packets", apply: func() { b.SetDropRate(0.3) }, heal: func() { b.SetDropRate(0) }, either: true},
		// The session is set up (5 exchanges), then the BMC vanishes.
		{name: "disappears after the session is set up", apply: func() { fresh(); b.DieAfter(5) }, heal: func() { b.SetDead(false) }},
		// A power change: the state read and the chassis control are
		// answered, then the BMC vanishes while the driver waits for
		// the new state.
		{name: "disappears after the power command", apply: func() { fresh(); b.DieAfter(7) }, heal: func() { b.SetDead(false) },
			only: func(v verb) bool { return strings.HasPrefix(v.name, "power ") }},
	}
	var table []string
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			i := 0
			runVerbs(t, fc, verbs, func(t *testing.T, v verb) *storage.Node {
				b = r.fleet.BMCs[i]
				i++
				di := map[string]any{
					"ipmi_address": b.Host(), "ipmi_port": b.Port(), "ipmi_cipher_suite": 17,
					"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword,
				}
				return enrollAt(t, r.c, r.store, &storage.Node{Driver: "ipmi", DriverInfo: di}, v.state, v.mutate)
			}, r.c, r.store, &table)
		})
	}
	t.Logf("fault × verb (ipmisim):\n%s", strings.Join(table, "\n"))
}

// syncThroughFault runs power sync passes over node uuid (recorded power
// on, the BMC on) while fc holds: three failed reads leave it alone, the
// fourth puts it in maintenance with fault "power failure" and power state
// None, as Ironic's power_state_sync_max_retries (3) does; recovery leaves
// it there while the BMC is faulty and takes it out, with the power state
// read, once the BMC answers. Every pass is bounded by PowerSyncTimeout.
func syncThroughFault(t *testing.T, c *Conductor, st *storage.SQLite, uuid string, fc faultCase) {
	t.Helper()
	ctx := context.Background()
	get := func() *storage.Node {
		n, err := st.GetNode(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	fc.apply()
	for pass := 1; pass <= 4; pass++ {
		start := time.Now()
		if err := c.syncPowerStates(ctx); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > verbBound {
			t.Fatalf("%s: pass %d took %v", fc.name, pass, took)
		}
		n := get()
		if n.Reservation != nil {
			t.Fatalf("%s: pass %d left reservation %q", fc.name, pass, *n.Reservation)
		}
		if pass <= 3 {
			if n.Maintenance || deref(n.PowerState) != driver.PowerOn {
				t.Fatalf("%s: pass %d: maintenance=%v power=%q, want untouched", fc.name, pass, n.Maintenance, deref(n.PowerState))
			}
			continue
		}
		if !n.Maintenance || deref(n.Fault) != "power failure" || n.PowerState != nil ||
			!strings.Contains(deref(n.LastError), "max retries exceeded") {
			t.Fatalf("%s: after 4 failed reads: maintenance=%v fault=%q power=%v last_error=%q", fc.name, n.Maintenance, deref(n.Fault), n.PowerState, deref(n.LastError))
		}
		t.Logf("%s: pass 4 (%v): %s", fc.name, time.Since(start).Round(time.Millisecond), deref(n.LastError))
	}
	if err := c.recoverPowerFailures(ctx); err != nil {
		t.Fatal(err)
	}
	if !get().Maintenance {
		t.Fatalf("%s: recovered while the BMC is faulty", fc.name)
	}
	fc.heal()
	if err := c.recoverPowerFailures(ctx); err != nil {
		t.Fatal(err)
	}
	n := get()
	if n.Maintenance || n.Fault != nil || n.MaintenanceReason != nil || deref(n.PowerState) != driver.PowerOn {
		t.Fatalf("%s: after recovery: maintenance=%v fault=%v reason=%v power=%q", fc.name, n.Maintenance, deref(n.Fault), deref(n.MaintenanceReason), deref(n.PowerState))
	}
	if got := c.psync.failures(uuid); got != 0 {
		t.Fatalf("%s: failure count %d after recovery", fc.name, got)
	}
}

func TestPowerSyncFaultsIPMI(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 2}, func(c *Config) { c.PowerSyncTimeout = time.Second })
	cases := []struct {
		name        string
		apply, heal func(b *ipmisim.BMC)
	}{
		// The BMC of a kept session vanishes between two passes.
		{name: "dead (drops every packet)", apply: func(b *ipmisim.BMC) { b.SetDead(true) }, heal: func(b *ipmisim.BMC) { b.SetDead(false) }},
		{name: "answers slower than the request timeout", apply: func(b *ipmisim.BMC) { b.SetSlow(time.Second) }, heal: func(b *ipmisim.BMC) { b.SetSlow(0) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := r.fleet.BMCs[i]
			b.SetPower(true)
			n := r.node(t, b, driver.PowerOn)
			// A healthy pass first: the session is kept, as in a fleet.
			if err := r.c.syncPowerStates(context.Background()); err != nil {
				t.Fatal(err)
			}
			syncThroughFault(t, r.c, r.store, n.UUID, faultCase{name: tc.name,
				apply: func() { tc.apply(b) }, heal: func() { tc.heal(b) }})
		})
	}
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
