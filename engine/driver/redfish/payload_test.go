package redfish

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/redfish/redfishfake"
	"castiron/fault"
)

// Tests against recorded vendor shapes (redfishfake/shapes): where each shape
// comes from is in its "_source" field. They are written for these tests
// from public documentation of the DMTF mockups, Dell's iDRAC and HPE's iLO
// (facts carried over, no text copied) to show what sushy-tools cannot:
// virtual media under the Manager, reset types a BMC does not offer, boot
// override read back as Disabled, paths with trailing slashes, absolute
// session Locations, odd NICs and GPUs among the processors.

// vendorCase is what one shape must give.
type vendorCase struct {
	shape       string
	system      string // the system's path
	power       string // power state as recorded
	softReboot  bool   // GracefulRestart offered
	cdSlot      string // slot InsertMedia(cdrom) must use
	diskSlot    string // slot InsertMedia(disk) must use
	bootMode    string
	notOffered  string // a boot device the BMC does not offer ("" : none)
	memoryMB    int64
	cpus        int
	localGB     int64
	macs        []string
	indicators  []string // name@component
	secureBoot  bool     // SetSecureBoot(true) works (UEFI)
	hasEjectCD1 bool     // a CD is inserted at start
}

var vendorCases = []vendorCase{
	{shape: "dmtf-rackmount", system: "/redfish/v1/Systems/437XR1138R2", power: driver.PowerOn, softReboot: true,
		cdSlot: "/redfish/v1/Managers/BMC/VirtualMedia/CD1", diskSlot: "/redfish/v1/Managers/BMC/VirtualMedia/Floppy1",
		bootMode: "uefi", notOffered: driver.BootUEFIHTTP, memoryMB: 96 * 1024, cpus: 32, localGB: 836,
		macs:        []string{"12:44:6a:3b:04:11", "aa:bb:cc:dd:ee:00"},
		indicators:  []string{"1U@chassis", "38947555-7742-3448-3784-823347823834@system", "1:3D58ECBC375FD9F2@disk", "1:32ADF365C6C1B7BD@disk"},
		secureBoot:  true,
		hasEjectCD1: true},
	{shape: "idrac9", system: "/redfish/v1/Systems/System.Embedded.1", power: driver.PowerOff, softReboot: false,
		cdSlot: "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD", diskSlot: "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/RemovableDisk",
		bootMode: "uefi", memoryMB: 196597, cpus: 48, localGB: 445,
		macs:       []string{"e4:43:4b:12:34:56", "e4:43:4b:12:34:58"},
		indicators: []string{"4c4c4544-0047-4b10-8057-b8c04f4a5832@chassis", "4c4c4544-0047-4b10-8057-b8c04f4a5832@system"},
		secureBoot: true},
	{shape: "ilo5", system: "/redfish/v1/Systems/1/", power: driver.PowerOn, softReboot: true,
		cdSlot: "/redfish/v1/Managers/1/VirtualMedia/2/", diskSlot: "/redfish/v1/Managers/1/VirtualMedia/1/",
		bootMode: "bios", memoryMB: 32 * 1024, cpus: 16, localGB: 278,
		macs:       []string{"94:40:c9:aa:bb:01"},
		indicators: []string{"1@chassis", "30373237-3132-584D-5139-323130414243@system"},
		secureBoot: false},
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eachVendor runs fn per shape with its fake BMC, a driver (closed at the
// end), a 30 s context and a node.
func eachVendor(t *testing.T, fn func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node)) {
	for _, vc := range vendorCases {
		t.Run(vc.shape, func(t *testing.T) {
			b := redfishfake.Start(t, vc.shape, false)
			d := newTestDriver(t, Config{})
			defer d.Close(context.Background())
			fn(t, vc, b, d, ctxT(t, 30*time.Second), b.Node(nil))
		})
	}
}

func TestVendorPower(t *testing.T) {
	eachVendor(t, func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node) {
		if err := d.Verify(ctx, n); err != nil {
			t.Fatal(err)
		}
		if got, err := d.PowerState(ctx, n); err != nil || got != vc.power {
			t.Fatalf("power state %q, %v; want %q", got, err, vc.power)
		}
		b.Set(vc.system, "PowerState", "Off")
		steps := []struct {
			target string
			resets []string
			after  string
		}{
			{driver.PowerOn, []string{"On"}, driver.PowerOn},
			{driver.PowerOn, nil, driver.PowerOn}, // already on: nothing sent
			{driver.PowerOff, []string{"ForceOff"}, driver.PowerOff},
			{driver.Rebooting, []string{"On"}, driver.PowerOn}, // from off: only on
			{driver.Rebooting, []string{"ForceOff", "On"}, driver.PowerOn},
			{driver.SoftPowerOff, []string{"GracefulShutdown"}, driver.PowerOff},
		}
		for _, s := range steps {
			b.Mu.Lock()
			b.Resets = nil
			b.Mu.Unlock()
			if err := d.SetPowerState(ctx, n, s.target, 5*time.Second); err != nil {
				t.Fatalf("%s: %v", s.target, err)
			}
			b.Mu.Lock()
			got := b.Resets
			b.Mu.Unlock()
			if !slices.Equal(got, s.resets) {
				t.Fatalf("%s: BMC saw resets %v, want %v", s.target, got, s.resets)
			}
			if ps, _ := d.PowerState(ctx, n); ps != s.after {
				t.Fatalf("%s: power state %q, want %q", s.target, ps, s.after)
			}
		}
		if err := d.SetPowerState(ctx, n, driver.PowerOn, time.Second); err != nil {
			t.Fatal(err)
		}
		err := d.SetPowerState(ctx, n, driver.SoftRebooting, time.Second)
		switch {
		case vc.softReboot && err != nil:
			t.Fatalf("soft reboot: %v", err)
		case !vc.softReboot && (!fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "does not offer reset type GracefulRestart")):
			t.Fatalf("soft reboot on a BMC without GracefulRestart: %v", err)
		}
		if err := d.InjectNMI(ctx, n); err != nil {
			t.Fatal(err)
		}
		if b.Resets[len(b.Resets)-1] != "Nmi" {
			t.Fatalf("NMI: BMC saw %v", b.Resets)
		}
		t.Logf("%s: %d requests, %d logins", vc.shape, len(b.Requests), b.Logins)
	})
}

func TestVendorBootDevice(t *testing.T) {
	eachVendor(t, func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node) {
		for _, dev := range d.SupportedBootDevices() {
			for _, persistent := range []bool{false, true} {
				err := d.SetBootDevice(ctx, n, dev, persistent)
				if dev == vc.notOffered {
					if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "does not offer boot device "+dev) {
						t.Fatalf("%s: want a refusal naming it, got %v", dev, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s persistent=%t: %v", dev, persistent, err)
				}
				bd, err := d.BootDevice(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				if bd.BootDevice != dev || bd.Persistent == nil || *bd.Persistent != persistent {
					t.Fatalf("%s persistent=%t read back as %+v", dev, persistent, bd)
				}
			}
		}
		// Enabled is sent only when it changes, as Ironic does.
		b.Mu.Lock()
		b.Patches = nil
		b.Mu.Unlock()
		if err := d.SetBootDevice(ctx, n, driver.BootPXE, true); err != nil {
			t.Fatal(err)
		}
		if len(b.Patches) != 1 || strings.Contains(b.Patches[0], "BootSourceOverrideEnabled") {
			t.Fatalf("unchanged Enabled sent again: %v", b.Patches)
		}
		if err := d.SetBootDevice(ctx, n, "floppy", false); !fault.Is(err, fault.Invalid) {
			t.Fatalf("floppy: %v", err)
		}
	})
}

// TestOnceReadsContinuous shows sushy-tools' quirk: Once is accepted and
// reads back as Continuous; the driver reports what the BMC says.
func TestOnceReadsContinuous(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	b.OnceReadsContinuous = true
	b.Mu.Lock()
	b.Res["/redfish/v1/Systems/437XR1138R2"]["Boot"].(map[string]any)["BootSourceOverrideEnabled"] = "Disabled"
	b.Mu.Unlock()
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	n := b.Node(nil)
	if err := d.SetBootDevice(ctx, n, driver.BootCDROM, false); err != nil {
		t.Fatal(err)
	}
	bd, err := d.BootDevice(ctx, n)
	if err != nil || bd.BootDevice != driver.BootCDROM || bd.Persistent == nil || !*bd.Persistent {
		t.Fatalf("%+v %v", bd, err)
	}
}

func TestVendorVirtualMedia(t *testing.T) {
	eachVendor(t, func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node) {
		const iso = "http://10.0.0.1:8080/boot/node.iso"
		if err := d.InsertMedia(ctx, n, driver.MediaCDROM, iso); err != nil {
			t.Fatal(err)
		}
		if got := b.Get(vc.cdSlot); got["Image"] != iso || got["Inserted"] != true {
			t.Fatalf("CD slot %s after insert: %v", vc.cdSlot, got)
		}
		if vc.hasEjectCD1 && b.Count("POST "+redfishfake.Norm(vc.cdSlot)+"/Actions/VirtualMedia.EjectMedia") != 1 {
			t.Fatalf("the CD already inserted was not ejected first: %v", b.Requests)
		}
		slots, err := d.MediaState(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		var cd *driver.MediaSlot
		for i := range slots {
			if redfishfake.Norm(slots[i].Path) == redfishfake.Norm(vc.cdSlot) {
				cd = &slots[i]
			}
		}
		if cd == nil || cd.Device != driver.MediaCDROM || !cd.Inserted || cd.Image != iso {
			raw, _ := json.Marshal(slots)
			t.Fatalf("media state: %s", raw)
		}
		if err := d.InsertMedia(ctx, n, driver.MediaDisk, "http://10.0.0.1:8080/cfg.img"); err != nil {
			t.Fatal(err)
		}
		if got := b.Get(vc.diskSlot); got["Inserted"] != true {
			t.Fatalf("disk slot %s: %v", vc.diskSlot, got)
		}
		if err := d.EjectMedia(ctx, n, driver.MediaCDROM); err != nil {
			t.Fatal(err)
		}
		if got := b.Get(vc.cdSlot); got["Inserted"] != false {
			t.Fatalf("CD after eject: %v", got)
		}
		if got := b.Get(vc.diskSlot); got["Inserted"] != true {
			t.Fatalf("ejecting the cdrom ejected the disk too: %v", got)
		}
		if err := d.EjectMedia(ctx, n, ""); err != nil {
			t.Fatal(err)
		}
		if got := b.Get(vc.diskSlot); got["Inserted"] != false {
			t.Fatalf("eject all left the disk: %v", got)
		}
		if err := d.EjectMedia(ctx, n, ""); err != nil { // nothing inserted: fine
			t.Fatal(err)
		}
		if err := d.InsertMedia(ctx, n, "tape", iso); !fault.Is(err, fault.Invalid) {
			t.Fatalf("tape: %v", err)
		}
	})
}

func TestVendorInspect(t *testing.T) {
	eachVendor(t, func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node) {
		res, err := d.InspectHardware(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.MarshalIndent(res, "", " ")
		t.Logf("%s", raw)
		p := res.Properties
		if p["memory_mb"] != vc.memoryMB || p["local_gb"] != vc.localGB || p["cpu_arch"] != "x86_64" {
			t.Fatalf("properties %v", p)
		}
		if _, set := p["cpus"]; set {
			t.Fatalf("Ironic's redfish inspection does not set cpus: %v", p)
		}
		if cpu := res.Inventory["cpu"].(map[string]any); cpu["count"] != vc.cpus {
			t.Fatalf("cpu %v, want count %d", cpu, vc.cpus)
		}
		if !slices.Equal(res.MACs, vc.macs) || res.BootMode != vc.bootMode {
			t.Fatalf("MACs %v boot mode %q", res.MACs, res.BootMode)
		}
		if v := res.Inventory["system_vendor"].(map[string]any); v["system_uuid"] == nil || v["manufacturer"] == nil {
			t.Fatalf("system_vendor %v", v)
		}
		if disks, _ := res.Inventory["disks"].([]any); len(disks) == 0 {
			t.Fatalf("no disks in %v", res.Inventory)
		}
	})
}

func TestVendorIndicatorsAndBootSettings(t *testing.T) {
	eachVendor(t, func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node) {
		inds, err := d.SupportedIndicators(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, i := range inds {
			names = append(names, i.Name+"@"+i.Component)
		}
		if !slices.Equal(names, vc.indicators) {
			t.Fatalf("indicators %v, want %v", names, vc.indicators)
		}
		sysLED := vc.indicators[1]
		name, comp, _ := strings.Cut(sysLED, "@")
		if err := d.SetIndicatorState(ctx, n, comp, name, driver.IndicatorBlinking); err != nil {
			t.Fatal(err)
		}
		if st, err := d.IndicatorState(ctx, n, comp, name); err != nil || st != driver.IndicatorBlinking {
			t.Fatalf("system LED %q %v", st, err)
		}
		if _, err := d.IndicatorState(ctx, n, "system", "nope"); !fault.Is(err, fault.Invalid) {
			t.Fatalf("unknown indicator: %v", err)
		}

		other := map[string]string{"uefi": "bios", "bios": "uefi"}[vc.bootMode]
		if err := d.SetBootMode(ctx, n, other); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"uefi": "UEFI", "bios": "Legacy"}[other]
		if got := b.Get(vc.system)["Boot"].(map[string]any)["BootSourceOverrideMode"]; got != want {
			t.Fatalf("boot mode %v, want %s", got, want)
		}
		if err := d.SetBootMode(ctx, n, vc.bootMode); err != nil {
			t.Fatal(err)
		}
		err = d.SetSecureBoot(ctx, n, true)
		if vc.secureBoot != (err == nil) {
			t.Fatalf("secure boot (UEFI: %t): %v", vc.secureBoot, err)
		}
		if !vc.secureBoot && !strings.Contains(err.Error(), "requires UEFI") {
			t.Fatalf("secure boot on a BIOS node: %v", err)
		}
	})
}

// TestEjectSharedCollection: a System linking its Manager's virtual media
// collection (sushy-tools links them the other way round) lists each slot
// twice; it is ejected once.
func TestEjectSharedCollection(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	const sys, cd = "/redfish/v1/Systems/437XR1138R2", "/redfish/v1/Managers/BMC/VirtualMedia/CD1"
	b.Set(sys, "VirtualMedia", map[string]any{"@odata.id": "/redfish/v1/Managers/BMC/VirtualMedia"})
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	ctx, n := ctxT(t, 30*time.Second), b.Node(nil)
	if err := d.InsertMedia(ctx, n, driver.MediaCDROM, "http://10.0.0.1:8080/boot/node.iso"); err != nil {
		t.Fatal(err)
	}
	eject := "POST " + redfishfake.Norm(cd) + "/Actions/VirtualMedia.EjectMedia"
	before := b.Count(eject)
	if err := d.EjectMedia(ctx, n, driver.MediaCDROM); err != nil {
		t.Fatal(err)
	}
	if got := b.Count(eject) - before; got != 1 {
		t.Fatalf("%d EjectMedia calls on %s, want 1: %v", got, cd, b.Requests)
	}
	if got := b.Get(cd); got["Inserted"] != false {
		t.Fatalf("CD after eject: %v", got)
	}
}
