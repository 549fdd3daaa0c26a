package redfishsim_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/redfish"
)

// BenchmarkSystemGET is the emulator's own cost of answering a
// ComputerSystem read over loopback HTTP (basic auth): what one fleet
// process can serve.
func BenchmarkSystemGET(b *testing.B) {
	for _, f := range flavours {
		b.Run(string(f), func(b *testing.B) {
			s, err := redfishsim.New(redfishsim.Config{Flavour: f})
			if err != nil {
				b.Fatal(err)
			}
			url := serve(b, s)
			req, _ := http.NewRequest(http.MethodGet, url+s.SystemPath(), nil)
			req.SetBasicAuth(s.User(), s.Password())
			b.ResetTimer()
			for b.Loop() {
				res, err := http.DefaultClient.Do(req)
				if err != nil || res.StatusCode != 200 {
					b.Fatal(res, err)
				}
				res.Body.Close()
			}
		})
	}
}

// BenchmarkDriverPowerCycle is castiron's redfish driver powering a
// state-only BMC on and off (session warm): the per-node cost a fleet
// benchmark pays on the BMC side.
func BenchmarkDriverPowerCycle(b *testing.B) {
	s, err := redfishsim.New(redfishsim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	url := serve(b, s)
	d := redfish.New(redfish.Config{PollInterval: time.Millisecond})
	defer d.Close(context.Background())
	n := driver.Node{UUID: "62696f73-0000-4000-8000-000000000002", Properties: map[string]any{}, DriverInfo: map[string]any{
		"redfish_address": url, "redfish_username": s.User(), "redfish_password": s.Password()}}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if err := d.SetPowerState(ctx, n, driver.PowerOn, time.Second); err != nil {
			b.Fatal(err)
		}
		if err := d.SetPowerState(ctx, n, driver.PowerOff, time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
