package httpapi

import (
	"context"
	"encoding/json"
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
	sim, err := redfishsim.New(redfishsim.Config{BootMode: "UEFI"})
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

// secureBoot reads SecureBootEnable from the emulator.
func secureBoot(t *testing.T, sim *redfishsim.Server, base string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+sim.SystemPath()+"/SecureBoot", nil)
	req.SetBasicAuth(sim.User(), sim.Password())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sb struct{ SecureBootEnable bool }
	if err := json.NewDecoder(res.Body).Decode(&sb); err != nil {
		t.Fatal(err)
	}
	return sb.SecureBootEnable
}

// TestDeployStepsServiceStepsSecureBoot: a user deploy step (bios, priority
// 90) runs before the agent's write_image (80) with its reboot; the
// instance's secure_boot capability turns secure boot on before it boots
// and off at undeploy; a service step runs on the active node and returns
// it to active.
func TestDeployStepsServiceStepsSecureBoot(t *testing.T) {
	const mac = "52:54:00:b1:05:03"
	h, sim, id := hwconfigAPI(t, mac)
	base := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)["driver_info"].(map[string]any)["redfish_address"].(string)
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "add", "path": "/instance_info/image_source", "value": "http://10.0.0.1/focal.raw"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("ab", 32)},
		map[string]any{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{"secure_boot": "true"}},
		map[string]any{"op": "replace", "path": "/automated_clean", "value": false},
	})
	h.moveTo(id, "provide", "available")
	bad := h.do("PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active", "deploy_steps": []any{
		map[string]any{"interface": "raid", "step": "nope", "args": map[string]any{}, "priority": 90}}})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.faultstring(t), "node does not support this deploy step: {'interface': 'raid', 'step': 'nope'") {
		t.Fatalf("unknown deploy step: %d %s", bad.status, bad.body)
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active", "deploy_steps": []any{
		map[string]any{"interface": "bios", "step": "apply_configuration", "priority": 90, "args": map[string]any{"settings": []any{
			map[string]any{"name": "PowerProfile", "value": "PerfPerWatt"}}}}}})
	h.waitState(id, "wait call-back")
	a := &agent{h: h}
	a.lookup(mac)
	if in := a.beat(nil); in.Command != protocol.CmdWait {
		t.Fatalf("bios deploy step first: %+v", in)
	}
	n := h.waitState(id, "wait call-back")
	if ds := n["deploy_step"].(map[string]any); ds["interface"] != "bios" || ds["priority"] != float64(90) {
		t.Fatalf("deploy_step %v", ds)
	}
	a.lookup(mac) // back from the reboot
	var in protocol.Instruction
	for i := 0; i < 200; i++ {
		if in = a.beat(nil); in.Command == protocol.CmdRunStep {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if in.Command != protocol.CmdRunStep || in.Step.Name != protocol.StepWriteImage {
		t.Fatalf("write_image after the bios step: %+v", in)
	}
	if cur, _ := sim.BIOS(); cur["PowerProfile"] != "PerfPerWatt" {
		t.Fatalf("BIOS %v", cur)
	}
	if secureBoot(t, sim, base) {
		t.Fatal("secure boot on before the instance boots")
	}
	if in := a.beat(&protocol.StepReport{ID: in.Step.ID, Status: protocol.StepSucceeded}); in.Command != protocol.CmdPowerOff {
		t.Fatalf("after write: %+v", in)
	}
	h.waitState(id, "active")
	if !secureBoot(t, sim, base) {
		t.Fatal("secure boot not enabled for the instance")
	}

	// A service step on the active node.
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "service", "service_steps": []any{
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{
			map[string]any{"name": "EmbeddedSata", "value": "Ahci"}}}}}})
	h.waitState(id, "service wait")
	a.lookup(mac)
	a.beat(nil)
	n = h.waitState(id, "service wait")
	if ss := n["service_step"].(map[string]any); ss["step"] != "apply_configuration" {
		t.Fatalf("service_step %v", ss)
	}
	a.lookup(mac)
	for i := 0; i < 200; i++ {
		if in = a.beat(nil); in.Command == protocol.CmdPowerOff {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if in.Command != protocol.CmdPowerOff {
		t.Fatalf("end of service: %+v", in)
	}
	n = h.waitState(id, "active")
	if cur, _ := sim.BIOS(); cur["EmbeddedSata"] != "Ahci" || n["last_error"] != nil {
		t.Fatalf("after service: BIOS %v last_error %v", cur, n["last_error"])
	}

	h.moveTo(id, "deleted", "available")
	if secureBoot(t, sim, base) {
		t.Fatal("secure boot still on after undeploy")
	}
}

// TestAbortDuringBIOSStep: the bios step cannot be interrupted (Ironic's
// abortable False), so an abort while it waits for the agent after its
// reboot is kept until the step ends, then the clean stops.
func TestAbortDuringBIOSStep(t *testing.T) {
	const mac = "52:54:00:b1:05:04"
	h, sim, id := hwconfigAPI(t, mac)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean", "clean_steps": []any{
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{
			map[string]any{"name": "ProcHyperthreading", "value": "Disabled"}}}},
		map[string]any{"interface": "deploy", "step": "erase_devices_metadata"},
	}})
	h.waitState(id, "clean wait")
	a := &agent{h: h}
	a.lookup(mac)
	a.beat(nil)
	h.waitState(id, "clean wait") // rebooted into the ramdisk, the bios step unfinished
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "abort"})
	if n := h.waitState(id, "clean wait"); n["clean_step"].(map[string]any)["step"] != "apply_configuration" {
		t.Fatalf("abort did not wait for the step: %v", n["clean_step"])
	}
	a.lookup(mac)
	a.beat(nil)
	n := h.waitState(id, "clean failed")
	if n["last_error"] != `By request, the clean operation was aborted during or after the completion of step "bios.apply_configuration"` {
		t.Fatalf("last_error %v", n["last_error"])
	}
	if cur, _ := sim.BIOS(); cur["ProcHyperthreading"] != "Disabled" {
		t.Fatalf("the step did not finish: %v", cur)
	}
	if in := a.beat(nil); in.Command != protocol.CmdAbort && in.Command != protocol.CmdPowerOff {
		t.Fatalf("agent after the abort: %+v", in)
	}
}

// TestSecureBootKeySteps: Ironic's redfish management clean steps that
// reset the secure boot keys run in the conductor between heartbeats;
// they need the ramdisk (Ironic's default), so disable_ramdisk refuses
// them.
func TestSecureBootKeySteps(t *testing.T) {
	const mac = "52:54:00:b1:05:05"
	h, sim, id := hwconfigAPI(t, mac)
	base := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)["driver_info"].(map[string]any)["redfish_address"].(string)
	mode := func() string {
		req, _ := http.NewRequest(http.MethodGet, base+sim.SystemPath()+"/SecureBoot", nil)
		req.SetBasicAuth(sim.User(), sim.Password())
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var sb struct{ SecureBootMode string }
		_ = json.NewDecoder(res.Body).Decode(&sb)
		return sb.SecureBootMode
	}
	for _, c := range []struct{ step, want string }{{"clear_secure_boot_keys", "SetupMode"}, {"reset_secure_boot_keys_to_default", "DeployedMode"}} {
		h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean", "clean_steps": []any{
			map[string]any{"interface": "management", "step": c.step}}})
		h.waitState(id, "clean wait")
		a := &agent{h: h}
		a.lookup(mac)
		a.beat(nil)
		h.waitState(id, "clean wait")
		if in := a.beat(nil); in.Command != protocol.CmdPowerOff {
			t.Fatalf("%s: end %+v", c.step, in)
		}
		h.waitState(id, "manageable")
		if got := mode(); got != c.want {
			t.Fatalf("%s: SecureBootMode %s, want %s", c.step, got, c.want)
		}
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean", "disable_ramdisk": true,
		"clean_steps": []any{map[string]any{"interface": "management", "step": "clear_secure_boot_keys"}}})
	h.failedWith(id, "clean failed", "Cannot clean node "+id+": clean step {'interface': 'management', 'step': 'clear_secure_boot_keys'} requires booting a ramdisk")
}

// TestDeployTemplateSteps: a deploy template named by the instance's
// traits adds its steps to the deployment (Ironic's deploy templates); the
// same step twice (request and template) fails the deploy with Ironic's
// message.
func TestDeployTemplateSteps(t *testing.T) {
	const mac = "52:54:00:b1:05:06"
	h, sim, id := hwconfigAPI(t, mac)
	h.expect(http.StatusCreated, "POST", "/v1/deploy_templates", latest, map[string]any{"name": "CUSTOM_PERF", "steps": []any{
		map[string]any{"interface": "bios", "step": "apply_configuration", "priority": 95, "args": map[string]any{"settings": []any{
			map[string]any{"name": "ProcTurboMode", "value": "Disabled"}}}}}})
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "add", "path": "/instance_info/image_source", "value": "http://10.0.0.1/focal.raw"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("ab", 32)},
		map[string]any{"op": "add", "path": "/instance_info/traits", "value": []any{"CUSTOM_PERF", "CUSTOM_NONE"}},
		map[string]any{"op": "replace", "path": "/automated_clean", "value": false},
	})
	h.moveTo(id, "provide", "available")
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active", "deploy_steps": []any{
		map[string]any{"interface": "bios", "step": "apply_configuration", "priority": 90, "args": map[string]any{"settings": []any{}}}}})
	h.failedWith(id, "deploy failed", "deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for bios.apply_configuration")
	h.moveTo(id, "deleted", "available")
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "add", "path": "/instance_info/image_source", "value": "http://10.0.0.1/focal.raw"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("ab", 32)},
		map[string]any{"op": "add", "path": "/instance_info/traits", "value": []any{"CUSTOM_PERF"}},
	})
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active"})
	h.waitState(id, "wait call-back")
	a := &agent{h: h}
	a.lookup(mac)
	if in := a.beat(nil); in.Command != protocol.CmdWait {
		t.Fatalf("template step first: %+v", in)
	}
	n := h.waitState(id, "wait call-back")
	if ds := n["deploy_step"].(map[string]any); ds["interface"] != "bios" || ds["priority"] != float64(95) {
		t.Fatalf("deploy_step %v", ds)
	}
	if cur, _ := sim.BIOS(); cur["ProcTurboMode"] != "Disabled" {
		t.Fatalf("BIOS %v", cur)
	}
}
