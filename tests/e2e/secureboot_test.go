//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"
)

// TestVirtualMediaSecureBootDeploy: a UEFI node behind castiron's own
// Redfish emulator is deployed with `secure_boot: true` in its instance
// capabilities. The agent boots with Secure Boot off (castiron's VM kernel
// is not signed); at the end of the deploy castiron turns it on through
// the BMC (Ironic's configure_secure_boot_if_needed), so the instance's
// boot runs on firmware that enforces it with Microsoft's keys: Debian's
// signed shim, GRUB and kernel boot, and the kernel reports "Secure boot
// enabled". Undeploy turns it off again before the cleaning boot, which
// would not get past the firmware otherwise.
func TestVirtualMediaSecureBootDeploy(t *testing.T) {
	r := newSimVMediaRig(t, "uefi")
	img := r.im.SecureBoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	n := r.enroll(ctx, t, "vmedia-secureboot", "redfish")
	if _, err := r.c.PatchNode(ctx, n.UUID,
		PatchOp{Op: "add", Path: "/properties/capabilities", Value: "boot_mode:uefi,secure_boot:true"}); err != nil {
		t.Fatal(err)
	}
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	r.move(ctx, t, "provide", "available", cleanTimeout)
	r.waitOff(t, "after cleaning", 60*time.Second)
	if sb := r.secureBoot(t); sb.SecureBootEnable {
		t.Fatalf("secure boot on before the deploy: %+v", sb)
	}

	r.c.InstallImage(t, img)
	if _, err := r.c.PatchNode(ctx, n.UUID,
		PatchOp{Op: "add", Path: "/instance_info/image_source", Value: img.Name},
		PatchOp{Op: "add", Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		PatchOp{Op: "add", Path: "/instance_info/image_os_hash_value", Value: img.SHA256},
		PatchOp{Op: "add", Path: "/instance_info/image_disk_format", Value: img.Format},
		PatchOp{Op: "add", Path: "/instance_info/capabilities", Value: map[string]any{"boot_mode": "uefi", "secure_boot": "true"}},
	); err != nil {
		t.Fatalf("set instance_info: %v", err)
	}
	offset := r.consoleSize()
	start := time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+n.UUID+"/states/provision", map[string]any{"target": "active"}, nil); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, n.UUID, "active", deployTimeout); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	activeAt := time.Since(start)
	marker, err := r.waitConsoleFrom(ctx, offset, markerTimeout, r.im.Marker)
	if err != nil {
		t.Fatalf("the signed image did not boot under Secure Boot: %v", err)
	}
	if _, err := r.waitConsoleFrom(ctx, offset, time.Second, "Secure boot enabled"); err != nil {
		t.Errorf("the instance's kernel did not report Secure Boot on: %v", err)
	}
	if sb := r.secureBoot(t); !sb.SecureBootEnable || sb.SecureBootCurrentBoot != "Enabled" {
		t.Errorf("BMC after the deploy: %+v, want SecureBootEnable true and the current boot Enabled", sb)
	}
	t.Log(TimingLine("vmedia_deploy_secureboot", start, start.Add(activeAt), append(r.phases(ctx, offset, start, start.Add(activeAt)),
		Phase{Name: "marker", At: marker, Source: "console"})))
	r.waitOff(t, "after the deployed image ran", 60*time.Second)

	// Undeploy: secure boot off before the cleaning boot of the agent.
	r.move(ctx, t, "deleted", "available", cleanTimeout)
	if sb := r.secureBoot(t); sb.SecureBootEnable {
		t.Errorf("BMC after undeploy: %+v, want SecureBootEnable false", sb)
	}
}

type secureBootState struct {
	SecureBootEnable      bool
	SecureBootCurrentBoot string
}

// secureBoot reads the emulator's SecureBoot resource.
func (r *vmediaRig) secureBoot(t *testing.T) secureBootState {
	t.Helper()
	var sb secureBootState
	r.bmc.get(t, r.system+"/SecureBoot", &sb)
	return sb
}
