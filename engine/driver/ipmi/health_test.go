package ipmi

import (
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/ipmi/ipmisim"
)

// TestHealthAndResetInPlace covers API 1.109 and 1.95 against ipmi_sim: a
// chassis without fault bits is OK, and a node with disable_power_off
// reboots by "power reset" (it stays on; from off it is only powered on).
func TestHealthAndResetInPlace(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 30*time.Second)

	if h, err := d.Health(ctx, n); err != nil || h != driver.HealthOK {
		t.Fatalf("health %q, %v; want OK", h, err)
	}
	n.DisablePowerOff = true
	if err := d.SetPowerState(ctx, n, driver.SoftRebooting, time.Second); err == nil || !strings.Contains(err.Error(), "does not support feature soft power off") {
		t.Fatalf("soft reboot with disable_power_off: %v", err)
	}
	for _, from := range []string{driver.PowerOff, driver.PowerOn} {
		if got, err := d.PowerState(ctx, n); err != nil || got != from {
			t.Fatalf("power %q, %v; want %q", got, err, from)
		}
		if err := d.SetPowerState(ctx, n, driver.Rebooting, 10*time.Second); err != nil {
			t.Fatalf("reboot from %s: %v", from, err)
		}
		if got := ipmitoolPower(t, s); got != driver.PowerOn {
			t.Fatalf("after the reboot from %s: ipmitool says %q", from, got)
		}
	}
}
