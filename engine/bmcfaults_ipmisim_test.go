package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver/bmcsim/ipmisim"
	openipmi "castiron/engine/driver/ipmi/ipmisim"
	"castiron/storage"
)

// TestBMCFaultsOpenIPMI runs the IPMI fault table against real BMC code:
// OpenIPMI's ipmi_sim, one per verb, behind a relay that drops, delays or
// cuts its packets. The driver meets the same faults as with castiron's
// own simulator (TestBMCFaultsIPMI) but a lanplus implementation it was
// not written against.
func TestBMCFaultsOpenIPMI(t *testing.T) {
	openipmi.RequireSim(t)
	verbs := commonVerbs()
	r := newSyncRig(t, ipmisim.Config{N: 0}, func(c *Config) { c.PowerTimeout = 2 * time.Second })
	fresh := func() { r.ipmi.CloseSessions(context.Background()) }
	var p *openipmi.Proxy
	faults := []faultCase{
		{name: "dead (drops every packet)", apply: func() { p.SetDead(true) }, heal: func() { p.SetDead(false) }},
		{name: "answers slower than the request timeout", apply: func() { p.SetSlow(time.Second) }, heal: func() { p.SetSlow(0) }},
		{name: "drops 30% of packets", apply: func() { p.SetDropRate(0.3) }, heal: func() { p.SetDropRate(0) }, either: true},
		{name: "disappears after the session is set up", apply: func() { fresh(); p.DieAfter(5) }, heal: func() { p.SetDead(false) }},
		{name: "disappears after the power command", apply: func() { fresh(); p.DieAfter(7) }, heal: func() { p.SetDead(false) },
			only: func(v verb) bool { return strings.HasPrefix(v.name, "power ") }},
	}
	var table []string
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			runVerbs(t, fc, verbs, func(t *testing.T, v verb) *storage.Node {
				// A fresh ipmi_sim per verb: a session the driver
				// lost mid-operation stays open in the BMC until its
				// inactivity timeout, as in real BMCs.
				sim := openipmi.StartSim(t)
				var err error
				p, err = openipmi.StartProxy(context.Background(), sim.Port)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Close)
				di := sim.DriverInfo()
				di["ipmi_port"] = p.Port
				// ipmi_sim refuses suite 17 and never answers Get
				// Channel Cipher Suites (shared/lab/NOTES.md).
				di["ipmi_cipher_suite"] = 3
				return enrollAt(t, r.c, r.store, &storage.Node{Driver: "ipmi", DriverInfo: di}, v.state, v.mutate)
			}, r.c, r.store, &table)
		})
	}
	t.Logf("fault × verb (OpenIPMI ipmi_sim behind a faulty relay):\n%s", strings.Join(table, "\n"))
}
