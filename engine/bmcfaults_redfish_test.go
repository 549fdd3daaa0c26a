package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/redfish"
	"castiron/storage"
)

// The Redfish half of the BMC fault tests (bmcfaults_test.go): castiron's
// Redfish emulator made faulty under the real conductor.

// rfRig is a started conductor with the redfish hardware type over a real
// SQLite file, and one redfishsim BMC on loopback.
type rfRig struct {
	c   *Conductor
	st  *storage.SQLite
	bmc *redfishsim.Server
	url string
}

func newRedfishRig(t *testing.T, sim redfishsim.Config) *rfRig {
	t.Helper()
	ctx := context.Background()
	if sim.TaskDelay == 0 {
		sim.TaskDelay = 50 * time.Millisecond // firmware update tasks
	}
	bmc, err := redfishsim.New(sim)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- bmc.Serve(sctx, ln) }()
	st, err := storage.Open(ctx, filepath.Join(t.TempDir(), "castiron.db"))
	if err != nil {
		t.Fatal(err)
	}
	d := redfish.New(redfish.Config{Logger: quietLog(), ConnectTimeout: 300 * time.Millisecond,
		RequestTimeout: 300 * time.Millisecond, Retries: 2, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond,
		PowerTimeout: 2 * time.Second, PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond})
	c := New(st, NewRegistry(NewRedfishHardware(d, redfish.Properties())), Config{
		Hostname: "test-conductor", Logger: quietLog(), PowerSyncInterval: time.Hour,
		PowerSyncTimeout: time.Second, PowerTimeout: 2 * time.Second,
		// BIOS jobs and firmware tasks polled often, and given up on
		// well within verbBound.
		StepPollInterval: 20 * time.Millisecond, StepTimeout: 4 * time.Second,
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		_ = d.Close(context.Background())
		stop()
		<-served
		_ = bmc.Close(context.Background())
		st.Close()
	})
	return &rfRig{c: c, st: st, bmc: bmc, url: "http://" + ln.Addr().String()}
}

func (r *rfRig) node(t *testing.T, state State, mutate func(n *storage.Node)) *storage.Node {
	t.Helper()
	return enrollAt(t, r.c, r.st, &storage.Node{Driver: "redfish", DriverInfo: map[string]any{
		"redfish_address": r.url, "redfish_username": r.bmc.User(), "redfish_password": r.bmc.Password(),
	}}, state, mutate)
}

// fwImageURL serves a firmware image the redfish fault table's firmware
// update verb names, with its checksum.
var fwImageURL, fwImageSum string

func TestBMCFaultsRedfish(t *testing.T) {
	// What the emulator takes as a BMC firmware image (redfishsim.Image).
	image := []byte(`{"Component": "BMC", "Version": "9.9.9"}`)
	sum := sha256.Sum256(image)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(image) }))
	defer img.Close()
	fwImageURL, fwImageSum = img.URL+"/bmc.bin", "sha256:"+hex.EncodeToString(sum[:])
	type rfFault struct {
		name string
		sim  redfishsim.Config
		// faults are injected for the verb, and removed to heal.
		faults func(r *rfRig) []redfishsim.Fault
		// before runs as the fault is applied.
		before func(r *rfRig)
		ok     bool
		only   func(v verb) bool
	}
	all := func(f redfishsim.Fault) func(*rfRig) []redfishsim.Fault {
		return func(*rfRig) []redfishsim.Fault { return []redfishsim.Fault{f} }
	}
	cases := []rfFault{
		{name: "500 on every request", faults: all(redfishsim.Fault{Status: http.StatusInternalServerError})},
		{name: "503 busy on every request", faults: all(redfishsim.Fault{Status: http.StatusServiceUnavailable, RetryAfter: 1})},
		{name: "answers slower than the request timeout", faults: all(redfishsim.Fault{Delay: 3 * time.Second})},
		{name: "drops connections", faults: all(redfishsim.Fault{Drop: true})},
		// A BMC reboot forgets every session: the token gets 401 and
		// the driver logs in again.
		{name: "closes sessions (BMC reboot)", sim: redfishsim.Config{NoBasicAuth: true},
			before: func(r *rfRig) { r.bmc.DropSessions() }, ok: true},
		// Sessions dropped and new logins refused (no basic auth to fall
		// back on): a session service that broke.
		{name: "closes sessions, refuses logins", sim: redfishsim.Config{NoBasicAuth: true},
			before: func(r *rfRig) { r.bmc.DropSessions() },
			faults: all(redfishsim.Fault{Method: http.MethodPost, Path: "SessionService/Sessions", Status: http.StatusServiceUnavailable})},
		// The BMC answers reads and boot settings but refuses every
		// reset: the provision verbs fail at their power step.
		{name: "500 on power actions only", faults: all(redfishsim.Fault{Method: http.MethodPost, Path: "ComputerSystem.Reset", Status: http.StatusInternalServerError}),
			only: func(v verb) bool {
				return strings.HasPrefix(v.name, "power ") || strings.Contains(v.name, "powers on")
			}},
		// Mid-operation: the first read of the System and the first
		// action (a reset) are served, then
		// the BMC vanishes: every later request is dropped.
		{name: "disappears mid-operation", faults: func(r *rfRig) []redfishsim.Fault {
			return []redfishsim.Fault{
				{Method: http.MethodGet, Path: r.bmc.SystemPath(), Delay: time.Millisecond, Times: 1},
				{Method: http.MethodPost, Path: "/Actions/", Delay: time.Millisecond, Times: 1},
				{Drop: true},
			}
		}},
	}
	verbs := append(commonVerbs(),
		verb{name: "virtual media insert", state: Manageable,
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.AttachVirtualMedia(ctx, uuid, VMediaRequest{DeviceType: driver.MediaCDROM, ImageURL: "http://127.0.0.1:1/x.iso"})
			},
			wantState: "manageable", wantError: "Could not attach device cdrom"},
		verb{name: "inspect (redfish, out of band)", state: Manageable,
			mutate: func(n *storage.Node) { n.InspectInterface = "redfish" },
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "inspect"})
			},
			wantState: "inspect failed", wantError: "Failed to inspect hardware"},
		// BIOS settings applied by a manual clean without the ramdisk:
		// settings cached, staged on the BMC, a reboot, read back.
		verb{name: "bios apply (clean, no ramdisk)", state: Manageable,
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "clean", DisableRamdisk: boolp(true), CleanSteps: []map[string]any{
					{"interface": "bios", "step": "apply_configuration", "args": map[string]any{
						"settings": []any{map[string]any{"name": "ProcVirtualization", "value": "Disabled"}}}}}})
			},
			wantState: "clean failed", wantError: "failed"},
		// A firmware update: castiron fetches and checks the image, the
		// BMC's UpdateService runs a task, castiron polls it.
		verb{name: "firmware update (clean, no ramdisk)", state: Manageable,
			run: func(ctx context.Context, c *Conductor, uuid string) error {
				return c.Provision(ctx, uuid, ProvisionRequest{Target: "clean", DisableRamdisk: boolp(true), CleanSteps: []map[string]any{
					{"interface": "firmware", "step": "update", "args": map[string]any{
						"settings": []any{map[string]any{"component": "bmc", "url": fwImageURL, "checksum": fwImageSum}}}}}})
			},
			wantState: "clean failed", wantError: "failed"},
	)
	var table []string
	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			r := newRedfishRig(t, rc.sim)
			var removes []func()
			fc := faultCase{name: rc.name, ok: rc.ok, only: rc.only,
				apply: func() {
					if rc.before != nil {
						rc.before(r)
					}
					if rc.faults != nil {
						for _, f := range rc.faults(r) {
							removes = append(removes, r.bmc.InjectFault(f))
						}
					}
				},
				heal: func() {
					for _, rm := range removes {
						rm()
					}
					removes = nil
				}}
			runVerbs(t, fc, verbs, func(t *testing.T, v verb) *storage.Node { return r.node(t, v.state, v.mutate) }, r.c, r.st, &table)
		})
	}
	t.Logf("fault × verb (redfishsim):\n%s", strings.Join(table, "\n"))
}

func TestPowerSyncFaultsRedfish(t *testing.T) {
	cases := []struct {
		name  string
		sim   redfishsim.Config
		fault redfishsim.Fault
		drop  bool
	}{
		{name: "500 on every request", fault: redfishsim.Fault{Status: http.StatusInternalServerError}},
		{name: "503 busy on every request", fault: redfishsim.Fault{Status: http.StatusServiceUnavailable}},
		{name: "answers slower than the request timeout", fault: redfishsim.Fault{Delay: 3 * time.Second}},
		{name: "drops connections", fault: redfishsim.Fault{Drop: true}},
		{name: "closes sessions, refuses logins", sim: redfishsim.Config{NoBasicAuth: true}, drop: true,
			fault: redfishsim.Fault{Method: http.MethodPost, Path: "SessionService/Sessions", Status: http.StatusServiceUnavailable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRedfishRig(t, tc.sim)
			n := r.node(t, Manageable, nil)
			if err := r.c.SetPower(context.Background(), n.UUID, driver.PowerOn, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if got, _ := settled(t, r.st, n.UUID, time.Now()); got.LastError != nil {
				t.Fatal(deref(got.LastError))
			}
			var remove func()
			syncThroughFault(t, r.c, r.st, n.UUID, faultCase{name: tc.name,
				apply: func() {
					if tc.drop {
						r.bmc.DropSessions()
					}
					remove = r.bmc.InjectFault(tc.fault)
				},
				heal: func() { remove() }})
		})
	}
}
