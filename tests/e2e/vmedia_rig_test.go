//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver/redfish/redfishlab"
)

// Virtual media without DHCP, against a Redfish BMC driving a qemu TCG VM
// with a CD drive, in two variants of one rig:
//   - castiron's own emulator (engine/driver/bmcsim/redfishsim, cmd/redfishsim)
//     in qemu mode, in a namespace of the test's own: what CI runs;
//   - OpenStack's sushy-tools with its libvirt backend (the shared redfish
//     lab, engine/driver/redfish/redfishlab), when SUSHY_TOOLS_DIR names a
//     local sushy-tools 2.2.0 tree (it skips otherwise, also in CI).
// castiron runs in the BMC's namespace WITHOUT --pxe-interface, so no DHCP,
// TFTP or PXE server exists anywhere: the node's ramdisk boots from the ISO
// castiron builds and configures its network from the node's network_data
// carried in it.

// vmediaPort is castiron's API port inside the rig's namespace (its own, or
// the lab's, which its lock makes ours).
const vmediaPort = 6391

// vmediaNodeIP is the static address network_data gives the VM.
const vmediaNodeIP = "10.252.7.50"

// vmediaNodeIP6 is the static IPv6 address network_data gives the VM on
// VLAN 42.
const vmediaNodeIP6 = "fd52:7:42::50"

// The emulator rig's network (inside its own namespace): the same
// addresses as the redfish lab's, so network_data is the same.
const (
	simBridge = "rfbr0"
	simIP     = "10.252.7.1"
	simTap    = "rftap0"
	simPort   = 8000
	simVMMAC  = "52:54:00:7f:00:01"
)

// vmediaBMC is what the rig needs of its Redfish BMC and VM.
type vmediaBMC struct {
	kind    string // "redfishsim" or "sushy-tools"
	ns      string // the namespace castiron runs in
	ip      string // the bridge address castiron listens on
	port    int    // the BMC's port on the namespace's loopback
	user    string
	pass    string
	vmMAC   string
	disk    string // the VM's disk (qcow2 or raw)
	http    *http.Client
	url     string // the BMC as http reaches it
	offFunc func(t *testing.T) (bool, string)
}

type vmediaRig struct {
	bmc     vmediaBMC
	c       *Castiron
	im      *DeployImages
	node    *Node
	system  string // the emulator's system path
	cdPath  string // the CD slot's Redfish path
	console string // the VM's serial console (truncated at every start)
	tail    *consoleTail
	// boot is the node's boot interface ["": redfish-virtual-media].
	boot string
}

// vmediaPrereqs checks the ISO loaders and builds the deploy images.
func vmediaPrereqs(t *testing.T) (string, *DeployImages) {
	t.Helper()
	rd := ramdiskDir(t)
	for _, f := range []string{"isolinux.bin", "ldlinux.c32", "grubx64-cd.efi"} {
		if _, err := os.Stat(filepath.Join(rd, f)); err != nil {
			unavailable(t, "no ISO loader %s in %s (make ramdisk copies it; Debian packages isolinux syslinux-common grub-efi-amd64-signed)", f, rd)
		}
	}
	return rd, BuildDeployImages(t)
}

// newSushyVMediaRig is the rig on the shared sushy-tools lab (bootMode
// "bios" or "uefi": the lab's RF_BOOT).
func newSushyVMediaRig(t *testing.T, bootMode string) *vmediaRig {
	t.Helper()
	redfishlab.RequireSushy(t) // before the images: without sushy-tools the test skips
	t.Setenv("RF_BOOT", bootMode)
	rd, im := vmediaPrereqs(t)
	bin := castironBinary(t)
	lab := redfishlab.Start(t)
	b := vmediaBMC{kind: "sushy-tools", ns: lab.NS, ip: lab.IP, port: lab.Port, user: lab.User, pass: lab.Pass,
		vmMAC: lab.VMMAC, disk: filepath.Join(lab.Run, "disk0.qcow2"), http: http.DefaultClient, url: lab.URL,
		offFunc: func(t *testing.T) (bool, string) {
			s := lab.Virsh(t, "domstate", lab.VM)
			return s == "shut off", s
		}}
	system := lab.SystemPath(t)
	r := &vmediaRig{bmc: b, im: im, system: system, cdPath: system + "/VirtualMedia/Cd", console: filepath.Join(lab.Run, "console.log")}
	r.start(t, bin, rd)
	return r
}

// newSimVMediaRig is the rig on castiron's own emulator: a namespace with
// a bridge and the VM's tap, cmd/redfishsim in it driving qemu (generic
// flavour: sessions, virtual media under the Manager), castiron beside it.
func newSimVMediaRig(t *testing.T, bootMode string, serveArgs ...string) *vmediaRig {
	t.Helper()
	requireSimRig(t, bootMode)
	rd, im := vmediaPrereqs(t)
	bin := castironBinary(t)
	b, _, vmDir := startSimBMC(t, bootMode)
	r := &vmediaRig{bmc: b, im: im, system: simSystem,
		cdPath: "/redfish/v1/Managers/BMC/VirtualMedia/CD1", console: filepath.Join(vmDir, "console.log")}
	r.start(t, bin, rd, serveArgs...)
	return r
}

// simSystem is the emulator's (generic flavour) system.
const simSystem = "/redfish/v1/Systems/437XR1138R2"

// requireSimRig skips without what the emulator rig needs.
func requireSimRig(t *testing.T, bootMode string) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "needs root (network namespace, tap)")
	}
	for _, c := range []string{"ip", "qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(c); err != nil {
			unavailable(t, "%s not installed (tests/deps.sh)", c)
		}
	}
	if bootMode == "uefi" {
		if _, err := os.Stat(ovmfCode); err != nil {
			unavailable(t, "no OVMF (Debian package ovmf): %v", err)
		}
	}
}

// startSimBMC makes the emulator rig's namespace (a bridge, the VM's tap)
// and starts cmd/redfishsim in it driving the qemu VM (generic flavour),
// with simArgs added; it returns the BMC, the namespace and the VM's
// directory (console.log: its serial console).
func startSimBMC(t *testing.T, bootMode string, simArgs ...string) (vmediaBMC, *netns, string) {
	t.Helper()
	sim := redfishsimBinary(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := newNetns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "e2e-rfsim-")
	if err != nil {
		t.Fatal(err)
	}
	var simd *daemon
	t.Cleanup(func() {
		if simd != nil {
			if err := simd.stop(20 * time.Second); err != nil {
				t.Errorf("redfishsim: %v", err)
			}
			if t.Failed() {
				t.Logf("---- redfishsim log ----\n%s", tailFile(filepath.Join(dir, "redfishsim.log"), 40))
				t.Logf("---- qemu log ----\n%s", tailFile(filepath.Join(dir, "vm", "qemu.log"), 20))
			}
		}
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := ns.Delete(dctx, simTap, simBridge); err != nil {
			t.Errorf("namespace %s: %v", ns.Name, err)
		}
		if os.Getenv("E2E_KEEP") == "" {
			_ = os.RemoveAll(dir)
		}
	})
	if err := ns.IPBatch(ctx, "link set lo up",
		"link add "+simBridge+" type bridge stp_state 0 forward_delay 0",
		"addr add "+simIP+"/24 dev "+simBridge,
		"tuntap add dev "+simTap+" mode tap", "link set "+simTap+" master "+simBridge, "link set "+simTap+" up",
		"link set "+simBridge+" up"); err != nil {
		t.Fatal(err)
	}
	vmDir := filepath.Join(dir, "vm")
	if err := os.MkdirAll(vmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(vmDir, "disk0.raw")
	if err := sparseFile(disk, 4<<30); err != nil {
		t.Fatal(err)
	}
	mode := map[string]string{"bios": "Legacy", "uefi": "UEFI"}[bootMode]
	simd, err = startDaemon("redfishsim", ns.Command(context.Background(), sim, append([]string{
		"-listen", fmt.Sprintf("127.0.0.1:%d", simPort), "-flavour", "generic", "-debug", "-control",
		"-qemu", "-qemu-dir", vmDir, "-name", "e2e-rfsim-" + randHex(3), "-mem", "1024", "-cpus", "2",
		"-boot-mode", mode, "-disk", disk + "=RFDISK0", "-nic", simVMMAC + "=" + simTap}, simArgs...)...),
		filepath.Join(dir, "redfishsim.log"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: nsDialer(ns.Path())}}
	b := vmediaBMC{kind: "redfishsim", ns: ns.Name, ip: simIP, port: simPort, user: "admin", pass: "password",
		vmMAC: simVMMAC, disk: disk, http: hc, url: fmt.Sprintf("http://127.0.0.1:%d", simPort)}
	b.offFunc = func(t *testing.T) (bool, string) {
		var sys struct{ PowerState string }
		b.get(t, simSystem, &sys)
		return sys.PowerState == "Off", sys.PowerState
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, b.url+"/redfish/v1/", nil)
		if res, err := hc.Do(req); err == nil {
			res.Body.Close()
			break
		}
		if !simd.running() || time.Now().After(deadline) {
			t.Fatalf("redfishsim did not start: %s", tailFile(filepath.Join(dir, "redfishsim.log"), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return b, ns, vmDir
}

// redfishsimBinary builds cmd/redfishsim once per test binary.
func redfishsimBinary(t testing.TB) string {
	t.Helper()
	simBuild.once.Do(func() {
		out := filepath.Join(shared.dir, "redfishsim")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./engine/driver/bmcsim/cmd/redfishsim")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			simBuild.err = fmt.Errorf("go build redfishsim: %w: %s", err, b)
			return
		}
		simBuild.path = out
	})
	if simBuild.err != nil {
		t.Fatal(simBuild.err)
	}
	return simBuild.path
}

var simBuild struct {
	once sync.Once
	path string
	err  error
}

// get reads a Redfish resource from the BMC (basic auth).
func (b vmediaBMC) get(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+path, nil)
	req.SetBasicAuth(b.user, b.pass)
	res, err := b.http.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", b.kind, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || json.Unmarshal(raw, v) != nil {
		t.Fatalf("%s GET %s: %d %s", b.kind, path, res.StatusCode, raw)
	}
}

// start starts castiron in the BMC's namespace (no DHCP) and the console
// tail; rd is the ramdisk directory ("" for none).
func (r *vmediaRig) start(t *testing.T, bin, rd string, serveArgs ...string) {
	t.Helper()
	r.tail = startConsoleTail(t, r.console)
	dataDir := t.TempDir()
	url := fmt.Sprintf("http://%s:%d", r.bmc.ip, vmediaPort)
	logPath := filepath.Join(dataDir, "castiron.log")
	args := []string{"netns", "exec", r.bmc.ns, bin, "serve",
		"--listen", fmt.Sprintf("%s:%d", r.bmc.ip, vmediaPort),
		"--data-dir", dataDir, "--insecure-noauth",
		"--public-url", url, // no --pxe-interface: no DHCP/TFTP/PXE at all
		"--callback-timeout", "300s",
	}
	if rd != "" { // "": a rig that boots no ramdisk
		args = append(args, "--ramdisk-dir", rd)
	}
	args = append(args, serveArgs...)
	d, err := startDaemon("castiron", exec.Command("ip", args...), logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the BMC's: runs before the namespace is emptied.
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
			Transport: &http.Transport{Proxy: nil, DialContext: nsDialer("/var/run/netns/" + r.bmc.ns)}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for r.c.Do(ctx, "GET", "/v1", nil, nil) != nil {
		if !d.running() || ctx.Err() != nil {
			t.Fatalf("castiron did not start: %s", tailFile(logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("vmedia rig: castiron %s, BMC %s (%s), system %s, CD %s", url, r.bmc.kind, r.bmc.url, r.system, r.cdPath)
}

// networkData is the VM's static configuration (OpenStack network_data).
func (r *vmediaRig) networkData() map[string]any {
	return map[string]any{
		"links": []any{
			map[string]any{"id": "port0", "type": "phy", "ethernet_mac_address": r.bmc.vmMAC, "mtu": 1500},
			map[string]any{"id": "vlan42", "type": "vlan", "vlan_link": "port0", "vlan_id": 42},
		},
		"networks": []any{
			map[string]any{"id": "net0", "type": "ipv4", "link": "port0",
				"ip_address": vmediaNodeIP, "netmask": "255.255.255.0",
				"routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": r.bmc.ip}}},
			// A static IPv6 address on a VLAN (nothing answers there; the
			// agent must configure it all the same).
			map[string]any{"id": "net1", "type": "ipv6", "link": "vlan42", "ip_address": vmediaNodeIP6, "netmask": "ffff:ffff:ffff:ffff::"},
		},
		"services": []any{map[string]any{"type": "dns", "address": r.bmc.ip}},
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

// media reads the BMC's CD slot: inserted and the image URL.
func (r *vmediaRig) media(t *testing.T) (bool, string) {
	t.Helper()
	var vm struct {
		Inserted bool   `json:"Inserted"`
		Image    string `json:"Image"`
	}
	r.bmc.get(t, r.cdPath, &vm)
	return vm.Inserted, vm.Image
}

func (r *vmediaRig) requireEjected(t *testing.T, when string) {
	t.Helper()
	if inserted, image := r.media(t); inserted || image != "" {
		t.Errorf("%s: the CD still holds %q (inserted %v), want it ejected", when, image, inserted)
	}
}

// waitOff waits for the BMC (libvirt, or the emulator's qemu) to report
// the VM off.
func (r *vmediaRig) waitOff(t *testing.T, when string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		off, state := r.bmc.offFunc(t)
		if off {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the VM is still %q after %s", when, state, d)
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
			"redfish_address": fmt.Sprintf("http://127.0.0.1:%d", r.bmc.port), "redfish_system_id": r.system,
			"redfish_username": r.bmc.user, "redfish_password": r.bmc.pass,
		},
		"boot_interface":    cmp.Or(r.boot, "redfish-virtual-media"),
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
		if strings.EqualFold(i.MACAddress, r.bmc.vmMAC) && i.IPV4Address != nil && *i.IPV4Address == vmediaNodeIP {
			found = true
		}
	}
	if !found {
		t.Errorf("inventory interfaces %+v: none with %s and the static address %s", inv.Interfaces, r.bmc.vmMAC, vmediaNodeIP)
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
	r.c.WaitReleased(ctx, t, r.node.UUID, when, d)
}

// WaitReleased waits for node's reservation to clear: a task that failed
// the node records the failure state first and lets the node go when it
// has finished (a power off, a cleanup), as Ironic's tasks do.
func (c *Client) WaitReleased(ctx context.Context, t *testing.T, node, when string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var n struct {
			Reservation *string `json:"reservation"`
		}
		err := c.Do(ctx, "GET", "/v1/nodes/"+node, nil, &n)
		if err == nil && n.Reservation == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the node is still reserved (%v) after %s", when, err, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
