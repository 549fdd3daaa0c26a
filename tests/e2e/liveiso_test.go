//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"castiron/ramdisk/iso"
)

// TestLiveISOAndCustomDeploy is Metal3's live ISO and custom deploy on a
// qemu VM behind castiron's own Redfish emulator, by virtual media, with
// no DHCP anywhere:
//   - deploy_interface ramdisk with instance_info.boot_iso (what BMO sends
//     for a live ISO): an ISO served over HTTP (castiron's /images/) whose
//     /init prints the test image's marker on the serial console and powers
//     off. The node goes deploying -> active with no agent, the VM boots
//     the ISO from the virtual CD; powered on again, it boots it again
//     (the boot to the CD is persistent, the ISO stays inserted); undeploy
//     ejects it.
//   - deploy_interface custom-agent with BMO's deploy_steps (one step, at
//     priority 80): the agent boots from castiron's ISO and runs
//     deploy.erase_devices_metadata on the VM's disk (a sentinel written
//     there beforehand is gone), no image is written, the node is active.
func TestLiveISOAndCustomDeploy(t *testing.T) {
	r := newSimVMediaRig(t, "bios")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	live := buildLiveISO(ctx, t, r.im)
	r.c.InstallImage(t, live)
	isoURL := r.c.URL + "/images/" + live.Name

	n := r.enroll(ctx, t, "live0", "redfish")
	if _, err := r.c.PatchNode(ctx, n.UUID, PatchOp{Op: "replace", Path: "/automated_clean", Value: false}); err != nil {
		t.Fatal(err)
	}
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	r.move(ctx, t, "provide", "available", 60*time.Second)

	// BMO's live ISO update (setLiveIsoUpdateOptsForNode).
	if _, err := r.c.PatchNode(ctx, n.UUID,
		PatchOp{Op: "replace", Path: "/deploy_interface", Value: "ramdisk"},
		PatchOp{Op: "add", Path: "/instance_info/boot_iso", Value: isoURL},
		PatchOp{Op: "add", Path: "/driver_info/force_persistent_boot_device", Value: "Default"},
	); err != nil {
		t.Fatal(err)
	}
	offset := r.consoleSize()
	start := time.Now()
	took := r.move(ctx, t, "active", "active", deployTimeout)
	t.Logf("E2E-TIMING liveiso_active total=%.2fs", took.Seconds())
	if inserted, image := r.media(t); !inserted || image != isoURL {
		t.Fatalf("active: CD inserted %v image %q, want %s", inserted, image, isoURL)
	}
	at, err := r.waitConsoleFrom(ctx, offset, markerTimeout, r.im.Marker)
	if err != nil {
		t.Fatalf("the live ISO did not boot: %v", err)
	}
	t.Logf("E2E-TIMING liveiso_marker total=%.2fs", at.Sub(start).Seconds())
	r.waitOff(t, "after the live ISO ran", 60*time.Second) // its /init powers off

	// Power cycles keep booting the ISO.
	offset = r.consoleSize()
	start = time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+n.UUID+"/states/power", map[string]any{"target": "power on"}, nil); err != nil {
		t.Fatalf("power on: %v", err)
	}
	if at, err = r.waitConsoleFrom(ctx, offset, markerTimeout, r.im.Marker); err != nil {
		t.Fatalf("powered on again, the node did not boot its live ISO: %v", err)
	}
	t.Logf("E2E-TIMING liveiso_reboot_marker total=%.2fs", at.Sub(start).Seconds())
	r.waitOff(t, "after the live ISO ran again", 60*time.Second)
	if got, err := r.c.GetNode(ctx, n.UUID); err != nil || got.ProvisionState != "active" {
		t.Fatalf("node after power cycles: %+v %v", got, err)
	}

	r.move(ctx, t, "deleted", "available", cleanTimeout)
	r.requireEjected(t, "after undeploying the live ISO")

	// BMO's custom deploy: deploy_interface custom-agent, no image, its
	// method as a deploy step.
	sentinel := []byte("E2E-CUSTOM-DEPLOY-SENTINEL")
	writeAt(t, r.bmc.disk, 4096, sentinel)
	if _, err := r.c.PatchNode(ctx, n.UUID, PatchOp{Op: "replace", Path: "/deploy_interface", Value: "custom-agent"}); err != nil {
		t.Fatal(err)
	}
	steps := []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "args": map[string]any{}, "priority": 80}}
	start = time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+n.UUID+"/states/provision", map[string]any{"target": "active", "deploy_steps": steps}, nil); err != nil {
		t.Fatalf("custom deploy: %v", err)
	}
	got, err := r.c.WaitProvisionState(ctx, n.UUID, "active", deployTimeout)
	if err != nil {
		t.Fatalf("custom deploy: %v", err)
	}
	t.Logf("E2E-TIMING custom_agent_active total=%.2fs", time.Since(start).Seconds())
	results, _ := got.DriverInternalInfo["agent_step_results"].(map[string]any)
	var ran []string
	for k := range results {
		ran = append(ran, k)
	}
	if !slices.Equal(ran, []string{"deploy.erase_devices_metadata"}) {
		t.Errorf("steps run by the agent: %v, want only deploy.erase_devices_metadata", ran)
	}
	r.requireEjected(t, "after the custom deploy")
	if b := readAt(t, r.bmc.disk, 4096, len(sentinel)); bytes.Equal(b, sentinel) {
		t.Errorf("the sentinel is still on the disk: erase_devices_metadata did not run on it")
	}
	r.move(ctx, t, "deleted", "available", cleanTimeout)
}

// buildLiveISO makes the live ISO: the test image's kernel and marker
// initramfs, booted by isolinux with the serial console.
func buildLiveISO(ctx context.Context, t *testing.T, im *DeployImages) DeployImage {
	t.Helper()
	loaders, err := iso.FindLoaders(ramdiskDir(t))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "e2e-live.iso")
	res, err := iso.Build(ctx, iso.Spec{
		Kernel: imageKernelPath(), Initramfs: filepath.Join(im.dir, "initrd.gz"),
		Args:    []string{"console=tty0", "console=ttyS0,115200"},
		Loaders: loaders,
	}, dst)
	if err != nil {
		t.Fatalf("live ISO: %v", err)
	}
	t.Logf("live ISO %s: %d bytes in %s", dst, res.Size, res.Duration.Round(time.Millisecond))
	return DeployImage{Name: "e2e-live.iso", Path: dst, Format: "iso", Size: res.Size}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRamdiskDeployIPXE: deploy_interface ramdisk on an ipmi node with
// boot ipxe, in the lab with castiron's DHCP/iPXE: instance_info kernel
// and ramdisk (names of images castiron hosts: the test image's kernel
// and its marker initramfs) with ramdisk_kernel_arguments. The node goes
// active with no agent, the VM network-boots the instance (castiron's
// boot server hands the instance's script while the node is deployed) and
// prints the marker; powered on again it boots it again; rebuilt with a
// boot_iso, iPXE sanboots the ISO over HTTP; undeploy.
func TestRamdiskDeployIPXE(t *testing.T) {
	im := BuildDeployImages(t)
	kernel := hostedFile(t, "e2e-live-vmlinuz", imageKernelPath())
	initrd := hostedFile(t, "e2e-live-initrd.gz", filepath.Join(im.dir, "initrd.gz"))
	r := newDeployRig(t, "ramdisk-ipxe", LabOptions{}, kernel, initrd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r.provide(ctx, t, false)
	if _, err := r.c.PatchNode(ctx, r.node.UUID,
		PatchOp{Op: "replace", Path: "/deploy_interface", Value: "ramdisk"},
		PatchOp{Op: "add", Path: "/instance_info/kernel", Value: kernel.Name},
		PatchOp{Op: "add", Path: "/instance_info/ramdisk", Value: initrd.Name},
		PatchOp{Op: "add", Path: "/instance_info/ramdisk_kernel_arguments", Value: "console=tty0 console=ttyS0,115200"},
	); err != nil {
		t.Fatal(err)
	}
	run, err := r.watchDeploy(ctx, t, deployTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(run.States, "wait call-back") {
		t.Errorf("a ramdisk deploy waited for an agent: states %v", run.States)
	}
	t.Logf("E2E-TIMING ramdisk_ipxe_active total=%.2fs", run.Active.Sub(run.Start).Seconds())
	at := r.waitMarker(ctx, t, run.Start) // and the VM off: the instance's /init powers it off
	t.Logf("E2E-TIMING ramdisk_ipxe_marker total=%.2fs", at.Sub(run.Start).Seconds())

	start := time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+r.node.UUID+"/states/power", map[string]any{"target": "power on"}, nil); err != nil {
		t.Fatalf("power on: %v", err)
	}
	at = r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING ramdisk_ipxe_reboot_marker total=%.2fs", at.Sub(start).Seconds())

	// Rebuild with an ISO instead: iPXE sanboots it over HTTP.
	live := buildLiveISO(ctx, t, im)
	r.c.InstallImage(t, live)
	if _, err := r.c.PatchNode(ctx, r.node.UUID,
		PatchOp{Op: "remove", Path: "/instance_info/kernel"},
		PatchOp{Op: "remove", Path: "/instance_info/ramdisk"},
		PatchOp{Op: "remove", Path: "/instance_info/ramdisk_kernel_arguments"},
		PatchOp{Op: "add", Path: "/instance_info/boot_iso", Value: live.Name},
	); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "rebuild"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, "active", deployTimeout); err != nil {
		t.Fatal(err)
	}
	at = r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING ramdisk_ipxe_sanboot_marker total=%.2fs", at.Sub(start).Seconds())

	if err := r.c.SetProvisionState(ctx, r.node.UUID, "deleted"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, "available", cleanTimeout); err != nil {
		t.Fatal(err)
	}
}

// hostedFile describes a file to install under castiron's images.
func hostedFile(t *testing.T, name, path string) DeployImage {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return DeployImage{Name: name, Path: path, Size: st.Size()}
}
