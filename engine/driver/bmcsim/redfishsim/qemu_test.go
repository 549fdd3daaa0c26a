package redfishsim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/redfish"
)

// requireQEMU skips without qemu (fails under CI=true, where tests/deps.sh
// installs it).
func requireQEMU(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-system-x86_64 is not installed (tests/deps.sh installs qemu-system-x86)")
		}
		t.Skip("qemu-system-x86_64 is not installed")
	}
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// bootIndex returns the bootindex qemu's command line gives the device
// whose -device argument contains what.
func bootIndex(cmd, what string) string {
	for _, f := range strings.Fields(cmd) {
		if strings.Contains(f, what) {
			if i := strings.Index(f, "bootindex="); i >= 0 {
				return strings.Split(f[i+len("bootindex="):], ",")[0]
			}
		}
	}
	return ""
}

// TestQEMUMachine drives a real qemu TCG VM through the emulator with
// castiron's redfish driver: power on/off/reboot are qemu processes, the
// boot override becomes the first bootindex at the next start (Once used
// up by it), virtual media is downloaded and changed in the running VM's
// CD drive through QMP, ejected likewise.
func TestQEMUMachine(t *testing.T) {
	requireQEMU(t)
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk0.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:5e:00:01"
	q, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{Dir: dir, Name: "rfsim-test", MemMB: 128,
		Disks: []redfishsim.QEMUDisk{{Path: disk, Serial: "SIMDISK0"}},
		NICs:  []redfishsim.QEMUNIC{{MAC: mac, NoROM: true}}})
	if err != nil {
		t.Fatal(err)
	}
	s, url := bmc(t, redfishsim.Config{Machine: q, BootMode: "Legacy", MACs: []string{mac}})
	d := newDriver(t, redfish.Config{})
	ctx, n := ctxT(t, 2*time.Minute), node(url, s)

	iso := make([]byte, 64<<10)
	copy(iso[0x8001:], "CD001")
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(iso) }))
	defer img.Close()

	start := time.Now()
	if err := d.SetPowerState(ctx, n, driver.PowerOn, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING power on (qemu started, QMP up): %v", time.Since(start).Round(time.Millisecond))
	pid := q.PID()
	if pid == 0 {
		t.Fatal("no qemu after power on")
	}
	if cmd := cmdline(pid); bootIndex(cmd, "virtio-blk-pci") != "1" {
		t.Fatalf("default boot order: disk not first: %s", cmd)
	}

	start = time.Now()
	if err := d.InsertMedia(ctx, n, driver.MediaCDROM, img.URL+"/boot.iso"); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING InsertMedia (64 KiB, running VM): %v", time.Since(start).Round(time.Millisecond))
	block := func() string {
		out, err := q.QMP(ctx, "query-block", nil)
		if err != nil {
			t.Fatal(err)
		}
		var devs []struct {
			QDev     string `json:"qdev"`
			Inserted *struct {
				File string `json:"file"`
			} `json:"inserted"`
		}
		_ = json.Unmarshal(out, &devs)
		for _, d := range devs {
			if strings.Contains(d.QDev, "cdrom0") {
				if d.Inserted == nil {
					return ""
				}
				return d.Inserted.File
			}
		}
		t.Fatalf("no cdrom0 in %s", out)
		return ""
	}
	if f := block(); !strings.HasPrefix(f, dir) && !strings.Contains(f, "redfishsim-media") {
		t.Fatalf("CD after InsertMedia holds %q", f)
	}
	if err := d.SetBootDevice(ctx, n, driver.BootCDROM, false); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := d.SetPowerState(ctx, n, driver.Rebooting, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING reboot (ForceOff, On: a new qemu): %v", time.Since(start).Round(time.Millisecond))
	if q.PID() == pid || q.PID() == 0 {
		t.Fatalf("reboot: pid %d -> %d", pid, q.PID())
	}
	cmd := cmdline(q.PID())
	if bootIndex(cmd, "ide-cd") != "1" || !strings.Contains(cmd, "media=cdrom,readonly=on,format=raw,file=") {
		t.Fatalf("boot from CD once: %s", cmd)
	}
	if b, _ := q.LastBoot(); b.Target != "Cd" {
		t.Fatalf("last boot %+v", b)
	}
	if bd, _ := d.BootDevice(ctx, n); bd.Persistent != nil {
		t.Fatalf("Once not used up by the boot: %+v", bd)
	}
	if err := d.EjectMedia(ctx, n, driver.MediaCDROM); err != nil {
		t.Fatal(err)
	}
	if f := block(); f != "" {
		t.Fatalf("CD after eject holds %q", f)
	}
	if err := d.SetBootDevice(ctx, n, driver.BootPXE, true); err != nil {
		t.Fatal(err)
	}
	if err := d.SetPowerState(ctx, n, driver.Rebooting, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if cmd := cmdline(q.PID()); bootIndex(cmd, "virtio-net-pci") != "1" {
		t.Fatalf("boot from the network: %s", cmd)
	}
	res, err := d.InspectHardware(ctx, n)
	if err != nil || len(res.MACs) != 1 || res.MACs[0] != mac {
		t.Fatalf("inspection: %+v %v", res, err)
	}
	start = time.Now()
	if err := d.SetPowerState(ctx, n, driver.PowerOff, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING power off (QMP quit): %v", time.Since(start).Round(time.Millisecond))
	if q.PID() != 0 || s.PowerState() != "Off" {
		t.Fatalf("after power off: pid %d state %s", q.PID(), s.PowerState())
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
