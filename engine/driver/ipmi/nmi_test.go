package ipmi

import (
	"strings"
	"testing"
	"time"

	"castiron/engine/driver/ipmi/ipmisim"
)

// TestInjectNMI sends Chassis Control "diagnostic interrupt" (ipmitool
// "power diag") to ipmi_sim. OpenIPMI's simulator refuses that control value
// with completion code 0xcc (invalid data field), so this checks the request
// reaches the BMC over a working session and the refusal comes back as one
// clean, attributed error (no leaked session).
func TestInjectNMI(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 30*time.Second)
	err := d.InjectNMI(ctx, n)
	if err == nil {
		return // a simulator that implements the diagnostic interrupt
	}
	msg := err.Error()
	for _, want := range []string{`IPMI chassis control "power diag" failed`, n.UUID, "127.0.0.1", "0xcc"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	// The session still works after the refusal.
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("power state after NMI refusal: %v", err)
	}
}

// TestInjectNMIBadDriverInfo: driver_info is checked before any I/O.
func TestInjectNMIBadDriverInfo(t *testing.T) {
	err := newTestDriver(t, Config{}).InjectNMI(ctxT(t, 5*time.Second), testNode(map[string]any{}))
	if err == nil || !strings.Contains(err.Error(), "ipmi_address") {
		t.Fatalf("InjectNMI without ipmi_address: %v", err)
	}
}
