package redfish

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/redfish/redfishlab"
	"castiron/storage"
)

// TestConductorWithSushyTools drives the redfish hardware type through the
// real conductor against OpenStack's sushy-tools emulator and its libvirt
// backend (a qemu TCG domain): enroll, manage (credentials checked), power
// on/off/reboot read back from libvirt itself, boot device, out-of-band
// inspection creating a port with the VM's MAC, the virtual media
// primitives, and a wrong password. Timings are logged for the README, not
// asserted.
func TestConductorWithSushyTools(t *testing.T) {
	lab := redfishlab.Start(t)
	d := newTestDriver(t, Config{RequestTimeout: 60 * time.Second, PollInterval: 100 * time.Millisecond})
	h := startConductor(t, d)
	ctx := ctxT(t, 5*time.Minute)
	di := map[string]any{"redfish_address": lab.URL, "redfish_username": lab.User, "redfish_password": lab.Pass}

	start := time.Now()
	n := h.enroll(di)
	h.provision(n.UUID, "manage")
	got := h.wait(n.UUID, 60*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if got.ProvisionState != "manageable" || deref(got.PowerState) != driver.PowerOff {
		t.Fatalf("manage: %q power %v last_error %v", got.ProvisionState, got.PowerState, got.LastError)
	}
	t.Logf("TIMING enroll -> manageable: %v", time.Since(start).Round(time.Millisecond))

	domstate := func() string { return lab.Virsh(t, "domstate", lab.VM) }
	power := func(target, libvirt string) {
		t.Helper()
		start := time.Now()
		if err := h.c.SetPower(ctx, n.UUID, target, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{driver.PowerOn: driver.PowerOn, driver.Rebooting: driver.PowerOn}[target]
		if want == "" {
			want = driver.PowerOff
		}
		got := h.wait(n.UUID, 90*time.Second, func(n *storage.Node) bool { return n.TargetPowerState == nil })
		if deref(got.PowerState) != want || got.LastError != nil {
			t.Fatalf("%s: power %v last_error %v", target, got.PowerState, deref(got.LastError))
		}
		if s := domstate(); s != libvirt {
			t.Fatalf("%s: libvirt says %q, want %q", target, s, libvirt)
		}
		t.Logf("TIMING %s through the conductor: %v", target, time.Since(start).Round(time.Millisecond))
	}
	power(driver.PowerOn, "running")
	power(driver.Rebooting, "running")
	power(driver.PowerOff, "shut off")

	if err := h.c.SetBootDevice(ctx, n.UUID, driver.BootPXE, true); err != nil {
		t.Fatal(err)
	}
	if bd, err := h.c.BootDevice(ctx, n.UUID); err != nil || bd.BootDevice != driver.BootPXE {
		t.Fatalf("boot device %+v %v", bd, err)
	}
	if xml := lab.Virsh(t, "dumpxml", lab.VM); !bootsFirst(xml, "<interface") {
		t.Fatalf("libvirt boot order after pxe: %s", xml)
	}
	if err := h.c.SetBootDevice(ctx, n.UUID, driver.BootDisk, true); err != nil {
		t.Fatal(err)
	}
	if xml := lab.Virsh(t, "dumpxml", lab.VM); !bootsFirst(xml, "<disk type='file' device='disk'>") {
		t.Fatalf("libvirt boot order after disk: %s", xml)
	}

	h.provision(n.UUID, "inspect")
	got = h.wait(n.UUID, 60*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "inspecting" })
	if got.ProvisionState != "manageable" {
		t.Fatalf("inspect: %q last_error %v", got.ProvisionState, deref(got.LastError))
	}
	ports, err := h.st.ListPorts(ctx, storage.PortQuery{NodeUUID: &n.UUID})
	if err != nil || len(ports) != 1 || ports[0].Address != lab.VMMAC {
		t.Fatalf("ports after inspection: %v %+v", err, ports)
	}
	p := got.Properties
	// sushy-tools' libvirt backend reports no Storage (500) and an empty
	// SimpleStorage for a file-backed disk: local_gb is 0, as Ironic gets.
	if p["cpu_arch"] != "x86_64" || p["memory_mb"] != float64(1024) || p["local_gb"] != float64(0) {
		t.Fatalf("properties after inspection: %v", p)
	}
	t.Logf("inspected properties: %v", p)

	// The driver's virtual media primitives against the emulator: it
	// downloads the image from a server on the lab's bridge.
	ln := lab.Listen(t)
	iso := make([]byte, 64<<10)
	copy(iso[0x8001:], "CD001")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(iso)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/castiron-test.iso"
	dn := driver.Node{UUID: n.UUID, DriverInfo: di, Properties: map[string]any{}}
	start = time.Now()
	if err := d.InsertMedia(ctx, dn, driver.MediaCDROM, url); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING InsertMedia (64 KiB image): %v", time.Since(start).Round(time.Millisecond))
	slots, err := d.MediaState(ctx, dn)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(slots, func(s driver.MediaSlot) bool { return s.Device == driver.MediaCDROM })
	if i < 0 || !slots[i].Inserted || slots[i].Image != url || !strings.Contains(slots[i].Path, "/Systems/") {
		t.Fatalf("media state after insert: %+v", slots)
	}
	if err := d.SetBootDevice(ctx, dn, driver.BootCDROM, false); err != nil {
		t.Fatal(err)
	}
	bd, err := d.BootDevice(ctx, dn)
	if err != nil || bd.BootDevice != driver.BootCDROM {
		t.Fatalf("boot device after cdrom once: %+v %v", bd, err)
	}
	t.Logf("sushy-tools reads boot override once back as persistent=%v", *bd.Persistent)
	if err := d.EjectMedia(ctx, dn, driver.MediaCDROM); err != nil {
		t.Fatal(err)
	}
	if slots, err = d.MediaState(ctx, dn); err != nil || slots[i].Inserted {
		t.Fatalf("media state after eject: %+v %v", slots, err)
	}
	if err := d.SetBootDevice(ctx, dn, driver.BootDisk, true); err != nil {
		t.Fatal(err)
	}

	// Latency of single driver calls (sessions warm; sushy-tools has no
	// SessionService, so basic auth on every call).
	logDriverTimings(t, ctx, d, dn, 100*time.Microsecond, "Reset On, then PowerState read until On")

	// A wrong password: back to enroll with a clear last_error.
	bad := h.enroll(map[string]any{"redfish_address": lab.URL, "redfish_username": lab.User, "redfish_password": "wrong"})
	h.provision(bad.UUID, "manage")
	b := h.wait(bad.UUID, 60*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if b.ProvisionState != "enroll" || !strings.Contains(deref(b.LastError), "HTTP 401") {
		t.Fatalf("wrong password: %q %q", b.ProvisionState, deref(b.LastError))
	}
	t.Logf("wrong password: %s", deref(b.LastError))
}

// bootsFirst reports whether the domain XML element starting with open
// carries <boot order='1'/> (sushy-tools' libvirt backend sets the boot
// device as per-device boot order).
func bootsFirst(xml, open string) bool {
	i := strings.Index(xml, open)
	if i < 0 {
		return false
	}
	el := xml[i:]
	name := strings.Fields(strings.TrimPrefix(open, "<"))[0]
	if j := strings.Index(el, "</"+name+">"); j >= 0 {
		el = el[:j]
	}
	return strings.Contains(el, "<boot order='1'/>")
}
