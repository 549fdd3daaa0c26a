package redfish

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/enginetest"
	"castiron/storage"
)

// biosHarness is a conductor with the redfish type (bios "redfish" and,
// for the iDRAC flavour, "idrac-redfish") over castiron's Redfish
// emulator in state-only mode.
func biosHarness(t *testing.T, flavour redfishsim.Flavour) (*harness, *redfishsim.Server, map[string]any) {
	t.Helper()
	sim, err := redfishsim.New(redfishsim.Config{Flavour: flavour})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sim)
	sim.SetBaseURL(hs.URL)
	t.Cleanup(func() { hs.Close(); _ = sim.Close(context.Background()) })
	d := newTestDriver(t, Config{})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	hw := engine.NewRedfishHardware(d, Properties())
	if flavour == redfishsim.IDRAC {
		engine.WithBIOS(hw, "idrac-redfish", d.BIOSInterface("idrac-redfish"))
	}
	c, st := enginetest.Start(t, engine.Config{Hostname: "bios-test", StepPollInterval: 20 * time.Millisecond, StepTimeout: 2 * time.Second}, hw)
	di := map[string]any{"redfish_address": hs.URL, "redfish_username": sim.User(), "redfish_password": sim.Password()}
	return &harness{t: t, c: c, st: st}, sim, di
}

// manageable enrolls a node with bios interface iface and manages it
// (verification caches its BIOS settings).
func (h *harness) manageable(di map[string]any, iface string) *storage.Node {
	h.t.Helper()
	n := &storage.Node{Driver: "redfish", DriverInfo: di, BIOSInterface: iface}
	if err := h.c.CreateNode(context.Background(), n, true); err != nil {
		h.t.Fatal(err)
	}
	h.provision(n.UUID, "manage")
	got := h.wait(n.UUID, 20*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if got.ProvisionState != "manageable" {
		h.t.Fatalf("manage: %s %v", got.ProvisionState, deref(got.LastError))
	}
	return got
}

// cleanOOB runs a manual clean without the ramdisk and waits for its end.
func (h *harness) cleanOOB(uuid string, steps ...map[string]any) *storage.Node {
	h.t.Helper()
	yes := true
	if err := h.c.Provision(context.Background(), uuid, engine.ProvisionRequest{Target: "clean", CleanSteps: steps, DisableRamdisk: &yes}); err != nil {
		h.t.Fatal(err)
	}
	return h.wait(uuid, 20*time.Second, func(n *storage.Node) bool {
		return n.ProvisionState == "manageable" || n.ProvisionState == "clean failed"
	})
}

func (h *harness) cached(uuid string) map[string]storage.BIOSSetting {
	h.t.Helper()
	l, err := h.st.ListBIOSSettings(context.Background(), uuid)
	if err != nil {
		h.t.Fatal(err)
	}
	m := map[string]storage.BIOSSetting{}
	for _, s := range l {
		m[s.Name] = s
	}
	return m
}

// recover leaves clean failed for manageable (maintenance off first).
func (h *harness) recover(uuid string) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.st.UpdateNode(ctx, uuid, func(n *storage.Node) (*storage.Event, error) {
		n.Maintenance, n.Fault, n.MaintenanceReason = false, nil, nil
		return nil, nil
	}); err != nil {
		h.t.Fatal(err)
	}
	h.provision(uuid, "manage")
	h.wait(uuid, 10*time.Second, func(n *storage.Node) bool { return n.ProvisionState == "manageable" })
}

func setting(name string, value any) map[string]any {
	return map[string]any{"name": name, "value": value}
}

func applyStep(settings ...map[string]any) map[string]any {
	l := make([]any, len(settings))
	for i, s := range settings {
		l[i] = s
	}
	return map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": l}}
}

func TestBIOSApplyConfigurationOutOfBand(t *testing.T) {
	h, sim, di := biosHarness(t, redfishsim.Generic)
	n := h.manageable(di, "")
	if n.BIOSInterface != "redfish" {
		t.Fatalf("bios_interface %q, want redfish (the type's default)", n.BIOSInterface)
	}
	// Verification cached the settings with their registry.
	c := h.cached(n.UUID)
	turbo, ro := c["ProcTurboMode"], c["SystemSerialNumber"]
	if deref(turbo.Value) != "Enabled" || deref(turbo.AttributeType) != "Enumeration" || strings.Join(turbo.AllowableValues, ",") != "Enabled,Disabled" ||
		turbo.ResetRequired == nil || !*turbo.ResetRequired || ro.ReadOnly == nil || !*ro.ReadOnly {
		t.Fatalf("cached ProcTurboMode %+v SystemSerialNumber %+v", turbo, ro)
	}
	if cores := c["ProcCoreDisable"]; cores.LowerBound == nil || *cores.LowerBound != 0 || *cores.UpperBound != 31 || deref(cores.Value) != "0" {
		t.Fatalf("cached ProcCoreDisable %+v", cores)
	}

	// Staged, applied by the reboot, verified, cached again.
	got := h.cleanOOB(n.UUID, applyStep(setting("ProcTurboMode", "Disabled"), setting("ProcCoreDisable", "4"), setting("SriovEnable", "true")))
	if got.ProvisionState != "manageable" {
		t.Fatalf("apply: %s %s", got.ProvisionState, deref(got.LastError))
	}
	cur, pending := sim.BIOS()
	if cur["ProcTurboMode"] != "Disabled" || cur["ProcCoreDisable"] != 4 || cur["SriovEnable"] != true || len(pending) != 0 {
		t.Fatalf("BMC current %v pending %v", cur, pending)
	}
	if c := h.cached(n.UUID); deref(c["ProcTurboMode"].Value) != "Disabled" || deref(c["ProcCoreDisable"].Value) != "4" || deref(c["SriovEnable"].Value) != "True" || c["ProcTurboMode"].UpdatedAt == nil {
		t.Fatalf("cache after apply: %+v", c["ProcTurboMode"])
	}
	if len(got.CleanStep) != 0 || got.DriverInternalInfo["step_state"] != nil || got.DriverInternalInfo["agent_steps"] != nil {
		t.Fatalf("step left behind: clean_step %v dii %v", got.CleanStep, got.DriverInternalInfo)
	}

	// Bad settings fail the clean with Ironic's last_error, nothing staged.
	for _, tc := range []struct {
		step map[string]any
		want string
	}{
		{applyStep(setting("SystemSerialNumber", "X")), "Redfish BIOS apply_configuration failed for node " + n.UUID + ": invalid value for setting(s): SystemSerialNumber"},
		{applyStep(setting("ProcTurboMode", "Sometimes"), setting("ProcCoreDisable", 99)), "Redfish BIOS apply_configuration failed for node " + n.UUID + ": invalid value for setting(s): "},
		{applyStep(setting("NoSuchSetting", "On")), "Redfish BIOS apply configuration failed for node " + n.UUID + ". Error: "},
	} {
		got := h.cleanOOB(n.UUID, tc.step)
		if got.ProvisionState != "clean failed" || !strings.Contains(deref(got.LastError), tc.want) || !got.Maintenance || deref(got.Fault) != "clean failure" || got.Reservation != nil {
			t.Fatalf("%v: %s %q maintenance %v fault %v", tc.step, got.ProvisionState, deref(got.LastError), got.Maintenance, got.Fault)
		}
		t.Logf("last_error: %s", deref(got.LastError))
		if _, pending := sim.BIOS(); len(pending) != 0 {
			t.Fatalf("%v staged %v", tc.step, pending)
		}
		h.recover(n.UUID)
	}
	if got := h.cleanOOB(n.UUID, applyStep(setting("NoSuchSetting", "On"))); !strings.Contains(deref(got.LastError), "NoSuchSetting") {
		t.Fatalf("unknown setting: BMC's refusal not in %q", deref(got.LastError))
	}
	h.recover(n.UUID)

	// Arguments against argsinfo (Ironic's messages), before anything runs.
	got = h.cleanOOB(n.UUID, map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"x": 1}})
	want := "Cannot clean node " + n.UUID + ": clean step {'interface': 'bios', 'step': 'apply_configuration', 'args': {'x': 1}} has these unexpected arguments: x; " +
		"clean step {'interface': 'bios', 'step': 'apply_configuration', 'args': {'x': 1}} is missing these required arguments: settings (A list of BIOS settings to be applied)"
	if got.ProvisionState != "clean failed" || deref(got.LastError) != want {
		t.Fatalf("argsinfo: %s\n got %q\nwant %q", got.ProvisionState, deref(got.LastError), want)
	}
	h.recover(n.UUID)

	// Factory reset: defaults back after the reboot.
	got = h.cleanOOB(n.UUID, map[string]any{"interface": "bios", "step": "factory_reset"})
	if got.ProvisionState != "manageable" {
		t.Fatalf("factory_reset: %s %s", got.ProvisionState, deref(got.LastError))
	}
	if cur, _ := sim.BIOS(); cur["ProcTurboMode"] != "Enabled" || cur["ProcCoreDisable"] != 0 {
		t.Fatalf("after factory reset %v", cur)
	}
	if c := h.cached(n.UUID); deref(c["ProcTurboMode"].Value) != "Enabled" {
		t.Fatalf("cache after factory reset %+v", c["ProcTurboMode"])
	}
}

// TestBIOSIDRACJob: idrac-redfish stages with an apply time, iDRAC makes
// the configuration job, the reboot runs it, the step waits for it.
func TestBIOSIDRACJob(t *testing.T) {
	h, sim, di := biosHarness(t, redfishsim.IDRAC)
	n := h.manageable(di, "idrac-redfish")
	got := h.cleanOOB(n.UUID, applyStep(setting("LogicalProc", "Disabled"), setting("AcPwrRcvryUserDelay", 120)))
	if got.ProvisionState != "manageable" {
		t.Fatalf("apply: %s %s", got.ProvisionState, deref(got.LastError))
	}
	if cur, pending := sim.BIOS(); cur["LogicalProc"] != "Disabled" || cur["AcPwrRcvryUserDelay"] != 120 || len(pending) != 0 {
		t.Fatalf("iDRAC current %v pending %v", cur, pending)
	}
	if jobs := sim.Jobs(); len(jobs) != 1 || jobs[0].JobType != "BIOSConfiguration" || jobs[0].State != "Completed" {
		t.Fatalf("iDRAC jobs %+v", jobs)
	}
	// The same values again: nothing to write, no job, no reboot.
	got = h.cleanOOB(n.UUID, applyStep(setting("LogicalProc", "Disabled")))
	if got.ProvisionState != "manageable" || len(sim.Jobs()) != 1 {
		t.Fatalf("re-apply: %s %s jobs %d", got.ProvisionState, deref(got.LastError), len(sim.Jobs()))
	}
}

// TestBIOSBadBMC: a BMC that fails the reboot or the job read fails the
// clean at once with last_error, maintenance, and no lock left.
func TestBIOSBadBMC(t *testing.T) {
	h, sim, di := biosHarness(t, redfishsim.IDRAC)
	n := h.manageable(di, "idrac-redfish")
	remove := sim.InjectFault(redfishsim.Fault{Method: "POST", Path: "ComputerSystem.Reset", Status: 500})
	got := h.cleanOOB(n.UUID, applyStep(setting("NumLock", "Off")))
	remove()
	if got.ProvisionState != "clean failed" || !strings.Contains(deref(got.LastError), "rebooting the node failed") || got.Reservation != nil || !got.Maintenance {
		t.Fatalf("reboot refused: %s %q", got.ProvisionState, deref(got.LastError))
	}
	t.Logf("last_error: %s", deref(got.LastError))
	h.recover(n.UUID)
	// The staged setting's job is still scheduled on the iDRAC: the next
	// write is refused by it (SYS011), which the step reports.
	got = h.cleanOOB(n.UUID, applyStep(setting("MemTest", "Enabled")))
	if got.ProvisionState != "clean failed" || !strings.Contains(deref(got.LastError), "SYS011") {
		t.Fatalf("second write with a job pending: %s %q", got.ProvisionState, deref(got.LastError))
	}
	t.Logf("last_error: %s", deref(got.LastError))
	h.recover(n.UUID)

	// A job the BMC cannot report is polled until the step's time is up,
	// then fails the step.
	h2, sim2, di2 := biosHarness(t, redfishsim.IDRAC)
	n2 := h2.manageable(di2, "idrac-redfish")
	defer sim2.InjectFault(redfishsim.Fault{Method: "GET", Path: "/Jobs/JID_", Status: 500})()
	got = h2.cleanOOB(n2.UUID, applyStep(setting("NumLock", "Off")))
	if got.ProvisionState != "clean failed" || !strings.Contains(deref(got.LastError), "Redfish read of job /redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_") || got.Reservation != nil {
		t.Fatalf("job read failing: %s %q", got.ProvisionState, deref(got.LastError))
	}
	t.Logf("last_error: %s", deref(got.LastError))
}
