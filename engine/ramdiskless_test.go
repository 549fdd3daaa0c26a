package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/storage"
)

// settled waits until no task holds the node, then returns it.
func (r *syncRig) settled(t *testing.T, uuid string) *storage.Node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := r.get(t, uuid)
		if n.Reservation == nil && !states[State(n.ProvisionState)].StuckFails {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still busy in %s", uuid, n.ProvisionState)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func yes() *bool { v := true; return &v }

// ramdiskless puts an ipmi node (behind BMC b, powered as on) into state st.
func (r *syncRig) nodeAt(t *testing.T, b *ipmisim.BMC, st State, on bool) *storage.Node {
	t.Helper()
	b.SetPower(on)
	power := driver.PowerOff
	if on {
		power = driver.PowerOn
	}
	n := r.node(t, b, power)
	n, err := r.store.UpdateNode(context.Background(), n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.ProvisionState = string(st)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// With disable_ramdisk a manual clean never boots the ramdisk: a step of
// the agent fails the clean as Ironic's _validate_user_step does, with no
// boot device set and no power action; the conductor's power steps run
// out of band and the node goes back to manageable.
func TestManualCleanDisableRamdisk(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 3})
	ctx := context.Background()

	b := r.fleet.BMCs[0]
	n := r.nodeAt(t, b, Manageable, false)
	before := b.Stats().Controls
	err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "clean", DisableRamdisk: yes(),
		CleanSteps: []map[string]any{{"interface": "deploy", "step": "erase_devices", "args": map[string]any{}}}})
	if err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	want := "Cannot clean node " + n.UUID + ": clean step {'interface': 'deploy', 'step': 'erase_devices', 'args': {}} requires booting a ramdisk"
	if n.ProvisionState != string(CleanFail) || n.LastError == nil || *n.LastError != want {
		t.Fatalf("state %s last_error %v, want clean failed %q", n.ProvisionState, deref(n.LastError), want)
	}
	if b.PoweredOn() || b.BootFlags() != nil || b.Stats().Controls != before {
		t.Fatalf("BMC touched: on=%v bootflags=%v controls %d->%d", b.PoweredOn(), b.BootFlags(), before, b.Stats().Controls)
	}
	if n.DriverInternalInfo[diiCleaningDisableRamdisk] != true {
		t.Fatalf("driver_internal_info %v lacks cleaning_disable_ramdisk", n.DriverInternalInfo)
	}

	// A step the node does not have: Ironic's "node does not support".
	b = r.fleet.BMCs[1]
	n = r.nodeAt(t, b, Manageable, false)
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "clean", DisableRamdisk: yes(),
		CleanSteps: []map[string]any{{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{}}}}}); err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	want = "Cannot clean node " + n.UUID + ": node does not support this clean step: {'interface': 'bios', 'step': 'apply_configuration', 'args': {'settings': []}}"
	if n.ProvisionState != string(CleanFail) || deref(n.LastError) != want {
		t.Fatalf("state %s last_error %q, want %q", n.ProvisionState, deref(n.LastError), want)
	}

	// Out-of-band steps run, in order, against the BMC; no boot device.
	b = r.fleet.BMCs[2]
	n = r.nodeAt(t, b, Manageable, false)
	before = b.Stats().Controls
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "clean", DisableRamdisk: yes(),
		CleanSteps: []map[string]any{{"interface": "power", "step": "power_on"}, {"interface": "power", "step": "power_off"}}}); err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	if n.ProvisionState != string(Manageable) || n.LastError != nil {
		t.Fatalf("state %s last_error %v, want manageable", n.ProvisionState, deref(n.LastError))
	}
	if b.PoweredOn() || b.BootFlags() != nil || b.Stats().Controls-before != 2 {
		t.Fatalf("BMC: on=%v bootflags=%v controls=%d, want off, no boot flags, 2 controls", b.PoweredOn(), b.BootFlags(), b.Stats().Controls-before)
	}
	if deref(n.PowerState) != driver.PowerOff || len(n.CleanStep) != 0 {
		t.Fatalf("power_state %q clean_step %v", deref(n.PowerState), n.CleanStep)
	}
}

// Without disable_ramdisk the same clean boots the ramdisk as before: boot
// device set, node powered on, clean wait.
func TestManualCleanWithRamdiskStillBoots(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 1})
	b := r.fleet.BMCs[0]
	n := r.nodeAt(t, b, Manageable, false)
	no := false
	if err := r.c.Provision(context.Background(), n.UUID, ProvisionRequest{Target: "clean", DisableRamdisk: &no,
		CleanSteps: []map[string]any{{"interface": "deploy", "step": "erase_devices"}}}); err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	if n.ProvisionState != string(CleanWait) || !b.PoweredOn() || b.BootFlags() == nil {
		t.Fatalf("state %s on=%v bootflags=%v last_error %q, want clean wait with a PXE boot", n.ProvisionState, b.PoweredOn(), b.BootFlags(), deref(n.LastError))
	}
}

// Service with disable_ramdisk: out-of-band steps run and the node goes
// back to active with no ramdisk boot; an agent step fails the service.
func TestServiceDisableRamdisk(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 2})
	ctx := context.Background()

	b := r.fleet.BMCs[0]
	n := r.nodeAt(t, b, Active, true)
	before := b.Stats().Controls
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "service", DisableRamdisk: yes(),
		ServiceSteps: []map[string]any{{"interface": "power", "step": "reboot"}}}); err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	if n.ProvisionState != string(Active) || n.LastError != nil || !b.PoweredOn() || b.BootFlags() != nil {
		t.Fatalf("state %s last_error %v on=%v bootflags=%v, want active, on, no boot flags", n.ProvisionState, deref(n.LastError), b.PoweredOn(), b.BootFlags())
	}
	if b.Stats().Controls == before {
		t.Fatal("the reboot step reached no chassis control")
	}
	if n.DriverInternalInfo[diiServiceDisableRamdisk] != true {
		t.Fatalf("driver_internal_info %v lacks service_disable_ramdisk", n.DriverInternalInfo)
	}

	b = r.fleet.BMCs[1]
	n = r.nodeAt(t, b, Active, true)
	before = b.Stats().Controls
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "service", DisableRamdisk: yes(),
		ServiceSteps: []map[string]any{{"interface": "deploy", "step": "erase_devices_metadata"}}}); err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	want := "Cannot service node " + n.UUID + ": service step {'interface': 'deploy', 'step': 'erase_devices_metadata'} requires booting a ramdisk"
	if n.ProvisionState != string(ServiceFail) || deref(n.LastError) != want {
		t.Fatalf("state %s last_error %q, want service failed %q", n.ProvisionState, deref(n.LastError), want)
	}
	if !b.PoweredOn() || b.BootFlags() != nil || b.Stats().Controls != before {
		t.Fatalf("BMC touched: on=%v bootflags=%v controls %d->%d", b.PoweredOn(), b.BootFlags(), before, b.Stats().Controls)
	}
}

// A power step that fails (the BMC does not answer) fails the clean and,
// as Ironic's cleaning_error_handler does for a failure inside a step,
// puts the node in maintenance with fault "clean failure".
func TestManualCleanDisableRamdiskStepFails(t *testing.T) {
	r := newSyncRig(t, ipmisim.Config{N: 1}, func(c *Config) { c.PowerTimeout = 300 * time.Millisecond })
	b := r.fleet.BMCs[0]
	n := r.nodeAt(t, b, Manageable, false)
	b.SetDead(true)
	if err := r.c.Provision(context.Background(), n.UUID, ProvisionRequest{Target: "clean", DisableRamdisk: yes(),
		CleanSteps: []map[string]any{{"interface": "power", "step": "power_on"}}}); err != nil {
		t.Fatal(err)
	}
	n = r.settled(t, n.UUID)
	prefix := "Node " + n.UUID + " failed step {'interface': 'power', 'step': 'power_on'}: "
	if n.ProvisionState != string(CleanFail) || !strings.HasPrefix(deref(n.LastError), prefix) {
		t.Fatalf("state %s last_error %q, want clean failed %q...", n.ProvisionState, deref(n.LastError), prefix)
	}
	if !n.Maintenance || deref(n.Fault) != "clean failure" || deref(n.MaintenanceReason) != deref(n.LastError) {
		t.Fatalf("maintenance %v fault %q reason %q", n.Maintenance, deref(n.Fault), deref(n.MaintenanceReason))
	}
}
