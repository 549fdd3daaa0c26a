package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/ramdisk/protocol"
)

// hwconfigAPI is the API over a conductor with the redfish type, its node
// on castiron's Redfish emulator (state-only), managed, with a port for
// the agent's lookup.
func hwconfigAPI(t *testing.T, mac string) (*apiHarness, *redfishsim.Server, string) {
	t.Helper()
	sim, err := redfishsim.New(redfishsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	bmc := httptest.NewServer(sim)
	sim.SetBaseURL(bmc.URL)
	t.Cleanup(func() { bmc.Close(); _ = sim.Close(context.Background()) })
	rf := redfish.New(redfish.Config{Logger: enginetest.Quiet(), PollInterval: 5 * time.Millisecond})
	t.Cleanup(func() { _ = rf.Close(context.Background()) })
	h := serveAPI(t, engine.Config{Hostname: "test-conductor", AgentPowerOffWait: 50 * time.Millisecond, StepPollInterval: 20 * time.Millisecond},
		[]*engine.HardwareType{engine.NewRedfishHardware(rf, redfish.Properties())})
	n := h.expect(http.StatusCreated, "POST", "/v1/nodes", latest, map[string]any{"driver": "redfish", "driver_info": map[string]any{
		"redfish_address": bmc.URL, "redfish_username": sim.User(), "redfish_password": sim.Password()}}).json(t)
	id := n["uuid"].(string)
	if n["bios_interface"] != "redfish" {
		t.Fatalf("bios_interface %v", n["bios_interface"])
	}
	h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": id, "address": mac})
	h.moveTo(id, "manage", "manageable")
	return h, sim, id
}

// TestBIOSSettingsAPI: the settings verification cached, in Ironic's
// shapes per version.
func TestBIOSSettingsAPI(t *testing.T) {
	h, _, id := hwconfigAPI(t, "52:54:00:b1:05:01")
	l := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios", "1.40", nil).json(t)["bios"].([]any)
	if len(l) != 10 {
		t.Fatalf("%d settings: %v", len(l), l)
	}
	first := l[0].(map[string]any)
	if first["name"] != "AdminPhone" || first["value"] != "" || first["created_at"] == nil || len(first) != 5 {
		t.Fatalf("1.40 setting %v", first)
	}
	if links := first["links"].([]any); !strings.HasSuffix(links[0].(map[string]any)["href"].(string), "/v1/nodes/"+id+"/bios/AdminPhone") {
		t.Fatalf("links %v", links)
	}
	d := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios?detail=True", latest, nil).json(t)["bios"].([]any)
	var cores map[string]any
	for _, s := range d {
		if m := s.(map[string]any); m["name"] == "ProcCoreDisable" {
			cores = m
		}
	}
	if cores["attribute_type"] != "Integer" || cores["lower_bound"] != float64(0) || cores["upper_bound"] != float64(31) ||
		cores["value"] != "0" || cores["read_only"] != false || cores["reset_required"] != true || cores["allowable_values"] != nil || len(cores) != 14 {
		t.Fatalf("detail %v", cores)
	}
	f := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios?fields=name,read_only", latest, nil).json(t)["bios"].([]any)[0].(map[string]any)
	if _, ok := f["value"]; ok || f["read_only"] != false || len(f) != 5 {
		t.Fatalf("fields %v", f)
	}
	h.expect(http.StatusBadRequest, "GET", "/v1/nodes/"+id+"/bios?fields=nope", latest, nil)
	one := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios/ProcTurboMode", latest, nil).json(t)["ProcTurboMode"].(map[string]any)
	if one["value"] != "Enabled" || len(one["allowable_values"].([]any)) != 2 {
		t.Fatalf("show %v", one)
	}
	old := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios/ProcTurboMode", "1.73", nil).json(t)["ProcTurboMode"].(map[string]any)
	if _, ok := old["allowable_values"]; ok {
		t.Fatalf("1.73 show has registry fields: %v", old)
	}
	drv := h.expect(http.StatusOK, "GET", "/v1/drivers/redfish", latest, nil).json(t)
	if drv["default_bios_interface"] != "redfish" || len(drv["enabled_bios_interfaces"].([]any)) != 2 {
		t.Fatalf("driver bios interfaces %v %v", drv["default_bios_interface"], drv["enabled_bios_interfaces"])
	}
}

// TestCleanInterleavesAgentAndBIOSSteps: a manual clean with an agent
// step and a bios step runs both by the one plan: the agent's step at a
// heartbeat, the conductor's step at the next (node back to cleaning),
// the reboot it asks for (the agent looks up again), its check, then the
// end of the clean.
func TestCleanInterleavesAgentAndBIOSSteps(t *testing.T) {
	const mac = "52:54:00:b1:05:02"
	h, sim, id := hwconfigAPI(t, mac)
	steps := []any{
		map[string]any{"interface": "deploy", "step": "erase_devices_metadata"},
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{
			map[string]any{"name": "ProcVirtualization", "value": "Disabled"}}}},
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean", "clean_steps": steps})
	h.waitState(id, "clean wait")
	a := &agent{h: h}
	a.lookup(mac)
	in := a.beat(nil)
	if in.Command != protocol.CmdRunStep || in.Step.Name != protocol.StepEraseDevicesMetadata {
		t.Fatalf("first instruction %+v", in)
	}
	in = a.beat(&protocol.StepReport{ID: in.Step.ID, Status: protocol.StepSucceeded})
	if in.Command != protocol.CmdWait {
		t.Fatalf("after the agent's step: %+v", in)
	}
	// The conductor stages the setting and reboots into the ramdisk.
	n := h.waitState(id, "clean wait")
	if cs := n["clean_step"].(map[string]any); cs["interface"] != "bios" || cs["step"] != "apply_configuration" || cs["abortable"] != false || cs["priority"] != float64(0) {
		t.Fatalf("clean_step %v", cs)
	}
	if _, pending := sim.BIOS(); len(pending) != 0 {
		t.Fatalf("the reboot did not apply the pending settings: %v", pending)
	}
	if cur, _ := sim.BIOS(); cur["ProcVirtualization"] != "Disabled" {
		t.Fatalf("current %v", cur)
	}
	// The rebooted agent looks up again; its heartbeat runs the check.
	a.lookup(mac)
	if in := a.beat(nil); in.Command != protocol.CmdWait {
		t.Fatalf("after reboot: %+v", in)
	}
	h.waitState(id, "clean wait")
	if in := a.beat(nil); in.Command != protocol.CmdPowerOff {
		t.Fatalf("end: %+v", in)
	}
	n = h.waitState(id, "manageable")
	if n["last_error"] != nil || len(n["clean_step"].(map[string]any)) != 0 {
		t.Fatalf("after clean: last_error %v clean_step %v", n["last_error"], n["clean_step"])
	}
	one := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios/ProcVirtualization", latest, nil).json(t)["ProcVirtualization"].(map[string]any)
	if one["value"] != "Disabled" || one["updated_at"] == nil {
		t.Fatalf("cached %v", one)
	}
	// A bios step with a value the registry does not allow: clean failed,
	// maintenance, no lock left.
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean", "clean_steps": []any{
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{
			map[string]any{"name": "ProcVirtualization", "value": "Maybe"}}}}}})
	h.waitState(id, "clean wait")
	a.lookup(mac)
	a.beat(nil)
	n = h.waitState(id, "clean failed")
	if n["last_error"] != "Redfish BIOS apply_configuration failed for node "+id+": invalid value for setting(s): ProcVirtualization" || n["maintenance"] != true {
		t.Fatalf("last_error %v maintenance %v", n["last_error"], n["maintenance"])
	}
}
