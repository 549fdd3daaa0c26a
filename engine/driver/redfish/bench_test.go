package redfish

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"castiron/engine/driver/redfish/redfishfake"
)

// What reusing the session saves per call, against the recorded-shape BMC
// on loopback (go test -run '^$' -bench . ./engine/driver/redfish/).

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// BenchmarkPowerStateWarm: one shared session, the system path known.
func BenchmarkPowerStateWarm(b *testing.B) {
	bmc := redfishfake.Start(b, "dmtf-rackmount", false)
	d := New(Config{Logger: quiet})
	defer d.Close(context.Background())
	n := bmc.Node(nil)
	ctx := context.Background()
	if _, err := d.PowerState(ctx, n); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.PowerState(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPowerStateCold: what a driver without a session cache pays per
// call: service root, login, Systems collection, system, logout.
func BenchmarkPowerStateCold(b *testing.B) {
	bmc := redfishfake.Start(b, "dmtf-rackmount", false)
	n := bmc.Node(nil)
	ctx := context.Background()
	for b.Loop() {
		d := New(Config{Logger: quiet})
		if _, err := d.PowerState(ctx, n); err != nil {
			b.Fatal(err)
		}
		_ = d.Close(ctx)
	}
}
