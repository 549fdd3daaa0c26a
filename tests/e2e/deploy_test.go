//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Deployment and cleaning through castiron's agent: automated cleaning
// erases the disk's metadata, deploy writes the test OS image (image_test.go)
// to the root disk, the node boots it from disk and its /init prints the
// marker; undeploy cleans again; abort, root device hints, bad checksums and
// the compressed formats.

// Timeouts on TCG: a PXE boot to the agent is ~10 s, writing 64 MiB a few
// seconds, the disk boot ~12 s; these leave room for a busy host.
const (
	cleanTimeout  = 300 * time.Second
	deployTimeout = 300 * time.Second
	markerTimeout = 180 * time.Second
)

// PatchOp is one JSON patch operation (RFC 6902) for PATCH /v1/nodes/{id}.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// PatchNode is PATCH /v1/nodes/{ident}.
func (c *Client) PatchNode(ctx context.Context, ident string, ops ...PatchOp) (*Node, error) {
	var raw json.RawMessage
	if err := c.Do(ctx, "PATCH", "/v1/nodes/"+url.PathEscape(ident), ops, &raw); err != nil {
		return nil, err
	}
	return decodeNode(raw)
}

// field is a top-level object field of the node's full JSON (deploy_step,
// clean_step, instance_info, ...), nil when absent or not an object.
func (n *Node) field(name string) map[string]any {
	var all map[string]json.RawMessage
	if json.Unmarshal(n.Raw, &all) != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(all[name], &m) != nil {
		return nil
	}
	return m
}

// deployRig is a lab with castiron serving the test images and one ipmi
// node (with its port) in manageable.
type deployRig struct {
	l    *Lab
	c    *Castiron
	im   *DeployImages
	node *Node
}

func newDeployRig(t *testing.T, name string, opts LabOptions, images ...DeployImage) *deployRig {
	t.Helper()
	return newDeployRigWith(t, name, opts, CastironOptions{}, images...)
}

// newDeployRigWith is newDeployRig with castiron's options.
func newDeployRigWith(t *testing.T, name string, opts LabOptions, co CastironOptions, images ...DeployImage) *deployRig {
	t.Helper()
	ramdiskDir(t) // skip before building anything when there is no ramdisk
	im := BuildDeployImages(t)
	l := NewLab(t, opts)
	c := StartCastiron(t, l, co)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, img := range images {
		c.InstallImage(t, img)
		requireImageServed(ctx, t, c, img)
	}
	node := c.EnrollIPMINode(t, l, name, true)
	return &deployRig{l: l, c: c, im: im, node: node}
}

// requireImageServed checks castiron serves the image at /images/<name>
// (its size) before a deploy depends on it.
func requireImageServed(ctx context.Context, t *testing.T, c *Castiron, img DeployImage) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.URL+"/images/"+url.PathEscape(img.Name), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("HEAD /images/%s: %v", img.Name, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ContentLength != img.Size {
		t.Fatalf("castiron does not serve the image %s from <data-dir>/images (GET /images/<name> not wired?): HEAD answered HTTP %d, Content-Length %d (want 200, %d)",
			img.Name, res.StatusCode, res.ContentLength, img.Size)
	}
}

// setImage points instance_info at img; sum overrides its sha256.
func (r *deployRig) setImage(ctx context.Context, t *testing.T, img DeployImage, sum string) {
	t.Helper()
	if sum == "" {
		sum = img.SHA256
	}
	ops := []PatchOp{
		{Op: "add", Path: "/instance_info/image_source", Value: img.Name},
		{Op: "add", Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		{Op: "add", Path: "/instance_info/image_os_hash_value", Value: sum},
		{Op: "add", Path: "/instance_info/image_disk_format", Value: img.Format},
	}
	if _, err := r.c.PatchNode(ctx, r.node.UUID, ops...); err != nil {
		t.Fatalf("set instance_info: %v", err)
	}
}

// provide moves the node from manageable to available; without automated
// cleaning that is immediate.
func (r *deployRig) provide(ctx context.Context, t *testing.T, automatedClean bool) time.Duration {
	t.Helper()
	if !automatedClean {
		if _, err := r.c.PatchNode(ctx, r.node.UUID, PatchOp{Op: "replace", Path: "/automated_clean", Value: false}); err != nil {
			t.Fatalf("automated_clean false: %v", err)
		}
	}
	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "provide"); err != nil {
		t.Fatalf("provide: %v", err)
	}
	timeout := cleanTimeout
	if !automatedClean {
		timeout = 30 * time.Second
	}
	if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, "available", timeout); err != nil {
		t.Fatalf("provide: %v", err)
	}
	return time.Since(start)
}

// deployRun is what watchDeploy saw.
type deployRun struct {
	Start    time.Time
	Active   time.Time // zero: did not get there
	StepSeen time.Time // deploy_step write_image first seen
	Progress []string  // distinct deploy_step progress messages seen
	States   []string  // provision states in the order seen
	Node     *Node     // the last answer
}

// watchDeploy sends deploy and polls the node (every 200 ms) until it is
// active or failed or timeout passes, recording the deploy_step it shows.
func (r *deployRig) watchDeploy(ctx context.Context, t *testing.T, timeout time.Duration) (*deployRun, error) {
	t.Helper()
	run := &deployRun{Start: time.Now()}
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "active"); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	err := r.poll(ctx, run, timeout, func(n *Node) (bool, error) {
		switch {
		case n.ProvisionState == "active":
			run.Active = time.Now()
			return true, nil
		case failedStates[n.ProvisionState]:
			return true, fmt.Errorf("deploy: node is %q: last_error: %s", n.ProvisionState, n.LastErr())
		}
		return false, nil
	})
	return run, err
}

// poll reads the node every 200 ms, records deploy_step and state changes
// into run and stops when done says so.
func (r *deployRig) poll(ctx context.Context, run *deployRun, timeout time.Duration, done func(*Node) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if n, err := r.c.GetNode(ctx, r.node.UUID); err == nil {
			run.Node = n
			if len(run.States) == 0 || run.States[len(run.States)-1] != n.ProvisionState {
				run.States = append(run.States, n.ProvisionState)
			}
			if step := n.field("deploy_step"); step["step"] == "write_image" {
				if run.StepSeen.IsZero() {
					run.StepSeen = time.Now()
				}
				if p, ok := step["progress"].(map[string]any); ok {
					msg := fmt.Sprintf("%v%% %v", p["percent"], p["message"])
					if len(run.Progress) == 0 || run.Progress[len(run.Progress)-1] != msg {
						run.Progress = append(run.Progress, msg)
					}
				}
			}
			if stop, err := done(n); stop {
				return err
			}
		}
		select {
		case <-ctx.Done():
			last := "no answer"
			if run.Node != nil {
				last = fmt.Sprintf("%q, last_error: %s", run.Node.ProvisionState, run.Node.LastErr())
			}
			return fmt.Errorf("node %s after %s: %s (states seen: %v)", r.node.UUID, timeout, last, run.States)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitMarker waits for the image's marker line on the console after since,
// then for the image to power the VM off.
func (r *deployRig) waitMarker(ctx context.Context, t *testing.T, since time.Time) time.Time {
	t.Helper()
	if err := waitConsole(ctx, r.l, since, markerTimeout, r.im.Marker); err != nil {
		t.Fatalf("the deployed image did not boot from disk (boot device now %q): %v", r.l.BootDevice(), err)
	}
	line, _ := firstLine(r.l.Console(), since, r.im.Marker)
	offCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := r.l.WaitQEMU(offCtx, false); err != nil {
		t.Errorf("the deployed image printed its marker but the VM stays on: %v", err)
	}
	return line.At
}

// waitVMOff waits until castiron (or the agent) has powered the VM off.
func (r *deployRig) waitVMOff(ctx context.Context, t *testing.T, when string, d time.Duration) time.Time {
	t.Helper()
	offCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := r.l.WaitQEMU(offCtx, false); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return time.Now()
}

// deployTimed deploys, logs the E2E-TIMING line label (label_failed and a
// fatal error when the node does not get to active) and, with marker,
// waits for the deployed image to boot from disk first.
func (r *deployRig) deployTimed(ctx context.Context, t *testing.T, label string, marker bool) *deployRun {
	t.Helper()
	run, err := r.watchDeploy(ctx, t, deployTimeout)
	if err != nil {
		t.Log(TimingLine(label+"_failed", run.Start, time.Now(), r.deployPhases(run, time.Time{})))
		t.Fatal(err)
	}
	var at time.Time
	if marker {
		at = r.waitMarker(ctx, t, run.Start)
	}
	t.Log(TimingLine(label, run.Start, run.Active, r.deployPhases(run, at)))
	return run
}

// deployPhases are the points of a deploy for TimingLine.
func (r *deployRig) deployPhases(run *deployRun, marker time.Time) []Phase {
	console := r.l.Console()
	events := r.l.VMEvents()
	var phases []Phase
	add := func(name string, at time.Time, src string) {
		phases = append(phases, Phase{Name: name, At: at, Source: src})
	}
	fromLines := func(name string, lines []ConsoleLine, src string, marks ...string) {
		if l, ok := firstLine(lines, run.Start, marks...); ok {
			add(name, l.At, src)
			return
		}
		add(name, time.Time{}, "")
	}
	fromLines("power_on", events, "bmc", "start bootdev=pxe")
	fromLines("first_dhcp", console, "console", markFirstDHCP...)
	kernelAt, kernelSrc := kernelStart(console, run.Start)
	add("kernel", kernelAt, kernelSrc)
	fromLines("agent", console, "console", markAgent...)
	add("write_image", run.StepSeen, "api")
	add("active", run.Active, "api")
	fromLines("disk_boot", events, "bmc", "start bootdev=default", "start bootdev=disk")
	add("marker", marker, "console")
	return phases
}

// checkDeployRecord wants the write_image result in driver_internal_info
// and the deploy's transitions in the node's history.
func (r *deployRig) checkDeployRecord(ctx context.Context, t *testing.T, run *deployRun) {
	t.Helper()
	n, err := r.c.GetNode(ctx, r.node.UUID)
	if err != nil {
		t.Errorf("get node: %v", err)
		return
	}
	results, _ := n.DriverInternalInfo["agent_step_results"].(map[string]any)
	if _, ok := results["deploy.write_image"]; !ok {
		t.Errorf("driver_internal_info.agent_step_results has no deploy.write_image: %v", n.DriverInternalInfo["agent_step_results"])
	} else {
		t.Logf("write_image result: %v", results["deploy.write_image"])
	}
	if run.StepSeen.IsZero() {
		t.Logf("deploy_step write_image was never seen while polling every 200 ms (states seen: %v)", run.States)
	} else {
		t.Logf("deploy_step write_image seen %.2fs after the deploy request; progress seen: %q", run.StepSeen.Sub(run.Start).Seconds(), run.Progress)
	}
	history, err := r.c.History(ctx, r.node.UUID)
	if err != nil {
		t.Errorf("history: %v", err)
		return
	}
	var events []string
	for _, h := range history {
		if !h.Time().Before(run.Start.Add(-time.Second)) {
			events = append(events, h.Event)
		}
	}
	joined := strings.Join(events, " | ")
	for _, want := range []string{"-> wait call-back", "wait call-back -> deploying", "-> active"} {
		if !strings.Contains(joined, want) {
			t.Errorf("history since the deploy has no %q: %s", want, joined)
		}
	}
	t.Logf("history since the deploy: %s", joined)
}

// TestCleanDeployUndeploy is the whole life of a BIOS node: automated
// cleaning erases a used disk, deploy writes the raw image, the node boots
// it from disk, undeploy cleans the disk again.
func TestCleanDeployUndeploy(t *testing.T) {
	r := newDeployRig(t, "deploy-bios", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1}, deployImagesFor(t).Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	disk := r.l.DiskPath(0)
	PrefillDisk(t, disk)
	r.setImage(ctx, t, r.im.Raw, "")

	// provide: automated cleaning through the agent.
	cleanTook := r.provide(ctx, t, true)
	r.waitVMOff(ctx, t, "after cleaning", 60*time.Second)
	RequireCleanDisk(t, disk, "after automated cleaning")
	t.Logf("E2E-TIMING clean_bios total=%.2fs", cleanTook.Seconds())

	// deploy
	run, err := r.watchDeploy(ctx, t, deployTimeout)
	if err != nil {
		t.Log(TimingLine("deploy_bios_failed", run.Start, time.Now(), r.deployPhases(run, time.Time{})))
		t.Fatal(err)
	}
	marker := r.waitMarker(ctx, t, run.Start)
	t.Log(TimingLine("deploy_bios", run.Start, run.Active, r.deployPhases(run, marker)))
	if err := DiskStartsWith(disk, r.im.Raw.Path); err != nil {
		t.Errorf("after deploy: %v", err)
	}
	r.checkDeployRecord(ctx, t, run)

	// undeploy: cleaning again, back to available.
	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "deleted"); err != nil {
		t.Fatalf("undeploy: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, "available", cleanTimeout); err != nil {
		t.Fatalf("undeploy: %v", err)
	}
	took := time.Since(start)
	r.waitVMOff(ctx, t, "after undeploy", 60*time.Second)
	RequireCleanDisk(t, disk, "after undeploy")
	t.Logf("E2E-TIMING undeploy_bios total=%.2fs", took.Seconds())
}

// deployImagesFor builds (once) and returns the test images, skipping
// first when the lab cannot run.
func deployImagesFor(t *testing.T) *DeployImages {
	t.Helper()
	requireLab(t, ipxeQemuROM)
	ramdiskDir(t)
	return BuildDeployImages(t)
}

// TestDeployAbort aborts a deploy while the agent writes the image: the
// node fails at once and the VM is powered off.
func TestDeployAbort(t *testing.T) {
	big := deployImagesFor(t).Big(t)
	r := newDeployRig(t, "deploy-abort", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1}, big)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r.setImage(ctx, t, big, "")
	r.provide(ctx, t, false)

	run := &deployRun{Start: time.Now()}
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "active"); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	err := r.poll(ctx, run, deployTimeout, func(n *Node) (bool, error) {
		switch {
		case n.ProvisionState == "wait call-back" && !run.StepSeen.IsZero():
			return true, nil
		case n.ProvisionState == "deploying" && !run.StepSeen.IsZero(), n.ProvisionState == "active":
			return true, fmt.Errorf("write_image of %d MiB finished before the abort could hit it (states %v): use a bigger image", big.Size>>20, run.States)
		case failedStates[n.ProvisionState]:
			return true, fmt.Errorf("deploy: node is %q: last_error: %s", n.ProvisionState, n.LastErr())
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	abortAt := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "abort"); err != nil {
		t.Fatalf("abort: %v", err)
	}
	n, err := r.c.WaitProvisionState(ctx, r.node.UUID, "deploy failed", 15*time.Second)
	if err != nil {
		t.Fatalf("abort: %v", err)
	}
	failedAt := time.Now()
	if !strings.Contains(strings.ToLower(n.LastErr()), "abort") {
		t.Errorf("last_error %q does not mention the abort", n.LastErr())
	}
	offAt := r.waitVMOff(ctx, t, "after abort", 15*time.Second)
	if on, err := r.l.PowerStatus(ctx); err != nil || on {
		t.Errorf("after abort: BMC power on=%v err=%v, want off", on, err)
	}
	t.Logf("aborted during write_image, progress seen: %q", run.Progress)
	t.Logf("E2E-TIMING deploy_abort step_seen=%.2fs abort_after=%.2fs deploy_failed=%.2fs vm_off=%.2fs",
		run.StepSeen.Sub(run.Start).Seconds(), abortAt.Sub(run.Start).Seconds(),
		failedAt.Sub(abortAt).Seconds(), offAt.Sub(abortAt).Seconds())
}

// TestDeployRootDeviceHints deploys the qcow2 image to the second of two
// disks, chosen by serial; the first (Ironic's default root disk: the
// smallest of at least 4 GiB) stays untouched and the VM boots the second.
func TestDeployRootDeviceHints(t *testing.T) {
	im := deployImagesFor(t)
	r := newDeployRig(t, "deploy-hints", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{
		{SizeGiB: 5, Serial: "E2EDISK0"}, {SizeGiB: 6, Serial: "E2EDISK1"},
	}}, im.QCOW2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r.setImage(ctx, t, im.QCOW2, "")
	if _, err := r.c.PatchNode(ctx, r.node.UUID, PatchOp{Op: "add", Path: "/properties/root_device", Value: map[string]any{"serial": "E2EDISK1"}}); err != nil {
		t.Fatalf("root_device: %v", err)
	}
	r.provide(ctx, t, false)

	run := r.deployTimed(ctx, t, "deploy_hints_qcow2", true)
	if err := DiskStartsWith(r.l.DiskPath(1), im.Raw.Path); err != nil {
		t.Errorf("disk 1 (E2EDISK1, the hinted root disk): %v", err)
	}
	if err := DiskZeroRanges(r.l.DiskPath(0), [2]int64{0, imageSize}, [2]int64{-(1 << 20), 1 << 20}); err != nil {
		t.Errorf("disk 0 (E2EDISK0) was written to: %v", err)
	}
	r.checkDeployRecord(ctx, t, run)
}

// TestDeployBadChecksum: an image whose sha256 does not match fails the
// deploy with the checksum in last_error, and the VM is powered off.
func TestDeployBadChecksum(t *testing.T) {
	im := deployImagesFor(t)
	r := newDeployRig(t, "deploy-badsum", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1}, im.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wrong := sha256.Sum256([]byte("not the image " + im.Raw.SHA256))
	r.setImage(ctx, t, im.Raw, hex.EncodeToString(wrong[:]))
	r.provide(ctx, t, false)

	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "active"); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	n, err := r.c.WaitProvisionState(ctx, r.node.UUID, "deploy failed", deployTimeout)
	if err != nil {
		t.Fatalf("deploy with a wrong checksum: %v", err)
	}
	failedAt := time.Now()
	if !strings.Contains(strings.ToLower(n.LastErr()), "checksum") {
		t.Errorf("last_error %q does not mention the checksum", n.LastErr())
	}
	offAt := r.waitVMOff(ctx, t, "after the failed deploy", 60*time.Second)
	if on, err := r.l.PowerStatus(ctx); err != nil || on {
		t.Errorf("after the failed deploy: BMC power on=%v err=%v, want off", on, err)
	}
	t.Logf("last_error: %s", n.LastErr())
	t.Logf("E2E-TIMING deploy_bad_checksum deploy_failed=%.2fs vm_off=%.2fs",
		failedAt.Sub(start).Seconds(), offAt.Sub(start).Seconds())
}

// TestDeployCompressedFormats deploys the gzip and zstd variants; the disk
// must hold the raw image byte for byte (the raw and qcow2 runs above also
// boot it).
func TestDeployCompressedFormats(t *testing.T) {
	im := deployImagesFor(t)
	for _, img := range []DeployImage{im.Gzip, im.Zstd} {
		t.Run(img.Format, func(t *testing.T) {
			r := newDeployRig(t, "deploy-"+img.Format, LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1}, img)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			r.setImage(ctx, t, img, "")
			r.provide(ctx, t, false)
			run, err := r.watchDeploy(ctx, t, deployTimeout)
			if err != nil {
				t.Log(TimingLine("deploy_"+img.Format+"_failed", run.Start, time.Now(), r.deployPhases(run, time.Time{})))
				t.Fatal(err)
			}
			t.Log(TimingLine("deploy_"+img.Format, run.Start, run.Active, r.deployPhases(run, time.Time{})))
			if err := DiskStartsWith(r.l.DiskPath(0), im.Raw.Path); err != nil {
				t.Errorf("after deploying the %s image: %v", img.Format, err)
			}
		})
	}
}

// TestLabBootsSecondDisk checks the lab without castiron: the test image on
// the second of two disks boots when the BMC's boot device is disk
// (testdata/vm.sh orders disks with a boot signature first, as a server
// BIOS that tries each disk would boot them), and it prints the marker.
func TestLabBootsSecondDisk(t *testing.T) {
	im := BuildDeployImages(t)
	l := NewLab(t, LabOptions{Boot: "bios", MemMB: 512, Disks: []DiskSpec{
		{SizeGiB: 5, Serial: "E2EDISK0"}, {SizeGiB: 6, Serial: "E2EDISK1"},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := WriteImageToDisk(l.DiskPath(1), im.Raw.Path); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, args := range [][]string{{"chassis", "bootdev", "disk"}, {"chassis", "power", "on"}} {
		if out, err := l.Ipmitool(ctx, args...); err != nil {
			t.Fatalf("ipmitool %v: %v: %s", args, err, out)
		}
	}
	r := &deployRig{l: l, im: im}
	marker := r.waitMarker(ctx, t, start)
	if err := DiskZeroRanges(l.DiskPath(0), [2]int64{0, 1 << 20}); err != nil {
		t.Errorf("disk 0: %v", err)
	}
	t.Logf("E2E-TIMING lab_disk_boot marker=%.2fs", marker.Sub(start).Seconds())
}
