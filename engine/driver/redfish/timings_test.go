package redfish

import (
	"context"
	"sort"
	"testing"
	"time"

	"castiron/engine/driver"
)

// logDriverTimings logs the latency of single driver calls against a BMC
// that drives a VM (the lab's sushy-tools, castiron's emulator with qemu):
// 10 power reads, 10 boot device sets, 5 power ons (each then turned off
// again), medians rounded to round; how says what a power on does.
func logDriverTimings(t *testing.T, ctx context.Context, d *Driver, dn driver.Node, round time.Duration, how string) {
	t.Helper()
	measure := func(name string, fn func() error) {
		var ds []time.Duration
		for range 10 {
			s := time.Now()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ds = append(ds, time.Since(s))
		}
		sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
		t.Logf("TIMING %s: median %v, min %v, max %v (10 calls)", name, ds[5].Round(round), ds[0].Round(round), ds[9].Round(round))
	}
	measure("power state read", func() error { _, err := d.PowerState(ctx, dn); return err })
	measure("boot device set (pxe, persistent)", func() error { return d.SetBootDevice(ctx, dn, driver.BootPXE, true) })
	var ons []time.Duration
	for range 5 {
		s := time.Now()
		if err := d.SetPowerState(ctx, dn, driver.PowerOn, time.Minute); err != nil {
			t.Fatal(err)
		}
		ons = append(ons, time.Since(s))
		if err := d.SetPowerState(ctx, dn, driver.PowerOff, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(ons, func(a, b int) bool { return ons[a] < ons[b] })
	t.Logf("TIMING power on (%s): median %v, min %v, max %v (5 calls)", how,
		ons[2].Round(time.Millisecond), ons[0].Round(time.Millisecond), ons[4].Round(time.Millisecond))
}
