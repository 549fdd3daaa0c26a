//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver/redfish/redfishlab"
)

// Virtual media without DHCP, against a Redfish BMC we did not write:
// OpenStack's sushy-tools with its libvirt backend (the shared redfish lab,
// engine/driver/redfish/redfishlab) drives a qemu TCG domain with a CD
// drive. castiron runs in the lab's namespace WITHOUT --pxe-interface, so
// no DHCP, TFTP or PXE server exists anywhere: the node's ramdisk boots
// from the ISO castiron builds and configures its network from the node's
// network_data carried in it.

// vmediaPort is castiron's API port inside the lab's namespace (the lab's
// lock makes the namespace ours).
const vmediaPort = 6391

// vmediaNodeIP is the static address network_data gives the VM.
const vmediaNodeIP = "10.252.7.50"

// vmediaNodeIP6 is the static IPv6 address network_data gives the VM on
// VLAN 42.
const vmediaNodeIP6 = "fd52:7:42::50"

type vmediaRig struct {
	lab     *redfishlab.Lab
	c       *Castiron
	im      *DeployImages
	node    *Node
	system  string // the emulator's system path
	console string // the VM's serial console (libvirt file)
	tail    *consoleTail
}

func newVMediaRig(t *testing.T) *vmediaRig {
	t.Helper()
	redfishlab.RequireSushy(t) // before the images: without sushy-tools the test skips
	rd := ramdiskDir(t)
	for _, f := range []string{"isolinux.bin", "ldlinux.c32", "grubx64-cd.efi"} {
		if _, err := os.Stat(filepath.Join(rd, f)); err != nil {
			unavailable(t, "no ISO loader %s in %s (make ramdisk copies it; Debian packages isolinux syslinux-common grub-efi-amd64-signed)", f, rd)
		}
	}
	im := BuildDeployImages(t)
	bin := castironBinary(t)
	lab := redfishlab.Start(t)
	r := &vmediaRig{lab: lab, im: im, system: lab.SystemPath(t), console: filepath.Join(lab.Run, "console.log")}
	r.tail = startConsoleTail(t, r.console)

	dataDir := t.TempDir()
	url := fmt.Sprintf("http://%s:%d", lab.IP, vmediaPort)
	logPath := filepath.Join(dataDir, "castiron.log")
	args := []string{"netns", "exec", lab.NS, bin, "serve",
		"--listen", fmt.Sprintf("%s:%d", lab.IP, vmediaPort),
		"--data-dir", dataDir, "--insecure-noauth",
		"--public-url", url, // no --pxe-interface: no DHCP/TFTP/PXE at all
		"--ramdisk-dir", rd,
		"--callback-timeout", "300s",
	}
	d, err := startDaemon("castiron", exec.Command("ip", args...), logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the lab's: runs before down.sh empties the namespace.
	t.Cleanup(func() {
		if err := d.stop(10 * time.Second); err != nil {
			t.Errorf("castiron: %v", err)
		}
		if t.Failed() {
			t.Logf("---- castiron log ----\n%s", tailFile(logPath, 80))
			t.Logf("---- VM console ----\n%s", tailFile(r.console, 60))
		}
	})
	r.c = &Castiron{URL: url, LogPath: logPath, DataDir: dataDir, d: d,
		Client: &Client{Base: url, HTTP: &http.Client{Timeout: 30 * time.Second,
			Transport: &http.Transport{Proxy: nil, DialContext: nsDialer("/var/run/netns/" + lab.NS)}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for r.c.Do(ctx, "GET", "/v1", nil, nil) != nil {
		if !d.running() || ctx.Err() != nil {
			t.Fatalf("castiron did not start: %s", tailFile(logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// networkData is the VM's static configuration (OpenStack network_data).
func (r *vmediaRig) networkData() map[string]any {
	return map[string]any{
		"links": []any{
			map[string]any{"id": "port0", "type": "phy", "ethernet_mac_address": r.lab.VMMAC, "mtu": 1500},
			map[string]any{"id": "vlan42", "type": "vlan", "vlan_link": "port0", "vlan_id": 42},
		},
		"networks": []any{
			map[string]any{"id": "net0", "type": "ipv4", "link": "port0",
				"ip_address": vmediaNodeIP, "netmask": "255.255.255.0",
				"routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": r.lab.IP}}},
			// A static IPv6 address on a VLAN (nothing answers there; the
			// agent must configure it all the same).
			map[string]any{"id": "net1", "type": "ipv6", "link": "vlan42", "ip_address": vmediaNodeIP6, "netmask": "ffff:ffff:ffff:ffff::"},
		},
		"services": []any{map[string]any{"type": "dns", "address": r.lab.IP}},
	}
}

// setImage points instance_info at the raw test image.
func (r *vmediaRig) setImage(ctx context.Context, t *testing.T) {
	t.Helper()
	img := r.im.Raw
	if _, err := r.c.PatchNode(ctx, r.node.UUID,
		PatchOp{Op: "add", Path: "/instance_info/image_source", Value: img.Name},
		PatchOp{Op: "add", Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		PatchOp{Op: "add", Path: "/instance_info/image_os_hash_value", Value: img.SHA256},
		PatchOp{Op: "add", Path: "/instance_info/image_disk_format", Value: img.Format},
	); err != nil {
		t.Fatalf("set instance_info: %v", err)
	}
}

// media reads the emulator's CD slot: inserted and the image URL.
func (r *vmediaRig) media(t *testing.T) (bool, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.lab.URL+r.system+"/VirtualMedia/Cd", nil)
	req.SetBasicAuth(r.lab.User, r.lab.Pass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	defer res.Body.Close()
	var vm struct {
		Inserted bool   `json:"Inserted"`
		Image    string `json:"Image"`
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || json.Unmarshal(b, &vm) != nil {
		t.Fatalf("emulator VirtualMedia/Cd: %d %s", res.StatusCode, b)
	}
	return vm.Inserted, vm.Image
}

func (r *vmediaRig) requireEjected(t *testing.T, when string) {
	t.Helper()
	if inserted, image := r.media(t); inserted || image != "" {
		t.Errorf("%s: the CD still holds %q (inserted %v), want it ejected", when, image, inserted)
	}
}

// waitOff waits for libvirt to report the domain shut off.
func (r *vmediaRig) waitOff(t *testing.T, when string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for r.lab.Virsh(t, "domstate", r.lab.VM) != "shut off" {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the VM is still %q after %s", when, r.lab.Virsh(t, "domstate", r.lab.VM), d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// move asks for verb and waits for the node to reach want, failing the
// test otherwise; it returns how long that took.
func (r *vmediaRig) move(ctx context.Context, t *testing.T, verb, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, verb); err != nil {
		t.Fatalf("%s: %v", verb, err)
	}
	if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, want, timeout); err != nil {
		t.Fatalf("%s (waiting for %s): %v", verb, want, err)
	}
	return time.Since(start)
}

// enroll creates the node (redfish, boot by virtual media, the VM's
// network_data) with the given inspect interface.
func (r *vmediaRig) enroll(ctx context.Context, t *testing.T, name, inspect string) *Node {
	t.Helper()
	n, err := r.c.CreateNode(ctx, map[string]any{
		"name":   name,
		"driver": "redfish",
		"driver_info": map[string]any{
			"redfish_address": fmt.Sprintf("http://127.0.0.1:%d", r.lab.Port), "redfish_system_id": r.system,
			"redfish_username": r.lab.User, "redfish_password": r.lab.Pass,
		},
		"boot_interface":    "redfish-virtual-media",
		"inspect_interface": inspect,
		"network_data":      r.networkData(),
	})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	r.node = n
	return n
}

// inspectByAgent inspects the manageable node through the agent booted
// from the ISO and checks the agent's static network, the boot mode it
// reports, the VM off and the CD ejected after.
func (r *vmediaRig) inspectByAgent(ctx context.Context, t *testing.T, label, bootMode string) {
	t.Helper()
	offset := r.consoleSize()
	start := time.Now()
	took := r.move(ctx, t, "inspect", "manageable", 300*time.Second)
	for _, mark := range []string{"static network from network_data", "addr=" + vmediaNodeIP6 + "/64"} {
		if _, err := r.waitConsoleFrom(ctx, offset, time.Second, mark); err != nil {
			t.Errorf("the agent did not configure its network from network_data: %v", err)
		}
	}
	t.Log(TimingLine(label, start, start.Add(took), r.phases(ctx, offset, start, start.Add(took))))
	r.logBoot(t, offset, start)
	inv, _, err := r.c.Inventory(ctx, r.node.UUID)
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	found := false
	for _, i := range inv.Interfaces {
		if strings.EqualFold(i.MACAddress, r.lab.VMMAC) && i.IPV4Address != nil && *i.IPV4Address == vmediaNodeIP {
			found = true
		}
	}
	if !found {
		t.Errorf("inventory interfaces %+v: none with %s and the static address %s", inv.Interfaces, r.lab.VMMAC, vmediaNodeIP)
	}
	if inv.Boot.CurrentBootMode != bootMode {
		t.Errorf("the agent booted in %q mode, want %q", inv.Boot.CurrentBootMode, bootMode)
	}
	r.waitOff(t, "after inspection", 60*time.Second)
	r.requireEjected(t, "after inspection")
}

// abortIn starts verb, waits for the wait state, aborts and checks the node
// fails at once with the VM off and the CD ejected; recover brings the
// node back where the next step expects it.
func (r *vmediaRig) abortIn(ctx context.Context, t *testing.T, verb, wait, failed string) {
	t.Helper()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, verb); err != nil {
		t.Fatalf("%s: %v", verb, err)
	}
	if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, wait, 120*time.Second); err != nil {
		t.Fatalf("%s: %v", verb, err)
	}
	if inserted, image := r.media(t); !inserted || !strings.Contains(image, "/boot/vmedia/"+r.node.UUID+"-") {
		t.Errorf("in %s: CD inserted %v image %q, want the node's ISO", wait, inserted, image)
	}
	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "abort"); err != nil {
		t.Fatalf("abort in %s: %v", wait, err)
	}
	n, err := r.c.WaitProvisionState(ctx, r.node.UUID, failed, 30*time.Second)
	if err != nil {
		t.Fatalf("abort in %s: %v", wait, err)
	}
	failedAt := time.Since(start)
	r.waitOff(t, "after the abort in "+wait, 60*time.Second)
	offAt := time.Since(start)
	deadline := time.Now().Add(30 * time.Second)
	for inserted, _ := r.media(t); inserted && time.Now().Before(deadline); inserted, _ = r.media(t) {
		time.Sleep(500 * time.Millisecond) // the abort task ejects after the power off
	}
	r.requireEjected(t, "after the abort in "+wait)
	// The abort's task holds the node (as in Ironic: a client's next verb
	// meanwhile gets 409 NodeLocked) until its power off and eject end.
	r.waitReleased(ctx, t, "after the abort in "+wait, 60*time.Second)
	t.Logf("abort in %s: %s, last_error %q", wait, failed, n.LastErr())
	t.Logf("E2E-TIMING vmedia_abort_%s failed=%.2fs vm_off=%.2fs released=%.2fs", strings.ReplaceAll(wait, " ", "_"),
		failedAt.Seconds(), offAt.Seconds(), time.Since(start).Seconds())
}

// waitReleased waits for the node's reservation to clear.
func (r *vmediaRig) waitReleased(ctx context.Context, t *testing.T, when string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var n struct {
			Reservation *string `json:"reservation"`
		}
		err := r.c.Do(ctx, "GET", "/v1/nodes/"+r.node.UUID, nil, &n)
		if err == nil && n.Reservation == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the node is still reserved (%v) after %s", when, err, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
