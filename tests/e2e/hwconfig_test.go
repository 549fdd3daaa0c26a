//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestVirtualMediaBIOSClean applies a BIOS setting in a manual clean of a
// qemu VM behind castiron's Redfish emulator: the agent boots from the
// virtual media ISO and erases the disk metadata, the conductor stages
// the setting in the BMC's pending settings, reboots the VM into the
// ramdisk (the emulator applies pending settings when the VM starts), the
// returning agent's heartbeat runs the check, and the setting is read
// back from the BMC and from GET /v1/nodes/{id}/bios.
func TestVirtualMediaBIOSClean(t *testing.T) {
	r := newSimVMediaRig(t, "bios")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	n := r.enroll(ctx, t, "bios0", "redfish")
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	r.move(ctx, t, "inspect", "manageable", 120*time.Second) // the VM's NIC becomes a port
	var before map[string]map[string]any
	if err := r.c.Do(ctx, "GET", "/v1/nodes/"+n.UUID+"/bios/ProcVirtualization", nil, &before); err != nil {
		t.Fatalf("cached setting before: %v", err)
	}
	if before["ProcVirtualization"]["value"] != "Enabled" {
		t.Fatalf("before: %v", before)
	}
	offset := r.consoleSize()
	start := time.Now()
	body := map[string]any{"target": "clean", "clean_steps": []any{
		map[string]any{"interface": "deploy", "step": "erase_devices_metadata"},
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{
			map[string]any{"name": "ProcVirtualization", "value": "Disabled"}}}},
	}}
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+n.UUID+"/states/provision", body, nil); err != nil {
		t.Fatalf("clean: %v", err)
	}
	sawBIOSStep := false
	deadline := time.Now().Add(cleanTimeout)
	for {
		got, err := r.c.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			CleanStep map[string]any `json:"clean_step"`
		}
		if json.Unmarshal(got.Raw, &raw) == nil && raw.CleanStep["interface"] == "bios" {
			sawBIOSStep = true
		}
		if got.ProvisionState == "manageable" {
			break
		}
		if strings.HasSuffix(got.ProvisionState, "failed") || time.Now().After(deadline) {
			t.Fatalf("clean: %s last_error %v", got.ProvisionState, got.LastError)
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("E2E-TIMING bios_clean total=%.2fs (agent step, bios step with a reboot into the ramdisk)", took.Seconds())
	if !sawBIOSStep {
		t.Errorf("clean_step never showed the bios step")
	}
	var bios struct{ Attributes map[string]any }
	r.bmc.get(t, r.system+"/Bios", &bios)
	if bios.Attributes["ProcVirtualization"] != "Disabled" {
		t.Fatalf("BMC's current ProcVirtualization %v", bios.Attributes["ProcVirtualization"])
	}
	var pending struct{ Attributes map[string]any }
	r.bmc.get(t, r.system+"/Bios/Settings", &pending)
	if len(pending.Attributes) != 0 {
		t.Fatalf("still pending: %v", pending.Attributes)
	}
	var after map[string]map[string]any
	if err := r.c.Do(ctx, "GET", "/v1/nodes/"+n.UUID+"/bios/ProcVirtualization", nil, &after); err != nil {
		t.Fatal(err)
	}
	if after["ProcVirtualization"]["value"] != "Disabled" {
		t.Fatalf("cached after: %v", after)
	}
	var hist struct {
		History []struct {
			CreatedAt string `json:"created_at"`
			Event     string `json:"event"`
		} `json:"history"`
	}
	if err := r.c.Do(ctx, "GET", "/v1/nodes/"+n.UUID+"/history", nil, &hist); err == nil {
		for _, e := range hist.History {
			t.Logf("history %s %s", e.CreatedAt, e.Event)
		}
	}
	r.logBoot(t, offset, start)
	r.waitOff(t, "after cleaning", 60*time.Second)
	r.requireEjected(t, "after cleaning")
}
