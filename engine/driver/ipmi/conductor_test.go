package ipmi

import (
	"context"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/engine/enginetest"
	"castiron/storage"
)

// simConductor is a started conductor with the fake-hardware and ipmi
// types over a temporary database, stopped when the test ends.
func simConductor(t *testing.T, cfg engine.Config) (*engine.Conductor, *storage.SQLite) {
	t.Helper()
	d := newTestDriver(t, Config{})
	cfg.Hostname = "ipmi-test"
	return enginetest.Start(t, cfg, engine.NewFakeHardware(fake.New()), engine.NewIPMIHardware(d, d, Properties()))
}

// TestConductorWithIPMISim drives the ipmi hardware type through the real
// conductor against ipmi_sim: credential validation on manage, power
// changes cross-checked with ipmitool, and the periodic power-state sync.
func TestConductorWithIPMISim(t *testing.T) {
	sim := ipmisim.StartSim(t)
	ctx := context.Background()
	c, st := simConductor(t, engine.Config{PowerSyncInterval: 100 * time.Millisecond})

	wait := func(uuid string, ok func(n *storage.Node) bool) *storage.Node {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, err := st.GetNode(ctx, uuid)
			if err != nil {
				t.Fatal(err)
			}
			if n.Reservation == nil && ok(n) {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s stuck: state %q power %v last_error %v", uuid, n.ProvisionState, n.PowerState, n.LastError)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	good := &storage.Node{Driver: "ipmi", DriverInfo: sim.DriverInfo()}
	if err := c.CreateNode(ctx, good, true); err != nil {
		t.Fatal(err)
	}
	badInfo := sim.DriverInfo()
	badInfo["ipmi_password"] = "wrong"
	bad := &storage.Node{Driver: "ipmi", DriverInfo: badInfo}
	if err := c.CreateNode(ctx, bad, true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{good.UUID, bad.UUID} {
		if err := c.Provision(ctx, id, engine.ProvisionRequest{Target: "manage"}); err != nil {
			t.Fatal(err)
		}
	}
	g := wait(good.UUID, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if g.ProvisionState != "manageable" || g.PowerState == nil {
		t.Fatalf("good credentials: state %q power %v last_error %v", g.ProvisionState, g.PowerState, g.LastError)
	}
	b := wait(bad.UUID, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if b.ProvisionState != "enroll" || b.LastError == nil || !strings.Contains(strings.ToLower(*b.LastError), "authentication") {
		t.Fatalf("bad credentials: state %q last_error %v", b.ProvisionState, b.LastError)
	}

	if err := c.SetPower(ctx, good.UUID, "power on", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	wait(good.UUID, func(n *storage.Node) bool {
		return n.PowerState != nil && *n.PowerState == "power on" && n.TargetPowerState == nil
	})
	if out := sim.Ipmitool(t, "chassis", "power", "status"); !strings.Contains(out, "on") {
		t.Fatalf("ipmitool says %q after power on", out)
	}
	// The BMC is switched off behind castiron's back: the sync notices.
	sim.Ipmitool(t, "chassis", "power", "off")
	wait(good.UUID, func(n *storage.Node) bool { return n.PowerState != nil && *n.PowerState == "power off" })

	if err := c.SetBootDevice(ctx, good.UUID, "pxe", false); err != nil {
		t.Fatal(err)
	}
	if out := sim.Ipmitool(t, "chassis", "bootparam", "get", "5"); !strings.Contains(strings.ToLower(out), "pxe") {
		t.Fatalf("boot device per ipmitool: %s", out)
	}
}
