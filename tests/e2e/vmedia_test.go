//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestVirtualMediaNoDHCP is the whole life of a Redfish node booted by
// virtual media with castiron's DHCP off, behind castiron's own Redfish
// emulator driving a qemu VM: enroll, manage (credentials checked),
// out-of-band inspection, agent inspection from the ISO, abort in every
// wait state, cleaning, deployment of an image with a config drive
// (carrying the node's network_data) that then boots from disk, undeploy.
func TestVirtualMediaNoDHCP(t *testing.T) {
	virtualMediaNoDHCP(t, newSimVMediaRig(t, "bios"))
}

// TestVirtualMediaNoDHCPSushyTools is the same walk behind OpenStack's
// sushy-tools (skips unless SUSHY_TOOLS_DIR names a local tree).
func TestVirtualMediaNoDHCPSushyTools(t *testing.T) {
	virtualMediaNoDHCP(t, newSushyVMediaRig(t, "bios"))
}

func virtualMediaNoDHCP(t *testing.T, r *vmediaRig) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	start := time.Now()
	n := r.enroll(ctx, t, "vmedia0", "redfish")
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	t.Logf("E2E-TIMING vmedia_manage total=%.2fs (enroll included)", time.Since(start).Seconds())

	// Out-of-band inspection: nothing boots; the VM's NIC becomes a port.
	took := r.move(ctx, t, "inspect", "manageable", 120*time.Second)
	t.Logf("E2E-TIMING vmedia_inspect_oob total=%.2fs", took.Seconds())
	ports, err := r.c.Ports(ctx, n.UUID)
	if err != nil || len(ports) != 1 || !strings.EqualFold(ports[0].Address, r.bmc.vmMAC) {
		t.Fatalf("ports after out-of-band inspection: %+v %v, want one with %s", ports, err, r.bmc.vmMAC)
	}

	// Agent inspection from the ISO, with no DHCP server anywhere.
	if _, err := r.c.PatchNode(ctx, n.UUID, PatchOp{Op: "replace", Path: "/inspect_interface", Value: "agent"}); err != nil {
		t.Fatal(err)
	}
	r.abortIn(ctx, t, "inspect", "inspect wait", "inspect failed")
	r.move(ctx, t, "manage", "manageable", 60*time.Second)
	r.inspectByAgent(ctx, t, "vmedia_inspect_agent", "bios")
	if b, _ := os.ReadFile(r.c.LogPath); bytes.Contains(b, []byte("provisioning network up")) {
		t.Errorf("castiron started a provisioning network (DHCP): %s", tailFile(r.c.LogPath, 20))
	}

	// Cleaning: abort in clean wait, then a whole automated clean.
	r.abortIn(ctx, t, "provide", "clean wait", "clean failed")
	r.move(ctx, t, "manage", "manageable", 60*time.Second)
	offset := r.consoleSize()
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

// TestVirtualMediaUEFI boots the same kind of ISO by UEFI (its El Torito
// EFI image: Debian's signed CD GRUB on OVMF) for an agent inspection,
// with castiron's DHCP off, behind castiron's own emulator.
func TestVirtualMediaUEFI(t *testing.T) {
	virtualMediaUEFI(t, newSimVMediaRig(t, "uefi"))
}

// TestVirtualMediaUEFISushyTools: the same behind sushy-tools (q35, OVMF,
// SATA CD; skips unless SUSHY_TOOLS_DIR names a local tree).
func TestVirtualMediaUEFISushyTools(t *testing.T) {
	virtualMediaUEFI(t, newSushyVMediaRig(t, "uefi"))
}

func virtualMediaUEFI(t *testing.T, r *vmediaRig) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r.enroll(ctx, t, "vmedia-uefi", "agent")
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	r.inspectByAgent(ctx, t, "vmedia_inspect_agent_uefi", "uefi")
}

// checkConfigDrive finds the config drive the agent wrote to the VM's disk
// and the node's network_data in it (the deployed OS's only way to its
// static address).
func (r *vmediaRig) checkConfigDrive(t *testing.T) {
	t.Helper()
	raw := r.bmc.disk
	if strings.HasSuffix(raw, ".qcow2") {
		raw = filepath.Join(t.TempDir(), "disk.raw")
		if out, err := exec.Command("qemu-img", "convert", "-O", "raw", r.bmc.disk, raw).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img convert: %v\n%s", err, out)
		}
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
