package redfish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/fake"
	"castiron/engine/enginetest"
	"castiron/storage"
)

// Firmware and hardware RAID steps through the real conductor (manual
// cleaning without the ramdisk) against castiron's emulator in state-only
// mode: the happy paths, and every bad input or bad BMC of issue 27 item 5
// ending in clean failed with a clear last_error, no reservation left, in
// bounded time.

type fwHarness struct {
	*harness
	bmc    *redfishsim.Server
	node   *storage.Node
	images string // URL of the firmware images the operator names
	staged string // castiron's staging directory
}

// stepTimeout bounds every step here: an endless BMC task fails the
// clean after it.
const stepTimeout = 2 * time.Second

func startFWRAID(t *testing.T, cfg redfishsim.Config, imgs map[string]redfishsim.Image) *fwHarness {
	t.Helper()
	bmc, n := startSim(t, cfg)
	imgURL := serveImages(t, imgs)
	staged := t.TempDir()
	stageSrv := httptest.NewServer(http.FileServer(http.Dir(staged)))
	t.Cleanup(stageSrv.Close)
	d := fastDriver(t)
	c, st := enginetest.Start(t, engine.Config{Hostname: "fwraid-test", PowerSyncInterval: time.Hour,
		StepPollInterval: 20 * time.Millisecond, StepTimeout: stepTimeout,
		Firmware: &engine.FirmwareConfig{Dir: staged, BaseURL: stageSrv.URL}},
		engine.NewFakeHardware(fake.New()), engine.NewRedfishHardware(d, Properties()))
	h := &fwHarness{harness: &harness{t: t, c: c, st: st}, bmc: bmc, images: imgURL, staged: staged}
	h.node = h.enroll(n.DriverInfo)
	if h.node.FirmwareInterface != "redfish" || h.node.RAIDInterface != "redfish" {
		t.Fatalf("defaults: firmware %q raid %q", h.node.FirmwareInterface, h.node.RAIDInterface)
	}
	h.provision(h.node.UUID, "manage")
	h.wait(h.node.UUID, 10*time.Second, func(n *storage.Node) bool { return n.ProvisionState == "manageable" })
	return h
}

// clean runs a manual clean without the ramdisk and waits for its end.
func (h *fwHarness) clean(steps ...map[string]any) (*storage.Node, time.Duration) {
	h.t.Helper()
	yes := true
	start := time.Now()
	if err := h.c.Provision(context.Background(), h.node.UUID, engine.ProvisionRequest{Target: "clean", CleanSteps: steps, DisableRamdisk: &yes}); err != nil {
		h.t.Fatalf("clean: %v", err)
	}
	n := h.wait(h.node.UUID, 20*time.Second, func(n *storage.Node) bool {
		return n.ProvisionState == "manageable" || n.ProvisionState == "clean failed"
	})
	return n, time.Since(start)
}

func (h *fwHarness) mustFail(n *storage.Node, took time.Duration, want string) {
	h.t.Helper()
	if n.ProvisionState != "clean failed" || !strings.Contains(deref(n.LastError), want) || n.Reservation != nil {
		h.t.Fatalf("state %q last_error %q reservation %v; want clean failed with %q", n.ProvisionState, deref(n.LastError), n.Reservation, want)
	}
	if took > stepTimeout+5*time.Second {
		h.t.Fatalf("failure took %v", took)
	}
	h.t.Logf("clean failed after %v: %s", took.Round(time.Millisecond), deref(n.LastError))
	// Back to manageable for the next case, as an operator would.
	_, _ = h.st.UpdateNode(context.Background(), n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.Maintenance = false
		n.MaintenanceReason = nil
		n.Fault = nil
		return nil, nil
	})
	h.provision(n.UUID, "manage")
	h.wait(n.UUID, 10*time.Second, func(n *storage.Node) bool { return n.ProvisionState == "manageable" })
}

func fwStep(settings ...map[string]any) map[string]any {
	s := make([]any, len(settings))
	for i, x := range settings {
		s[i] = x
	}
	return map[string]any{"interface": "firmware", "step": "update", "args": map[string]any{"settings": s}}
}

func imageSum(img redfishsim.Image) string {
	b, _ := json.Marshal(img)
	b = append(b, '\n') // json.Encoder's newline, as serveImages writes it
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestFirmwareUpdateStep(t *testing.T) {
	bmcImg := redfishsim.Image{Component: "BMC", Version: "2.0.0"}
	biosImg := redfishsim.Image{Component: "BIOS", Version: "P80 v2.00"}
	h := startFWRAID(t, redfishsim.Config{}, map[string]redfishsim.Image{
		"bmc.bin": bmcImg, "bios.bin": biosImg,
		"fail.bin": {Fail: "flash verification failed"}, "never.bin": {Never: true},
	})
	// BMC then BIOS, checksums verified by castiron; the BIOS update
	// reboots the node to apply.
	n, took := h.clean(fwStep(
		map[string]any{"component": "bmc", "url": h.images + "/bmc.bin", "checksum": imageSum(bmcImg)},
		map[string]any{"component": "bios", "url": h.images + "/bios.bin", "checksum": imageSum(biosImg)}))
	if n.ProvisionState != "manageable" {
		t.Fatalf("clean: %s %s", n.ProvisionState, deref(n.LastError))
	}
	t.Logf("bmc+bios firmware update clean: %v", took)
	inv := h.bmc.Firmware()
	if inv[0].Version != "P80 v2.00" || inv[1].Version != "2.0.0" {
		t.Fatalf("BMC inventory after the update: %+v", inv)
	}
	comps, err := h.st.ListFirmwareComponents(context.Background(), n.UUID)
	if err != nil || len(comps) != 3 {
		t.Fatalf("cached components %+v %v", comps, err)
	}
	for _, c := range comps {
		if c.Component == "bmc" && (*c.CurrentVersion != "2.0.0" || c.InitialVersion == "2.0.0") {
			t.Fatalf("bmc component %+v", c)
		}
	}
	if left, _ := os.ReadDir(h.staged); len(left) != 0 {
		t.Fatalf("staged images left: %v", left)
	}

	// Item 5: each bad case fails the clean with a clear last_error.
	n, took = h.clean(fwStep(map[string]any{"component": "bmc", "url": h.images + "/bmc.bin", "checksum": "sha256:" + strings.Repeat("0", 64)}))
	h.mustFail(n, took, "expected "+strings.Repeat("0", 64))
	n, took = h.clean(fwStep(map[string]any{"component": "bmc", "url": h.images + "/fail.bin"}))
	h.mustFail(n, took, "flash verification failed")
	n, took = h.clean(fwStep(map[string]any{"component": "bmc", "url": h.images + "/never.bin"}))
	h.mustFail(n, took, "Timeout reached")
	n, took = h.clean(fwStep(map[string]any{"component": "bmc", "url": h.images + "/missing.bin"}))
	h.mustFail(n, took, "HTTP 404")
	// An image server that never answers: bounded by the step timeout.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	n, took = h.clean(fwStep(map[string]any{"component": "bmc", "url": hang.URL + "/bmc.bin"}))
	h.mustFail(n, took, "context deadline exceeded")
	if left, _ := os.ReadDir(h.staged); len(left) != 1 {
		// the endless task's image stays until the sweep (the step
		// timed out in the framework, not in the step)
		t.Logf("staged after failures: %d", len(left))
	}
	_ = filepath.Join
}

func TestFirmwareUpdateNoUpdateService(t *testing.T) {
	h := startFWRAID(t, redfishsim.Config{NoUpdateService: true}, map[string]redfishsim.Image{"bmc.bin": {Component: "BMC", Version: "2"}})
	n, took := h.clean(fwStep(map[string]any{"component": "bmc", "url": h.images + "/bmc.bin"}))
	h.mustFail(n, took, "no UpdateService")
}

func raidStep(name string, args map[string]any) map[string]any {
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{"interface": "raid", "step": name, "args": args}
}

func TestRAIDSteps(t *testing.T) {
	h := startFWRAID(t, redfishsim.Config{RAIDTypes: []string{"RAID0", "RAID1"}}, nil)
	ctx := context.Background()
	if err := h.c.SetTargetRAIDConfig(ctx, h.node.UUID, map[string]any{"logical_disks": []any{
		map[string]any{"raid_level": "1", "size_gb": float64(100), "is_root_volume": true}}}); err != nil {
		t.Fatal(err)
	}
	n, took := h.clean(raidStep("create_configuration", nil))
	if n.ProvisionState != "manageable" || len(h.bmc.Volumes()) != 1 {
		t.Fatalf("create: %s %s volumes %+v", n.ProvisionState, deref(n.LastError), h.bmc.Volumes())
	}
	lds, _ := n.RAIDConfig["logical_disks"].([]any)
	if len(lds) != 1 || n.RAIDConfig["last_updated"] == nil {
		t.Fatalf("raid_config %v", n.RAIDConfig)
	}
	if ld := lds[0].(map[string]any); ld["raid_level"] != "1" || ld["size_gb"] != float64(100) || ld["controller"] != "1" {
		t.Fatalf("logical disk %v", ld)
	}
	t.Logf("create_configuration clean: %v; raid_config %v", took, n.RAIDConfig)
	n, took = h.clean(raidStep("delete_configuration", nil))
	if n.ProvisionState != "manageable" || len(h.bmc.Volumes()) != 0 || len(n.RAIDConfig["logical_disks"].([]any)) != 0 {
		t.Fatalf("delete: %s %s volumes %+v raid_config %v", n.ProvisionState, deref(n.LastError), h.bmc.Volumes(), n.RAIDConfig)
	}
	t.Logf("delete_configuration clean: %v", took)

	// Redfish builds no SCSI volumes: refused when the target is set.
	if err := h.c.SetTargetRAIDConfig(ctx, h.node.UUID, map[string]any{"logical_disks": []any{
		map[string]any{"raid_level": "1", "size_gb": float64(100), "interface_type": "scsi"}}}); err == nil || !strings.Contains(err.Error(), "interface type `scsi` not supported by Redfish RAID") {
		t.Fatalf("scsi target: %v", err)
	}
	// A RAID 5 this controller cannot build.
	if err := h.c.SetTargetRAIDConfig(ctx, h.node.UUID, map[string]any{"logical_disks": []any{
		map[string]any{"raid_level": "5", "size_gb": float64(100)}}}); err != nil {
		t.Fatal(err)
	}
	n, took = h.clean(raidStep("create_configuration", nil))
	h.mustFail(n, took, "not supported by controller 1")
	// More than the disks hold.
	_ = h.c.SetTargetRAIDConfig(ctx, h.node.UUID, map[string]any{"logical_disks": []any{
		map[string]any{"raid_level": "1", "size_gb": float64(4000)}}})
	n, took = h.clean(raidStep("create_configuration", nil))
	h.mustFail(n, took, "failed to find matching physical disks")
	// No target at all.
	_ = h.c.SetTargetRAIDConfig(ctx, h.node.UUID, map[string]any{})
	n, took = h.clean(raidStep("create_configuration", nil))
	h.mustFail(n, took, "has no target RAID configuration")
	if len(h.bmc.Volumes()) != 0 {
		t.Fatalf("volumes left: %+v", h.bmc.Volumes())
	}
}

func TestRAIDStepsBadBMC(t *testing.T) {
	t.Run("no storage", func(t *testing.T) {
		h := startFWRAID(t, redfishsim.Config{NoStorage: true}, nil)
		_ = h.c.SetTargetRAIDConfig(context.Background(), h.node.UUID, map[string]any{"logical_disks": []any{
			map[string]any{"raid_level": "1", "size_gb": float64(100)}}})
		n, took := h.clean(raidStep("create_configuration", nil))
		h.mustFail(n, took, "reports no Storage")
		n, took = h.clean(raidStep("delete_configuration", nil))
		h.mustFail(n, took, "reports no Storage")
	})
	t.Run("volume task never ends", func(t *testing.T) {
		h := startFWRAID(t, redfishsim.Config{Flavour: redfishsim.IDRAC, TaskDelay: time.Hour}, nil)
		_ = h.c.SetTargetRAIDConfig(context.Background(), h.node.UUID, map[string]any{"logical_disks": []any{
			map[string]any{"raid_level": "1", "size_gb": float64(100)}}})
		n, took := h.clean(raidStep("create_configuration", nil))
		h.mustFail(n, took, "did not finish within")
	})
}

// TestFirmwareServiceStep: firmware.update as a service step (API 1.87)
// on an active node without the ramdisk: the node returns to active, or
// to service failed with the BMC's reason.
func TestFirmwareServiceStep(t *testing.T) {
	img := redfishsim.Image{Component: "BMC", Version: "3.0.0"}
	h := startFWRAID(t, redfishsim.Config{}, map[string]redfishsim.Image{"bmc.bin": img, "fail.bin": {Fail: "bad signature"}})
	ctx := context.Background()
	active := func() {
		if _, err := h.st.UpdateNode(ctx, h.node.UUID, func(n *storage.Node) (*storage.Event, error) {
			n.ProvisionState, n.Maintenance, n.MaintenanceReason, n.Fault, n.LastError = "active", false, nil, nil, nil
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	service := func(url string) *storage.Node {
		t.Helper()
		active()
		if err := h.c.Provision(ctx, h.node.UUID, engine.ProvisionRequest{Target: "service", DisableRamdisk: &yes,
			ServiceSteps: []map[string]any{fwStep(map[string]any{"component": "bmc", "url": url})}}); err != nil {
			t.Fatalf("service: %v", err)
		}
		return h.wait(h.node.UUID, 20*time.Second, func(n *storage.Node) bool {
			return n.ProvisionState == "active" || n.ProvisionState == "service failed"
		})
	}
	if n := service(h.images + "/bmc.bin"); n.ProvisionState != "active" || h.bmc.Firmware()[1].Version != "3.0.0" {
		t.Fatalf("service: %s %s, BMC firmware %+v", n.ProvisionState, deref(n.LastError), h.bmc.Firmware())
	}
	if n := service(h.images + "/fail.bin"); n.ProvisionState != "service failed" || !strings.Contains(deref(n.LastError), "bad signature") {
		t.Fatalf("failing service: %s %s", n.ProvisionState, deref(n.LastError))
	} else {
		t.Logf("service failed: %s", deref(n.LastError))
	}
}

// TestFirmwareComponentsCached: verification (enroll -> manageable) caches
// the BMC's firmware components; an out-of-band inspection refreshes them
// (Ironic caches them after inspection), recording a version flashed
// meanwhile as last_version_flashed.
func TestFirmwareComponentsCached(t *testing.T) {
	h := startFWRAID(t, redfishsim.Config{}, map[string]redfishsim.Image{"nic.bin": {Component: "NIC1", Version: "21.0.0"}})
	ctx := context.Background()
	comps, err := h.st.ListFirmwareComponents(ctx, h.node.UUID)
	if err != nil || len(comps) != 3 || comps[2].Component != "nic:SIMNICNIC.Slot.1" || *comps[2].Vendor != "Contoso" {
		t.Fatalf("after verify: %+v %v", comps, err)
	}
	// Flashed behind castiron's back, then inspected.
	d := fastDriver(t)
	n, _ := h.st.GetNode(ctx, h.node.UUID)
	dn := driverNodeOf(n)
	task, err := d.StartFirmwareUpdate(ctx, dn, driver.FirmwareImage{Component: "nic:SIMNICNIC.Slot.1", URL: h.images + "/nic.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := waitFirmwareTask(ctxT(t, 10*time.Second), d, dn, task); err != nil || st.Failed {
		t.Fatalf("%+v %v", st, err)
	}
	h.provision(h.node.UUID, "inspect")
	h.wait(h.node.UUID, 10*time.Second, func(n *storage.Node) bool { return n.ProvisionState == "manageable" })
	comps, _ = h.st.ListFirmwareComponents(ctx, h.node.UUID)
	if nic := comps[2]; *nic.CurrentVersion != "21.0.0" || nic.InitialVersion != "20.8.4" || *nic.LastVersionFlashed != "21.0.0" {
		t.Fatalf("after inspection: %+v", nic)
	}
}

func driverNodeOf(n *storage.Node) driver.Node {
	return driver.Node{UUID: n.UUID, DriverInfo: n.DriverInfo}
}

// TestFirmwareUpdateWait: a setting's "wait" holds the step that many
// seconds after the BMC's task before it goes on (the BMC settling).
func TestFirmwareUpdateWait(t *testing.T) {
	h := startFWRAID(t, redfishsim.Config{}, map[string]redfishsim.Image{"bmc.bin": {Component: "BMC", Version: "2.1"}})
	n, took := h.clean(fwStep(map[string]any{"component": "bmc", "url": h.images + "/bmc.bin", "wait": float64(1)}))
	if n.ProvisionState != "manageable" || took < time.Second {
		t.Fatalf("%s %s after %v (want a wait of 1 s)", n.ProvisionState, deref(n.LastError), took)
	}
	t.Logf("update with wait 1: %v", took)
}
