//go:build e2e

package e2e

import (
	"bytes"
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

	"golang.org/x/sys/unix"

	"castiron/engine/driver/redfish/redfishlab"
	"castiron/pxe/boot"
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
		"links": []any{map[string]any{"id": "port0", "type": "phy", "ethernet_mac_address": r.lab.VMMAC, "mtu": 1500}},
		"networks": []any{map[string]any{"id": "net0", "type": "ipv4", "link": "port0",
			"ip_address": vmediaNodeIP, "netmask": "255.255.255.0",
			"routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": r.lab.IP}}}},
		"services": []any{map[string]any{"type": "dns", "address": r.lab.IP}},
	}
}

// consoleTail follows the VM's console file, which libvirt truncates at
// every domain start, into one stamped log (stamped when first read, every
// 100 ms) for the whole test.
type consoleTail struct {
	path string
	mu   sync.Mutex
	log  []ConsoleLine
	part string // an unfinished last line
	size int64
}

func startConsoleTail(t *testing.T, path string) *consoleTail {
	c := &consoleTail{path: path}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			c.poll()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *consoleTail) poll() {
	b, err := os.ReadFile(c.path)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(b)) < c.size { // a new domain start truncated the file
		c.flushPart()
		c.size = 0
	}
	chunk := c.part + string(b[c.size:])
	c.size = int64(len(b))
	lines := strings.Split(chunk, "\n")
	c.part = lines[len(lines)-1]
	now := time.Now()
	for _, l := range lines[:len(lines)-1] {
		c.log = append(c.log, ConsoleLine{At: now, Text: strings.TrimRight(l, "\r")})
	}
}

func (c *consoleTail) flushPart() {
	if c.part != "" {
		c.log = append(c.log, ConsoleLine{At: time.Now(), Text: c.part})
		c.part = ""
	}
}

// Len is a mark for Since.
func (c *consoleTail) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.log)
}

// Since are the lines after mark.
func (c *consoleTail) Since(mark int) []ConsoleLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ConsoleLine(nil), c.log[mark:]...)
}

// consoleSize marks where the console is now, for waitConsoleFrom.
func (r *vmediaRig) consoleSize() int { return r.tail.Len() }

// waitConsoleFrom waits for a console line holding mark after the mark
// and returns when it was first seen.
func (r *vmediaRig) waitConsoleFrom(ctx context.Context, offset int, d time.Duration, mark string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if l, ok := firstLine(r.tail.Since(offset), time.Time{}, mark); ok {
			return l.At, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no %q on the VM console after %s", mark, d)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// phases measures one virtual media boot of the ramdisk from start (the
// request) to end (the target state seen): the BMC fetching the ISO
// (castiron's boot timeline), kernel and agent on the console, the agent's
// network up from network_data, its first call to castiron (timeline).
func (r *vmediaRig) phases(ctx context.Context, offset int, start, end time.Time) []Phase {
	console := r.tail.Since(offset)
	timeline, _, _ := r.c.BootTimeline(ctx, r.node.UUID)
	var phases []Phase
	fromTimeline := func(name string, kinds ...string) {
		for _, ev := range timeline {
			for _, k := range kinds {
				if ev.Kind == k && !ev.At.Before(start) {
					phases = append(phases, Phase{Name: name, At: ev.At, Source: "timeline"})
					return
				}
			}
		}
		phases = append(phases, Phase{Name: name})
	}
	fromConsole := func(name string, marks ...string) {
		l, _ := firstLine(console, start, marks...)
		phases = append(phases, Phase{Name: name, At: l.At, Source: "console"})
	}
	fromTimeline("iso_fetch", boot.HTTPISO)
	fromConsole("kernel", markKernel...)
	fromConsole("agent", markAgent...)
	fromConsole("network", "network configured")
	fromTimeline("agent_call", boot.AgentInspect, boot.AgentLookup)
	return append(phases, Phase{Name: "done", At: end, Source: "api"})
}

// logBoot logs the console lines of one boot (from offset) that show its
// phases, with the guest's uptime stamps: firmware and loader, kernel,
// agent.
func (r *vmediaRig) logBoot(t *testing.T, offset int, start time.Time) {
	t.Helper()
	var lines []string
	for _, l := range r.tail.Since(offset) {
		if strings.Contains(l.Text, "castiron-agent[") || strings.Contains(l.Text, "Linux version") || strings.Contains(l.Text, "Run /init") {
			lines = append(lines, fmt.Sprintf("+%6.2fs %s", l.At.Sub(start).Seconds(), truncate(strings.TrimSpace(l.Text), 160)))
		}
	}
	t.Logf("boot phases on the console (seen at +s after the request):\n%s", strings.Join(lines, "\n"))
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
	t.Logf("abort in %s: %s, last_error %q", wait, failed, n.LastErr())
	t.Logf("E2E-TIMING vmedia_abort_%s failed=%.2fs vm_off=%.2fs", strings.ReplaceAll(wait, " ", "_"), failedAt.Seconds(), offAt.Seconds())
}

// TestVirtualMediaNoDHCP is the whole life of a Redfish node booted by
// virtual media with castiron's DHCP off: enroll, manage (credentials
// checked), out-of-band inspection, agent inspection from the ISO, abort in
// every wait state, cleaning, deployment of an image with a config drive
// (carrying the node's network_data) that then boots from disk, undeploy.
func TestVirtualMediaNoDHCP(t *testing.T) {
	r := newVMediaRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	start := time.Now()
	n, err := r.c.CreateNode(ctx, map[string]any{
		"name":   "vmedia0",
		"driver": "redfish",
		"driver_info": map[string]any{
			"redfish_address": fmt.Sprintf("http://127.0.0.1:%d", r.lab.Port), "redfish_system_id": r.system,
			"redfish_username": r.lab.User, "redfish_password": r.lab.Pass,
		},
		"boot_interface":    "redfish-virtual-media",
		"inspect_interface": "redfish",
		"network_data":      r.networkData(),
	})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	r.node = n
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	t.Logf("E2E-TIMING vmedia_manage total=%.2fs (enroll included)", time.Since(start).Seconds())

	// Out-of-band inspection: nothing boots; the VM's NIC becomes a port.
	took := r.move(ctx, t, "inspect", "manageable", 120*time.Second)
	t.Logf("E2E-TIMING vmedia_inspect_oob total=%.2fs", took.Seconds())
	ports, err := r.c.Ports(ctx, n.UUID)
	if err != nil || len(ports) != 1 || !strings.EqualFold(ports[0].Address, r.lab.VMMAC) {
		t.Fatalf("ports after out-of-band inspection: %+v %v, want one with %s", ports, err, r.lab.VMMAC)
	}

	// Agent inspection from the ISO, with no DHCP server anywhere.
	if _, err := r.c.PatchNode(ctx, n.UUID, PatchOp{Op: "replace", Path: "/inspect_interface", Value: "agent"}); err != nil {
		t.Fatal(err)
	}
	r.abortIn(ctx, t, "inspect", "inspect wait", "inspect failed")
	r.move(ctx, t, "manage", "manageable", 60*time.Second)
	offset := r.consoleSize()
	start = time.Now()
	took = r.move(ctx, t, "inspect", "manageable", 300*time.Second)
	if _, err := r.waitConsoleFrom(ctx, offset, time.Second, "static network from network_data"); err != nil {
		t.Errorf("the agent did not configure its network from network_data: %v", err)
	}
	t.Log(TimingLine("vmedia_inspect_agent", start, start.Add(took), r.phases(ctx, offset, start, start.Add(took))))
	r.logBoot(t, offset, start)
	inv, _, err := r.c.Inventory(ctx, n.UUID)
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
	r.waitOff(t, "after inspection", 60*time.Second)
	r.requireEjected(t, "after inspection")
	if b, _ := os.ReadFile(r.c.LogPath); bytes.Contains(b, []byte("provisioning network up")) {
		t.Errorf("castiron started a provisioning network (DHCP): %s", tailFile(r.c.LogPath, 20))
	}

	// Cleaning: abort in clean wait, then a whole automated clean.
	r.abortIn(ctx, t, "provide", "clean wait", "clean failed")
	r.move(ctx, t, "manage", "manageable", 60*time.Second)
	offset = r.consoleSize()
	start = time.Now()
	took = r.move(ctx, t, "provide", "available", cleanTimeout)
	t.Log(TimingLine("vmedia_clean", start, start.Add(took), r.phases(ctx, offset, start, start.Add(took))))
	r.logBoot(t, offset, start)
	r.waitOff(t, "after cleaning", 60*time.Second)
	r.requireEjected(t, "after cleaning")

	// Deployment: abort in wait call-back, undeploy (cleaning), then the
	// real deploy with a config drive; the image boots from disk.
	r.c.InstallImage(t, r.im.Raw)
	r.setImage(ctx, t)
	r.abortIn(ctx, t, "active", "wait call-back", "deploy failed")
	r.move(ctx, t, "deleted", "available", cleanTimeout)
	r.setImage(ctx, t) // undeploy cleared instance_info
	offset = r.consoleSize()
	start = time.Now()
	body := map[string]any{"target": "active", "configdrive": map[string]any{"meta_data": map[string]any{"hostname": "vmedia0"}}}
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+n.UUID+"/states/provision", body, nil); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, n.UUID, "active", deployTimeout); err != nil {
		t.Fatalf("deploy by virtual media: %v", err)
	}
	activeAt := time.Since(start)
	r.requireEjected(t, "after the deploy")
	marker, err := r.waitConsoleFrom(ctx, offset, markerTimeout, r.im.Marker)
	if err != nil {
		t.Fatalf("the deployed image did not boot from disk: %v", err)
	}
	t.Log(TimingLine("vmedia_deploy", start, start.Add(activeAt), append(r.phases(ctx, offset, start, start.Add(activeAt)),
		Phase{Name: "marker", At: marker, Source: "console"})))
	r.logBoot(t, offset, start)
	r.waitOff(t, "after the deployed image ran", 60*time.Second)
	r.checkConfigDrive(t)

	took = r.move(ctx, t, "deleted", "available", cleanTimeout)
	t.Logf("E2E-TIMING vmedia_undeploy total=%.2fs", took.Seconds())
	r.requireEjected(t, "after undeploy")
	r.logISOBuilds(t)
}

// logISOBuilds logs castiron's "ramdisk ISO built" lines (size and build
// time of every ISO it made; a boot that reused one has none).
func (r *vmediaRig) logISOBuilds(t *testing.T) {
	t.Helper()
	b, _ := os.ReadFile(r.c.LogPath)
	var built []string
	boots := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "ramdisk ISO built") {
			built = append(built, truncate(l, 300))
		}
		if strings.Contains(l, "ramdisk ISO inserted") {
			boots++
		}
	}
	t.Logf("E2E-TIMING vmedia_iso boots=%d builds=%d\n%s", boots, len(built), strings.Join(built, "\n"))
}

// checkConfigDrive finds the config drive the agent wrote to the VM's disk
// and the node's network_data in it (the deployed OS's only way to its
// static address).
func (r *vmediaRig) checkConfigDrive(t *testing.T) {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "disk.raw")
	if out, err := exec.Command("qemu-img", "convert", "-O", "raw", filepath.Join(r.lab.Run, "disk0.qcow2"), raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	want := []byte(`"ip_address":"` + vmediaNodeIP + `"`)
	found, err := sparseContains(raw, want, []byte("config-2"))
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Errorf("no config drive with the node's network_data (%s) on the deployed disk", want)
	}
}

// sparseContains reads only the data extents of a sparse file and reports
// whether all of the patterns occur in it.
func sparseContains(path string, patterns ...[]byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	seen := make([]bool, len(patterns))
	buf := make([]byte, 1<<20)
	var off int64
	for {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no more data
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return false, err
		}
		for pos := data; pos < hole; pos += int64(len(buf)) - 4096 {
			n, _ := f.ReadAt(buf, pos)
			for i, p := range patterns {
				seen[i] = seen[i] || bytes.Contains(buf[:n], p)
			}
			if n < len(buf) {
				break
			}
		}
		off = hole
	}
	for _, s := range seen {
		if !s {
			return false, nil
		}
	}
	return true, nil
}
