package redfish

import (
	"context"
	"slices"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/redfish/redfishfake"
)

// TestHealthAndRebootInPlace covers API 1.109 and 1.95 at the driver: the
// System's Status.Health is the node's health (absent or null: ""), and a
// node with disable_power_off reboots by ForceRestart, never ForceOff.
func TestHealthAndRebootInPlace(t *testing.T) {
	eachVendor(t, func(t *testing.T, vc vendorCase, b *redfishfake.BMC, d *Driver, ctx context.Context, n driver.Node) {
		// The recorded Systems carry no Status: no health to tell.
		if h, err := d.Health(ctx, n); err != nil || h != "" {
			t.Fatalf("health %q, %v; want \"\"", h, err)
		}
		for _, h := range []string{"Warning", "Critical", "OK"} {
			b.Set(vc.system, "Status", map[string]any{"State": "Enabled", "Health": h})
			if got, err := d.Health(ctx, n); err != nil || got != h {
				t.Fatalf("health %q, %v; want %q", got, err, h)
			}
		}
		b.Set(vc.system, "Status", map[string]any{"State": "Enabled", "Health": "Bogus"})
		if got, err := d.Health(ctx, n); err != nil || got != "" {
			t.Fatalf("unknown health %q, %v; want \"\"", got, err)
		}

		n.DisablePowerOff = true
		b.Set(vc.system, "PowerState", "On")
		for _, s := range []struct {
			from   string
			resets []string
		}{{"On", []string{"ForceRestart"}}, {"Off", []string{"On"}}} {
			b.Set(vc.system, "PowerState", s.from)
			b.Mu.Lock()
			b.Resets = nil
			b.Mu.Unlock()
			if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
				t.Fatalf("reboot from %s: %v", s.from, err)
			}
			b.Mu.Lock()
			got := slices.Clone(b.Resets)
			b.Mu.Unlock()
			if !slices.Equal(got, s.resets) {
				t.Fatalf("reboot from %s with disable_power_off: BMC saw %v, want %v", s.from, got, s.resets)
			}
			if ps, _ := d.PowerState(ctx, n); ps != driver.PowerOn {
				t.Fatalf("after the reboot from %s: %s", s.from, ps)
			}
		}
	})
}
