package redfish

import (
	"context"
	"slices"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/redfish/redfishfake"
	"castiron/storage"
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

// TestConductorSyncsHealth: power sync (every 100 ms here) reads the
// System's Status.Health into node.health (API 1.109) and records each
// change as a "monitoring" history event, as Ironic's
// update_node_health_status does.
func TestConductorSyncsHealth(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	d := newTestDriver(t, Config{})
	h := startConductor(t, d)
	n := h.enroll(b.Node(nil).DriverInfo)
	h.provision(n.UUID, "manage")
	h.wait(n.UUID, 20*time.Second, func(n *storage.Node) bool { return n.ProvisionState == "manageable" })
	system := "/redfish/v1/Systems/437XR1138R2"
	for _, want := range []string{"Warning", "OK"} {
		b.Set(system, "Status", map[string]any{"State": "Enabled", "Health": want})
		h.wait(n.UUID, 10*time.Second, func(n *storage.Node) bool { return n.Health != nil && *n.Health == want })
	}
	events, err := h.st.ListEvents(context.Background(), n.UUID, storage.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		if e.EventType == "monitoring" {
			got = append(got, e.Event)
		}
	}
	want := []string{"Node health status changed: health='Warning' (previously 'None')", "Node health status changed: health='OK' (previously 'Warning')"}
	if !slices.Equal(got, want) {
		t.Errorf("monitoring events %q, want %q", got, want)
	}
}
