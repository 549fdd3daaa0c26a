package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// TestDriversListDeployInterfaces: every hardware type lists the deploy
// interfaces ramdisk and custom-agent (Ironic's generic hardware supports
// both; Metal3's ironic-image enables both), direct staying the default.
func TestDriversListDeployInterfaces(t *testing.T) {
	d := fake.New()
	rf := redfish.New(redfish.Config{Logger: enginetest.Quiet()})
	t.Cleanup(func() { _ = rf.Close(t.Context()) })
	ip := ipmi.New(ipmi.Config{})
	h := serveAPI(t, engine.Config{Hostname: "test-conductor"}, []*engine.HardwareType{
		engine.NewFakeHardware(d), engine.NewManualManagement(d), engine.NewIPMIHardware(ip, ip, ipmi.Properties()),
		engine.NewRedfishHardware(rf, redfish.Properties())})
	for _, name := range []string{"fake-hardware", "manual-management", "ipmi", "redfish"} {
		drv := h.expect(http.StatusOK, "GET", "/v1/drivers/"+name, latest, nil).json(t)
		var enabled []string
		for _, v := range drv["enabled_deploy_interfaces"].([]any) {
			enabled = append(enabled, v.(string))
		}
		if !slices.Contains(enabled, "ramdisk") || !slices.Contains(enabled, "custom-agent") {
			t.Errorf("%s deploy interfaces %v", name, enabled)
		}
		if def := drv["default_deploy_interface"]; name != "fake-hardware" && def != "direct" {
			t.Errorf("%s default deploy interface %v", name, def)
		}
	}
}

// TestMetal3LiveISO replays what BMO sends to provision a live ISO
// (setLiveIsoUpdateOptsForNode: instance_info.boot_iso, image fields
// removed, deploy_interface ramdisk, driver_info.force_persistent_boot_device
// Default; then PUT active without a config drive): the node goes
// straight to active with no agent, booting the ISO by iPXE persistently;
// a ramdisk deploy missing its ISO is refused with Ironic's message.
func TestMetal3LiveISO(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:27:01"
	id := agentNode(h, mac)
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "replace", "path": "/boot_interface", "value": "ipxe"},
		map[string]any{"op": "replace", "path": "/deploy_interface", "value": "ramdisk"},
		map[string]any{"op": "add", "path": "/driver_info/force_persistent_boot_device", "value": "Default"},
		map[string]any{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{}},
	})
	h.db(id, func(n *storage.Node) { n.AutomatedClean = boolPtr(false) })
	h.moveTo(id, "provide", "available")
	r := h.provision(id, "active", nil)
	wantFault(t, r, http.StatusBadRequest, "Failed to validate deploy or power info for node "+id+": Cannot validate image information for node "+id+
		" because one or more parameters are missing from its instance_info and insufficient information is present to boot from a remote volume. Missing are: ['kernel', 'ramdisk']")
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "add", "path": "/instance_info/boot_iso", "value": "http://10.0.0.9/live.iso"},
	})
	if v := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/validate", latest, nil).json(t)["deploy"].(map[string]any); v["result"] != true {
		t.Fatalf("validate deploy %v", v)
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active"})
	n := h.waitState(id, "active")
	if n["power_state"] != "power on" || n["last_error"] != nil || n["deploy_interface"] != "ramdisk" {
		t.Fatalf("live ISO node: power %v last_error %v deploy %v", n["power_state"], n["last_error"], n["deploy_interface"])
	}
	bd := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/management/boot_device", latest, nil).json(t)
	if bd["boot_device"] != "pxe" || bd["persistent"] != true {
		t.Errorf("boot device %v, want pxe persistent", bd)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/lookup?addresses="+mac, "1.84", nil) // no agent in an active node

	// A service through the agent ends with the instance booted again
	// (Ironic's tear_down_service: prepare_instance), not the disk.
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "service",
		"service_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata"}}})
	h.waitState(id, "service wait")
	a := &agent{h: h}
	a.lookup(mac)
	in := a.beat(nil)
	if in.Command != protocol.CmdRunStep {
		t.Fatalf("service instruction %+v", in)
	}
	a.beat(&protocol.StepReport{ID: in.Step.ID, Status: protocol.StepSucceeded})
	n = h.waitState(id, "active")
	bd = h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/management/boot_device", latest, nil).json(t)
	if n["power_state"] != "power on" || bd["boot_device"] != "pxe" || bd["persistent"] != true {
		t.Errorf("after a service: power %v boot device %v, want the instance booted again (pxe persistent)", n["power_state"], bd)
	}
	var events []string
	for _, e := range h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/history", latest, nil).json(t)["history"].([]any) {
		events = append(events, e.(map[string]any)["event"].(string))
	}
	if !slices.Contains(events, "done: deploying -> active") || slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "wait call-back") }) {
		t.Errorf("history %v: want deploying -> active with no wait for an agent", events)
	}
	h.moveTo(id, "deleted", "available")
}

// TestMetal3CustomDeploy replays BMO's custom deploy
// (setCustomDeployUpdateOptsForNode with no image: deploy_interface
// custom-agent, image fields cleared; PUT active with deploy_steps
// [{deploy, <method>, {}, 80}]): the agent boots, runs only that step (no
// write_image), and the node goes active booting its disk.
func TestMetal3CustomDeploy(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:27:02"
	id := agentNode(h, mac)
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "replace", "path": "/deploy_interface", "value": "custom-agent"},
	})
	h.db(id, func(n *storage.Node) { n.AutomatedClean = boolPtr(false) })
	h.moveTo(id, "provide", "available")
	steps := []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "args": map[string]any{}, "priority": 80}}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active", "deploy_steps": steps})
	h.waitState(id, "wait call-back")
	a := &agent{h: h}
	a.lookup(mac)
	in := a.beat(nil)
	if in.Command != protocol.CmdRunStep || in.Step.Name != protocol.StepEraseDevicesMetadata || in.Step.Interface != "deploy" {
		t.Fatalf("custom deploy instruction %+v", in)
	}
	if ds := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)["deploy_step"].(map[string]any); ds["step"] != "erase_devices_metadata" || ds["priority"] != float64(80) {
		t.Fatalf("deploy_step %v", ds)
	}
	if in := a.beat(&protocol.StepReport{ID: in.Step.ID, Status: protocol.StepSucceeded, Result: map[string]any{"erased": []any{"/dev/vda"}}}); in.Command != protocol.CmdPowerOff {
		t.Fatalf("after the custom step: %+v (no write_image may follow)", in)
	}
	n := h.waitState(id, "active")
	if n["power_state"] != "power on" || n["last_error"] != nil {
		t.Fatalf("custom deploy: power %v last_error %v", n["power_state"], n["last_error"])
	}
	if bd := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/management/boot_device", latest, nil).json(t); bd["boot_device"] != "disk" {
		t.Errorf("boot device %v", bd)
	}
	// An unknown custom step is Ironic's validation error, at the verb.
	h.moveTo(id, "deleted", "available")
	r := h.provision(id, "active", map[string]any{"deploy_steps": []any{map[string]any{"interface": "deploy", "step": "install_coreos", "args": map[string]any{}, "priority": 80}}})
	if r.status != http.StatusBadRequest || !strings.Contains(r.faultstring(t), "node does not support this deploy step") {
		t.Fatalf("unknown custom step: %d %s", r.status, r.body)
	}
}
