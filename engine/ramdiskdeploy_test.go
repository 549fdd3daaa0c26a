package engine

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/fault"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// TestRamdiskDeployValidation: the deploy verb refuses a ramdisk deploy as
// Ironic's RamdiskDeploy.validate does (400, the node left available):
// a boot interface without ramdisk_boot, image_source beside boot_iso,
// kernel/ramdisk missing, image_source alone (no Glance to read them
// from), deploy_steps; GET /validate says the same.
func TestRamdiskDeployValidation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		boot  string
		ii    map[string]any
		steps []map[string]any
		want  string
	}{
		{"fake boot interface", "fake", map[string]any{"boot_iso": "http://192.0.2.9/live.iso"},
			nil, "The boot interface must have the `ramdisk_boot` capability"},
		{"image_source and boot_iso", "ipxe", map[string]any{"boot_iso": "http://192.0.2.9/live.iso", "image_source": "http://192.0.2.9/x.raw"},
			nil, "An 'image_source' and 'boot_iso' parameter may not be specified at the same time."},
		{"nothing to boot", "ipxe", map[string]any{},
			nil, "Missing are: ['kernel', 'ramdisk']"},
		{"ramdisk missing", "pxe", map[string]any{"kernel": "http://192.0.2.9/vmlinuz"},
			nil, "Missing are: ['ramdisk']"},
		{"image_source alone", "ipxe", map[string]any{"image_source": "http://192.0.2.9/x.iso"},
			nil, "Image http://192.0.2.9/x.iso is missing the following properties: kernel, ramdisk"},
		{"bad boot_iso scheme", "ipxe", map[string]any{"boot_iso": "ftp://192.0.2.9/live.iso"},
			nil, `Invalid boot_iso "ftp://192.0.2.9/live.iso": scheme "ftp" is not supported`},
		{"deploy steps", "ipxe", map[string]any{"boot_iso": "http://192.0.2.9/live.iso"},
			[]map[string]any{{"interface": "deploy", "step": "erase_devices_metadata", "args": map[string]any{}, "priority": 80}},
			"deploy_steps with deploy interface ramdisk are not implemented"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := h.nodeIn(t, Available, func(n *storage.Node) {
				n.DeployInterface, n.BootInterface = DeployRamdisk, tc.boot
				n.InstanceInfo = storage.JSONObject(tc.ii)
			})
			err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "active", DeploySteps: tc.steps})
			if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("deploy: %v, want 400 with %q", err, tc.want)
			}
			if len(tc.steps) == 0 && !strings.HasPrefix(err.Error(), "Failed to validate deploy or power info for node "+n.UUID+": ") {
				t.Errorf("message %q lacks Ironic's prefix", err)
			}
			if got := h.waitIdle(t, n.UUID); State(got.ProvisionState) != Available {
				t.Fatalf("node in %s after a refused deploy", got.ProvisionState)
			}
			res, err := h.c.Validate(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.steps) == 0 && (res["deploy"].Result == nil || *res["deploy"].Result || !strings.Contains(deref(res["deploy"].Reason), tc.want)) {
				t.Errorf("validate deploy: %+v %q", res["deploy"], deref(res["deploy"].Reason))
			}
		})
	}
}

// TestRamdiskDeployNetworkBoot: a fake-hardware node with boot ipxe and a
// kernel + ramdisk goes deploying -> active with no agent; while deployed
// its MAC gets the instance (kernel, ramdisk, ramdisk_kernel_arguments, a
// castiron-hosted name resolved to its URL) from the boot gate, not the
// agent's ramdisk; an ISO instead is booted as one; undeploy makes the gate
// refuse it again (it then cleans through the agent, as Ironic).
func TestRamdiskDeployNetworkBoot(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ImageBaseURL = "http://192.0.2.1:6385/images" })
	ctx := context.Background()
	mac, _ := net.ParseMAC("52:54:00:b0:01:01")
	n := h.nodeIn(t, Available, func(n *storage.Node) {
		n.DeployInterface, n.BootInterface = DeployRamdisk, "ipxe"
		n.InstanceInfo = storage.JSONObject{"kernel": "http://192.0.2.9/live/vmlinuz", "ramdisk": "live-initrd.img",
			"ramdisk_kernel_arguments": "console=ttyS0 live.marker=1"}
	})
	if err := h.c.CreatePort(ctx, &storage.Port{NodeUUID: n.UUID, Address: mac.String()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.c.BootTarget(ctx, mac); ok {
		t.Fatal("an available node is network-booted")
	}
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "active"}); err != nil {
		t.Fatal(err)
	}
	got := h.waitState(t, n.UUID, Active)
	if deref(got.PowerState) != driver.PowerOn || got.LastError != nil {
		t.Fatalf("active node: power %v last_error %v", deref(got.PowerState), deref(got.LastError))
	}
	if _, ok := got.DriverInternalInfo[diiSteps]; ok {
		t.Fatalf("a ramdisk deploy planned agent steps: %v", got.DriverInternalInfo[diiSteps])
	}
	d, ok := h.c.BootTarget(ctx, mac)
	if !ok || d.Purpose != "instance" || d.Instance == nil {
		t.Fatalf("active ramdisk node's boot: %+v %v", d, ok)
	}
	want := InstanceBoot{Kernel: "http://192.0.2.9/live/vmlinuz", Ramdisk: "http://192.0.2.1:6385/images/live-initrd.img",
		Args: []string{"root=/dev/ram0", "text", "console=ttyS0", "live.marker=1"}}
	if d.Instance.Kernel != want.Kernel || d.Instance.Ramdisk != want.Ramdisk || strings.Join(d.Instance.Args, " ") != strings.Join(want.Args, " ") || d.Instance.ISO != "" {
		t.Fatalf("instance boot %+v, want %+v", *d.Instance, want)
	}

	// Rebuild with an ISO instead: the gate hands the ISO.
	if _, err := h.c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.InstanceInfo = storage.JSONObject{"boot_iso": "http://192.0.2.9/live.iso"}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "rebuild"}); err != nil {
		t.Fatal(err)
	}
	h.waitState(t, n.UUID, Active)
	if d, ok := h.c.BootTarget(ctx, mac); !ok || d.Instance == nil || d.Instance.ISO != "http://192.0.2.9/live.iso" {
		t.Fatalf("after rebuild with boot_iso: %+v %v", d, ok)
	}

	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "deleted"}); err != nil {
		t.Fatal(err)
	}
	got = h.waitState(t, n.UUID, CleanWait) // cleaning boots the agent
	if d, ok := h.c.BootTarget(ctx, mac); !ok || d.Purpose != "clean" || d.Instance != nil {
		t.Fatalf("cleaning after a ramdisk deploy: %+v %v, want the agent", d, ok)
	}
	if len(got.InstanceInfo) != 0 {
		t.Fatalf("instance_info after undeploy: %v", got.InstanceInfo)
	}
}

// TestCustomAgentDeployPlan: custom-agent needs no image_source, plans no
// write_image, and runs the user's deploy steps (the agent's
// erase_devices_metadata, offered as a deploy step as IPA does); direct
// still refuses a deploy without image_source.
func TestCustomAgentDeployPlan(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	n := h.nodeIn(t, Available, func(n *storage.Node) {
		n.DeployInterface, n.BootInterface = DeployCustomAgent, "ipxe"
		n.InstanceInfo = storage.JSONObject{}
	})
	steps := []map[string]any{{"interface": "deploy", "step": protocol.StepEraseDevicesMetadata, "args": map[string]any{}, "priority": 80}}
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "active", DeploySteps: steps}); err != nil {
		t.Fatal(err)
	}
	got := h.waitState(t, n.UUID, DeployWait)
	plan, _ := stepsOf(got)
	if len(plan) != 1 || plan[0]["step"] != protocol.StepEraseDevicesMetadata || intOf(plan[0]["priority"]) != 80 {
		t.Fatalf("custom-agent plan %v, want only the user's step", plan)
	}

	direct := h.nodeIn(t, Available, func(n *storage.Node) {
		n.DeployInterface, n.BootInterface = "direct", "ipxe"
		n.InstanceInfo = storage.JSONObject{}
	})
	if err := h.c.Provision(ctx, direct.UUID, ProvisionRequest{Target: "active"}); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "['image_source']") {
		t.Fatalf("direct without image_source: %v", err)
	}
}

// TestRamdiskDeployVirtualMedia drives castiron's Redfish emulator: the
// deploy inserts boot_iso in the virtual CD, sets the boot override to the
// CD continuously and powers on (active); undeploy powers off and ejects.
func TestRamdiskDeployVirtualMedia(t *testing.T) {
	r := newRedfishRig(t, redfishsim.Config{})
	ctx := context.Background()
	const iso = "http://192.0.2.9/live.iso"
	n := r.node(t, Available, func(n *storage.Node) {
		n.DeployInterface, n.BootInterface = DeployRamdisk, BootVirtualMedia
		n.InstanceInfo = storage.JSONObject{"boot_iso": iso}
	})
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "active"}); err != nil {
		t.Fatal(err)
	}
	got, _ := settled(t, r.st, n.UUID, time.Now())
	if State(got.ProvisionState) != Active || got.LastError != nil {
		t.Fatalf("deploy: %s, last_error %v", got.ProvisionState, deref(got.LastError))
	}
	media, err := r.c.VirtualMedia(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if !cdHolds(media, iso) {
		t.Fatalf("virtual media after the deploy: %+v, want the CD holding %s", media, iso)
	}
	var sys struct {
		PowerState string
		Boot       struct{ BootSourceOverrideEnabled, BootSourceOverrideTarget string }
	}
	r.get(t, r.bmc.SystemPath(), &sys)
	if sys.PowerState != "On" || sys.Boot.BootSourceOverrideEnabled != "Continuous" || sys.Boot.BootSourceOverrideTarget != "Cd" {
		t.Fatalf("BMC after the deploy: %+v, want On, Continuous boot from Cd", sys)
	}

	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "deleted"}); err != nil {
		t.Fatal(err)
	}
	got, _ = settled(t, r.st, n.UUID, time.Now())
	if State(got.ProvisionState) != Available {
		t.Fatalf("undeploy: %s, last_error %v", got.ProvisionState, deref(got.LastError))
	}
	media, err = r.c.VirtualMedia(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range media {
		if m.Inserted {
			t.Fatalf("virtual media after undeploy: %+v, want all ejected", media)
		}
	}
	if r.bmc.PowerState() != "Off" {
		t.Fatalf("BMC power after undeploy: %s", r.bmc.PowerState())
	}
}

func cdHolds(media []VMediaDevice, image string) bool {
	for _, m := range media {
		for _, t := range m.MediaTypes {
			if (t == "CD" || t == "DVD") && m.Inserted && m.Image == image {
				return true
			}
		}
	}
	return false
}

// get reads a Redfish resource from the rig's emulator.
func (r *rfRig) get(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.url+path, nil)
	req.SetBasicAuth(r.bmc.User(), r.bmc.Password())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
	}
}

// TestRamdiskDeployUEFIHTTP: with boot redfish-https the deploy points the
// emulator's UEFI HTTP boot at boot_iso, continuously, and powers on;
// undeploy points the boot back at the disk.
func TestRamdiskDeployUEFIHTTP(t *testing.T) {
	r := newRedfishRig(t, redfishsim.Config{BootMode: "UEFI"})
	ctx := context.Background()
	const iso = "http://192.0.2.9/live.iso"
	n := r.node(t, Available, func(n *storage.Node) {
		n.DeployInterface, n.BootInterface = DeployRamdisk, BootRedfishHTTPS
		n.InstanceInfo = storage.JSONObject{"boot_iso": iso}
	})
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "active"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := settled(t, r.st, n.UUID, time.Now()); State(got.ProvisionState) != Active || got.LastError != nil {
		t.Fatalf("deploy: %s, last_error %v", got.ProvisionState, deref(got.LastError))
	}
	var sys struct {
		PowerState string
		Boot       struct{ BootSourceOverrideEnabled, BootSourceOverrideTarget, HttpBootUri string }
	}
	r.get(t, r.bmc.SystemPath(), &sys)
	if sys.PowerState != "On" || sys.Boot.BootSourceOverrideEnabled != "Continuous" || sys.Boot.BootSourceOverrideTarget != "UefiHttp" || sys.Boot.HttpBootUri != iso {
		t.Fatalf("BMC after the deploy: %+v, want On, Continuous UEFI HTTP boot of %s", sys, iso)
	}
	if err := r.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "deleted"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := settled(t, r.st, n.UUID, time.Now()); State(got.ProvisionState) != Available {
		t.Fatalf("undeploy: %s, last_error %v", got.ProvisionState, deref(got.LastError))
	}
	r.get(t, r.bmc.SystemPath(), &sys)
	if sys.Boot.BootSourceOverrideTarget != "Hdd" {
		t.Fatalf("BMC boot after undeploy: %+v, want the disk", sys.Boot)
	}
}

// TestRamdiskDeployUnrescue: unrescuing a ramdisk-deployed node boots its
// instance again (Ironic's unrescue calls the boot interface's
// prepare_instance): active, powered on, the instance at its next boot.
func TestRamdiskDeployUnrescue(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	mac, _ := net.ParseMAC("52:54:00:b0:01:02")
	n := h.nodeIn(t, Rescue, func(n *storage.Node) {
		n.DeployInterface, n.BootInterface, n.RescueInterface = DeployRamdisk, "ipxe", "agent"
		n.InstanceInfo = storage.JSONObject{"boot_iso": "http://192.0.2.9/live.iso", "rescue_password": "x"}
		n.PowerState = strp(driver.PowerOff)
	})
	if err := h.c.CreatePort(ctx, &storage.Port{NodeUUID: n.UUID, Address: mac.String()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.c.BootTarget(ctx, mac); ok {
		t.Fatal("a rescued node gets a network boot")
	}
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "unrescue"}); err != nil {
		t.Fatal(err)
	}
	got := h.waitState(t, n.UUID, Active)
	if deref(got.PowerState) != driver.PowerOn {
		t.Fatalf("after unrescue: power %v", deref(got.PowerState))
	}
	if _, ok := got.InstanceInfo["rescue_password"]; ok {
		t.Fatal("rescue_password kept")
	}
	if d, ok := h.c.BootTarget(ctx, mac); !ok || d.Instance == nil || d.Instance.ISO != "http://192.0.2.9/live.iso" {
		t.Fatalf("after unrescue: %+v %v", d, ok)
	}
}
