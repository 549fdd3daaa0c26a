package metal3

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/ramdisk/protocol"
)

// TestBMOLiveISOAndCustomDeploy: for every BMC address type, BMO's live
// ISO (pkg/provisioner/ironic setLiveIsoUpdateOptsForNode: boot_iso, image
// fields removed, deploy_interface ramdisk, force_persistent_boot_device;
// PUT active without a config drive) reaches active with no agent and the
// BMC booting the ISO persistently (virtual CD, UEFI HTTP, or the network:
// castiron's iPXE script then hands the ISO), and deprovisions (the CD
// ejected, cleaning by the agent); then BMO's custom deploy
// (setCustomDeployUpdateOptsForNode without an image: deploy_interface
// custom-agent; PUT active with its method as a deploy step at priority
// 80) runs that one step on the agent, no write_image, and reaches active.
func TestBMOLiveISOAndCustomDeploy(t *testing.T) {
	c := startCastiron(t)
	const iso = "http://127.0.0.1:7452/images/live.iso"
	for i, h := range hosts(t) {
		t.Run(h.bmcType, func(t *testing.T) {
			c := &castiron{t: t, url: c.url}
			name := fmt.Sprintf("metal3~live-%d", i)
			uuid := c.register(h, name)
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "provide"})
			c.waitState(uuid, "clean wait")
			c.agent(h, uuid)
			c.waitState(uuid, "available")

			c.must(http.StatusOK, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
				{"op": "add", "path": "/instance_uuid", "value": fmt.Sprintf("6d657461-6c33-4000-8000-%012d", 100+i)},
				{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{}},
				{"op": "add", "path": "/instance_info/boot_iso", "value": iso},
				{"op": "replace", "path": "/deploy_interface", "value": "ramdisk"},
				{"op": "add", "path": "/driver_info/force_persistent_boot_device", "value": "Default"},
			})
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"})
			n := c.waitState(uuid, "active")
			if n["last_error"] != nil || n["power_state"] != "power on" {
				t.Fatalf("live ISO: last_error %v power %v", n["last_error"], n["power_state"])
			}
			if h.rf != nil {
				s := h.rf.Snapshot()
				want := map[string]string{"ipxe": "Pxe", "redfish-https": "UefiHttp"}[h.boot]
				if want == "" {
					want = "Cd"
				}
				if s.BootEnabled != "Continuous" || s.BootTarget != want || s.LastBoot.Target != want {
					t.Fatalf("live ISO boot: override %s %s, last boot %+v; want %s continuously", s.BootEnabled, s.BootTarget, s.LastBoot, want)
				}
				switch want {
				case "UefiHttp":
					if s.HTTPBootURI != iso {
						t.Fatalf("HttpBootUri %q, want %s", s.HTTPBootURI, iso)
					}
				case "Cd":
					if !slices.ContainsFunc(s.Media, func(m redfishsim.Media) bool { return m.Inserted && m.Image == iso }) {
						t.Fatalf("virtual media %+v, want %s inserted", s.Media, iso)
					}
				}
			}
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "deleted"})
			c.waitState(uuid, "clean wait")
			c.agent(h, uuid)
			c.waitState(uuid, "available")
			if h.rf != nil {
				for _, m := range h.rf.Snapshot().Media {
					if m.Image == iso {
						t.Fatalf("the live ISO is still in %s after deprovisioning", m.ID)
					}
				}
			}

			c.must(http.StatusOK, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
				{"op": "add", "path": "/instance_uuid", "value": fmt.Sprintf("6d657461-6c33-4000-8000-%012d", 200+i)},
				{"op": "replace", "path": "/deploy_interface", "value": "custom-agent"},
			})
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active", "deploy_steps": []any{
				map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "args": map[string]any{}, "priority": 80},
			}})
			c.waitState(uuid, "wait call-back")
			if steps := c.agent(h, uuid); !slices.Equal(steps, []string{protocol.StepEraseDevicesMetadata}) {
				t.Fatalf("custom deploy ran %v, want only the custom step", steps)
			}
			n = c.waitState(uuid, "active")
			if n["last_error"] != nil {
				t.Fatalf("custom deploy: last_error %v", n["last_error"])
			}
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "deleted"})
			c.waitState(uuid, "clean wait")
			c.agent(h, uuid)
			c.waitState(uuid, "available")
		})
	}
}
