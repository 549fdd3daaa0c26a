package httpapi

import (
	"net/http"
	"testing"

	"castiron/ramdisk/protocol"
)

// disable_ramdisk (1.70 with clean, a runbook's flag) on a node whose
// steps need castiron's agent: the ramdisk is not booted (the boot device
// stays as the operator left it, the node stays off), an agent step fails
// the clean as Ironic does, the conductor's power steps run out of band
// and the node returns to manageable. Without the flag the same clean
// boots the ramdisk (boot device pxe, power on, clean wait).
func TestCleanDisableRamdisk(t *testing.T) {
	h := newAgentAPI(t)
	id := agentNode(h, "52:54:00:aa:0d:01")
	bootDev := func() any {
		return h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/management/boot_device", latest, nil).json(t)["boot_device"]
	}
	power := func() any {
		return h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)["power_state"]
	}
	h.expect(http.StatusNoContent, "PUT", "/v1/nodes/"+id+"/management/boot_device", latest, map[string]any{"boot_device": "disk", "persistent": true})
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/power", latest, map[string]any{"target": "power off"})
	h.waitPower(id, "power off")

	erase := []any{map[string]any{"interface": "deploy", "step": protocol.StepEraseDevicesMetadata, "args": map[string]any{}}}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", "1.70",
		map[string]any{"target": "clean", "clean_steps": erase, "disable_ramdisk": true})
	n := h.waitState(id, "clean failed")
	want := "Cannot clean node " + id + ": clean step {'interface': 'deploy', 'step': 'erase_devices_metadata', 'args': {}} requires booting a ramdisk"
	if n["last_error"] != want {
		t.Fatalf("last_error %q, want %q", n["last_error"], want)
	}
	if d, p := bootDev(), power(); d != "disk" || p != "power off" {
		t.Fatalf("after a ramdiskless clean: boot device %v, power %v; want disk, power off", d, p)
	}
	h.moveTo(id, "manage", "manageable")

	// A runbook with disable_ramdisk: its power steps run out of band.
	h.expect(http.StatusCreated, "POST", "/v1/runbooks", v92, map[string]any{"name": "CUSTOM_OOB", "disable_ramdisk": true, "steps": []any{
		map[string]any{"interface": "power", "step": "power_on", "args": map[string]any{}, "order": 0},
		map[string]any{"interface": "power", "step": "power_off", "args": map[string]any{}, "order": 1}}})
	h.expect(http.StatusNoContent, "PUT", "/v1/nodes/"+id+"/traits/CUSTOM_OOB", latest, nil)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", v92, map[string]any{"target": "clean", "runbook": "CUSTOM_OOB"})
	n = h.waitState(id, "manageable")
	if n["last_error"] != nil {
		t.Fatalf("last_error %v", n["last_error"])
	}
	if dii := n["driver_internal_info"].(map[string]any); dii["cleaning_disable_ramdisk"] != true || dii["agent_steps"] != nil {
		t.Fatalf("driver_internal_info %v", dii)
	}
	if d, p := bootDev(), power(); d != "disk" || p != "power off" {
		t.Fatalf("after the runbook: boot device %v, power %v; want disk, power off", d, p)
	}

	// Without the flag nothing changes: the ramdisk boots.
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", "1.70",
		map[string]any{"target": "clean", "clean_steps": erase, "disable_ramdisk": false})
	h.waitState(id, "clean wait")
	if d, p := bootDev(), power(); d != "pxe" || p != "power on" {
		t.Fatalf("clean with the ramdisk: boot device %v, power %v; want pxe, power on", d, p)
	}
}
