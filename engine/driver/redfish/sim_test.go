package redfish

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/storage"
)

// TestConductorWithRedfishSim is TestConductorWithSushyTools against
// castiron's own emulator (engine/driver/bmcsim/redfishsim) in qemu mode:
// the same walk through the real conductor (enroll, manage, power
// on/reboot/off read back from the qemu process, boot device as the first
// bootindex of the next start, out-of-band inspection creating a port with
// the VM's MAC, the virtual media primitives, a wrong password), with
// sessions (the emulator has a SessionService) and virtual media under the
// Manager, as iDRAC and iLO have it. It runs wherever qemu is installed: no
// root, no libvirt, no third-party emulator. Timings are logged, not
// asserted.
func TestConductorWithRedfishSim(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-system-x86_64 is not installed (tests/deps.sh installs qemu-system-x86)")
		}
		t.Skip("qemu-system-x86_64 is not installed")
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk0.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 1<<30); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:7f:00:11"
	vm, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{Dir: dir, Name: "rfsim-conductor", MemMB: 256,
		Disks: []redfishsim.QEMUDisk{{Path: disk, Serial: "RFDISK0"}},
		NICs:  []redfishsim.QEMUNIC{{MAC: mac, NoROM: true}}})
	if err != nil {
		t.Fatal(err)
	}
	bmc, err := redfishsim.New(redfishsim.Config{Machine: vm, BootMode: "Legacy", MACs: []string{mac}, MemoryGiB: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 5*time.Minute)
	served := make(chan error, 1)
	sctx, stopServe := context.WithCancel(context.Background())
	go func() { served <- bmc.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stopServe()
		<-served
		_ = bmc.Close(context.Background())
	})
	url := "http://" + ln.Addr().String()

	d := newTestDriver(t, Config{RequestTimeout: 60 * time.Second, PollInterval: 100 * time.Millisecond})
	h := startConductor(t, d)
	di := map[string]any{"redfish_address": url, "redfish_username": bmc.User(), "redfish_password": bmc.Password()}

	start := time.Now()
	n := h.enroll(di)
	h.provision(n.UUID, "manage")
	got := h.wait(n.UUID, 60*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if got.ProvisionState != "manageable" || deref(got.PowerState) != driver.PowerOff {
		t.Fatalf("manage: %q power %v last_error %v", got.ProvisionState, got.PowerState, got.LastError)
	}
	t.Logf("TIMING enroll -> manageable: %v", time.Since(start).Round(time.Millisecond))

	power := func(target string, running bool) {
		t.Helper()
		pid := vm.PID()
		start := time.Now()
		if err := h.c.SetPower(ctx, n.UUID, target, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: driver.PowerOn, false: driver.PowerOff}[running]
		got := h.wait(n.UUID, 90*time.Second, func(n *storage.Node) bool { return n.TargetPowerState == nil })
		if deref(got.PowerState) != want || got.LastError != nil {
			t.Fatalf("%s: power %v last_error %v", target, got.PowerState, deref(got.LastError))
		}
		if (vm.PID() != 0) != running {
			t.Fatalf("%s: qemu pid %d", target, vm.PID())
		}
		if target == driver.Rebooting && (vm.PID() == pid || pid == 0) {
			t.Fatalf("reboot: qemu pid %d -> %d, want a new process", pid, vm.PID())
		}
		t.Logf("TIMING %s through the conductor: %v", target, time.Since(start).Round(time.Millisecond))
	}
	power(driver.PowerOn, true)
	power(driver.Rebooting, true)
	power(driver.PowerOff, false)

	// The boot device is the first bootindex of the next start.
	bootsFirstAt := func(dev string) {
		t.Helper()
		if err := d.SetPowerState(ctx, driver.Node{UUID: n.UUID, DriverInfo: di, Properties: map[string]any{}}, driver.Rebooting, time.Minute); err != nil {
			t.Fatal(err)
		}
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(vm.PID()) + "/cmdline")
		for _, f := range strings.Split(string(cmd), "\x00") {
			if strings.HasPrefix(f, dev) && strings.Contains(f, "bootindex=1") {
				return
			}
		}
		t.Fatalf("qemu does not boot %s first: %s", dev, strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	if err := h.c.SetBootDevice(ctx, n.UUID, driver.BootPXE, true); err != nil {
		t.Fatal(err)
	}
	if bd, err := h.c.BootDevice(ctx, n.UUID); err != nil || bd.BootDevice != driver.BootPXE {
		t.Fatalf("boot device %+v %v", bd, err)
	}
	bootsFirstAt("virtio-net-pci")
	if err := h.c.SetBootDevice(ctx, n.UUID, driver.BootDisk, true); err != nil {
		t.Fatal(err)
	}
	bootsFirstAt("virtio-blk-pci")
	dn := driver.Node{UUID: n.UUID, DriverInfo: di, Properties: map[string]any{}}
	if err := d.SetPowerState(ctx, dn, driver.PowerOff, time.Minute); err != nil {
		t.Fatal(err)
	}

	h.provision(n.UUID, "inspect")
	got = h.wait(n.UUID, 60*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "inspecting" })
	if got.ProvisionState != "manageable" {
		t.Fatalf("inspect: %q last_error %v", got.ProvisionState, deref(got.LastError))
	}
	ports, err := h.st.ListPorts(ctx, storage.PortQuery{NodeUUID: &n.UUID})
	if err != nil || len(ports) != 1 || ports[0].Address != mac {
		t.Fatalf("ports after inspection: %v %+v", err, ports)
	}
	p := got.Properties
	// The emulator's RAID controller reports four 480 GB drives.
	if p["cpu_arch"] != "x86_64" || p["memory_mb"] != float64(1024) || p["local_gb"] != float64(445) {
		t.Fatalf("properties after inspection: %v", p)
	}
	t.Logf("inspected properties: %v", p)

	// Virtual media: the emulator downloads the image and puts it in the
	// VM's CD drive (at the next start: the VM is off).
	iso := make([]byte, 64<<10)
	copy(iso[0x8001:], "CD001")
	isoLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(iso)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(isoLn) }()
	defer srv.Close()
	isoURL := "http://" + isoLn.Addr().String() + "/castiron-test.iso"
	start = time.Now()
	if err := d.InsertMedia(ctx, dn, driver.MediaCDROM, isoURL); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING InsertMedia (64 KiB image): %v", time.Since(start).Round(time.Millisecond))
	slots, err := d.MediaState(ctx, dn)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(slots, func(s driver.MediaSlot) bool { return s.Device == driver.MediaCDROM })
	if i < 0 || !slots[i].Inserted || slots[i].Image != isoURL || !strings.Contains(slots[i].Path, "/Managers/") {
		t.Fatalf("media state after insert: %+v", slots)
	}
	if err := d.SetBootDevice(ctx, dn, driver.BootCDROM, false); err != nil {
		t.Fatal(err)
	}
	bd, err := d.BootDevice(ctx, dn)
	if err != nil || bd.BootDevice != driver.BootCDROM || bd.Persistent == nil || *bd.Persistent {
		t.Fatalf("boot device after cdrom once: %+v %v", bd, err)
	}
	bootsFirstAt("ide-cd")
	if bd, _ := d.BootDevice(ctx, dn); bd.Persistent != nil {
		t.Fatalf("the Once override outlived its boot: %+v", bd)
	}
	if err := d.EjectMedia(ctx, dn, driver.MediaCDROM); err != nil {
		t.Fatal(err)
	}
	if slots, err = d.MediaState(ctx, dn); err != nil || slots[i].Inserted {
		t.Fatalf("media state after eject: %+v %v", slots, err)
	}
	if err := d.SetPowerState(ctx, dn, driver.PowerOff, time.Minute); err != nil {
		t.Fatal(err)
	}

	logDriverTimings(t, ctx, d, dn, 10*time.Microsecond, "Reset On: qemu started, then PowerState read until On")

	bad := h.enroll(map[string]any{"redfish_address": url, "redfish_username": bmc.User(), "redfish_password": "wrong"})
	h.provision(bad.UUID, "manage")
	b := h.wait(bad.UUID, 60*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if b.ProvisionState != "enroll" || !strings.Contains(deref(b.LastError), "HTTP 401") {
		t.Fatalf("wrong password: %q %q", b.ProvisionState, deref(b.LastError))
	}
	t.Logf("wrong password: %s", deref(b.LastError))
}
