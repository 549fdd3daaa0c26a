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

// idracHarness: a conductor with the idrac and redfish types, an iDRAC
// emulator whose resets last resetTime, and a generic Redfish emulator
// (no Dell services).
func idracHarness(t *testing.T, resetTime time.Duration) (h *harness, idrac *redfishsim.Server, idracDI, genericDI map[string]any) {
	t.Helper()
	start := func(fl redfishsim.Flavour) (*redfishsim.Server, map[string]any) {
		sim, err := redfishsim.New(redfishsim.Config{Flavour: fl, BMCResetTime: resetTime})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(sim)
		sim.SetBaseURL(hs.URL)
		t.Cleanup(func() { hs.Close(); _ = sim.Close(context.Background()) })
		return sim, map[string]any{"redfish_address": hs.URL, "redfish_username": sim.User(), "redfish_password": sim.Password()}
	}
	idrac, idracDI = start(redfishsim.IDRAC)
	_, genericDI = start(redfishsim.Generic)
	d := newTestDriver(t, Config{})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	c, st := enginetest.Start(t, engine.Config{Hostname: "idrac-test", StepPollInterval: 20 * time.Millisecond, StepTimeout: 2 * time.Second},
		engine.NewIDRACHardware(d, Properties()), engine.NewRedfishHardware(d, Properties()))
	return &harness{t: t, c: c, st: st}, idrac, idracDI, genericDI
}

func (h *harness) manageableAs(drv string, di map[string]any) *storage.Node {
	h.t.Helper()
	n := &storage.Node{Driver: drv, DriverInfo: di}
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

func mgmtStep(name string) map[string]any {
	return map[string]any{"interface": "management", "step": name}
}

// TestIDRACManagementSteps: Ironic's idrac-redfish clean steps, without
// the ramdisk. clear_job_queue empties a queue whose stuck BIOS job made
// the next settings write fail (SYS011), after which the write works;
// reset_idrac resets the iDRAC (gone for a while, sessions forgotten) and
// ends once it serves the system again; known_good_state does both. A
// redfish node has none of them; an idrac node whose BMC has no Dell
// services fails the clean with the missing service named.
func TestIDRACManagementSteps(t *testing.T) {
	const resetTime = 600 * time.Millisecond
	h, sim, di, generic := idracHarness(t, resetTime)
	n := h.manageableAs("idrac", di)
	if n.ManagementInterface != "idrac-redfish" {
		t.Fatalf("management interface %v", n.ManagementInterface)
	}

	// A BIOS job left scheduled (the reboot that would run it failed).
	remove := sim.InjectFault(redfishsim.Fault{Method: "POST", Path: "ComputerSystem.Reset", Status: 500})
	got := h.cleanOOB(n.UUID, applyStep(setting("NumLock", "Off")))
	remove()
	if got.ProvisionState != "clean failed" {
		t.Fatalf("setup: %s %q", got.ProvisionState, deref(got.LastError))
	}
	h.recover(n.UUID)
	if jobs := sim.Jobs(); len(jobs) != 1 || jobs[0].State != "Scheduled" {
		t.Fatalf("iDRAC jobs before clearing: %+v", jobs)
	}
	got = h.cleanOOB(n.UUID, mgmtStep("clear_job_queue"))
	if got.ProvisionState != "manageable" {
		t.Fatalf("clear_job_queue: %s %q", got.ProvisionState, deref(got.LastError))
	}
	if jobs := sim.Jobs(); len(jobs) != 0 {
		t.Fatalf("iDRAC jobs after clear_job_queue: %+v", jobs)
	}
	if _, pending := sim.BIOS(); len(pending) != 0 {
		t.Fatalf("pending settings survived the cleared queue: %v", pending)
	}
	got = h.cleanOOB(n.UUID, applyStep(setting("MemTest", "Enabled")))
	if cur, _ := sim.BIOS(); got.ProvisionState != "manageable" || cur["MemTest"] != "Enabled" {
		t.Fatalf("BIOS write after clearing the queue: %s %q, MemTest %v", got.ProvisionState, deref(got.LastError), cur["MemTest"])
	}

	// reset_idrac: the BMC goes away and comes back.
	t0 := time.Now()
	got = h.cleanOOB(n.UUID, mgmtStep("reset_idrac"))
	took := time.Since(t0)
	if got.ProvisionState != "manageable" || sim.Stats().BMCResets != 1 {
		t.Fatalf("reset_idrac: %s %q, resets %d", got.ProvisionState, deref(got.LastError), sim.Stats().BMCResets)
	}
	if took < resetTime {
		t.Errorf("reset_idrac ended after %s, before the iDRAC was back (%s)", took, resetTime)
	}

	// known_good_state: reset, then the queue cleared.
	remove = sim.InjectFault(redfishsim.Fault{Method: "POST", Path: "ComputerSystem.Reset", Status: 500})
	got = h.cleanOOB(n.UUID, applyStep(setting("NumLock", "Off")))
	remove()
	if got.ProvisionState != "clean failed" || len(sim.Jobs()) != 2 {
		t.Fatalf("setup 2: %s %q, jobs %+v", got.ProvisionState, deref(got.LastError), sim.Jobs())
	}
	h.recover(n.UUID)
	got = h.cleanOOB(n.UUID, mgmtStep("known_good_state"))
	if got.ProvisionState != "manageable" || sim.Stats().BMCResets != 2 || len(sim.Jobs()) != 0 {
		t.Fatalf("known_good_state: %s %q, resets %d, jobs %+v", got.ProvisionState, deref(got.LastError), sim.Stats().BMCResets, sim.Jobs())
	}

	// Not a redfish management step.
	rn := h.manageableAs("redfish", di)
	got = h.cleanOOB(rn.UUID, mgmtStep("clear_job_queue"))
	if got.ProvisionState != "clean failed" || !strings.Contains(deref(got.LastError), "clear_job_queue") {
		t.Fatalf("clear_job_queue on a redfish node: %s %q", got.ProvisionState, deref(got.LastError))
	}
	t.Logf("redfish node: %s", deref(got.LastError))

	// An idrac node whose BMC has no Dell services.
	gn := h.manageableAs("idrac", generic)
	got = h.cleanOOB(gn.UUID, mgmtStep("reset_idrac"))
	if got.ProvisionState != "clean failed" || !strings.Contains(deref(got.LastError), "Oem/Dell/DelliDRACCardService is missing") || got.Reservation != nil {
		t.Fatalf("reset_idrac without Dell services: %s %q", got.ProvisionState, deref(got.LastError))
	}
	t.Logf("no Dell services: %s", deref(got.LastError))
}
