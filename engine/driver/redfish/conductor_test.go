package redfish

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/redfish/redfishfake"
	"castiron/engine/enginetest"
	"castiron/fault"
	"castiron/storage"
)

// harness is a real conductor on a temp SQLite file with the fake and
// redfish hardware types.
type harness struct {
	t  *testing.T
	c  *engine.Conductor
	st *storage.SQLite
}

func startConductor(t *testing.T, d *Driver) *harness {
	t.Helper()
	// Registered first, so it runs after the conductor stopped.
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	c, st := enginetest.Start(t, engine.Config{Hostname: "redfish-test", PowerSyncInterval: 100 * time.Millisecond},
		engine.NewFakeHardware(fake.New()), engine.NewRedfishHardware(d, Properties()))
	return &harness{t: t, c: c, st: st}
}

func (h *harness) enroll(di map[string]any) *storage.Node {
	h.t.Helper()
	n := &storage.Node{Driver: "redfish", DriverInfo: di}
	if err := h.c.CreateNode(context.Background(), n, true); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// wait polls the node until it is unlocked and ok, or fails after limit.
func (h *harness) wait(uuid string, limit time.Duration, ok func(n *storage.Node) bool) *storage.Node {
	h.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		n, err := h.st.GetNode(context.Background(), uuid)
		if err != nil {
			h.t.Fatal(err)
		}
		if n.Reservation == nil && ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s stuck: state %q power %v reservation %v last_error %v", uuid, n.ProvisionState, n.PowerState, n.Reservation, n.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) provision(uuid, target string) {
	h.t.Helper()
	if err := h.c.Provision(context.Background(), uuid, engine.ProvisionRequest{Target: target}); err != nil {
		h.t.Fatalf("%s: %v", target, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestConductorWithFakeBMC drives the redfish hardware type through the
// real conductor: interfaces named as Ironic names them, manage (credentials
// checked), out-of-band inspection creating ports, power, boot device and
// the power sync.
func TestConductorWithFakeBMC(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	d := newTestDriver(t, Config{})
	h := startConductor(t, d)
	ctx := ctxT(t, 60*time.Second)
	n := h.enroll(b.Node(nil).DriverInfo)
	for kind, want := range map[string]string{"power": "redfish", "management": "redfish", "inspect": "redfish", "boot": "ipxe", "deploy": "direct"} {
		if got := engine.InterfaceOf(n, kind); got != want {
			t.Errorf("%s_interface %q, want %q", kind, got, want)
		}
	}
	hw, _ := h.c.Hardware().Get("redfish")
	if len(hw.Properties) != 6 {
		t.Fatalf("driver properties %v", hw.Properties)
	}

	start := time.Now()
	h.provision(n.UUID, "manage")
	got := h.wait(n.UUID, 20*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
	if got.ProvisionState != "manageable" || deref(got.PowerState) != "power on" {
		t.Fatalf("manage: %q power %v last_error %v", got.ProvisionState, got.PowerState, got.LastError)
	}
	t.Logf("enroll -> manageable: %v", time.Since(start))

	h.provision(n.UUID, "inspect")
	got = h.wait(n.UUID, 20*time.Second, func(n *storage.Node) bool {
		return n.ProvisionState == "manageable" || n.ProvisionState == "inspect failed"
	})
	if got.ProvisionState != "manageable" || got.InspectionFinishedAt == nil {
		t.Fatalf("inspect: %q last_error %v", got.ProvisionState, got.LastError)
	}
	p := got.Properties
	if p["memory_mb"] != float64(98304) || p["local_gb"] != float64(836) || p["cpu_arch"] != "x86_64" || p["capabilities"] != "boot_mode:uefi" {
		t.Fatalf("properties after inspection: %v", p)
	}
	inv, _ := got.DriverInternalInfo[engine.InventoryKey].(map[string]any)
	if inv == nil || inv["inventory"] == nil {
		t.Fatalf("inventory not stored: %v", got.DriverInternalInfo)
	}
	ports, err := h.st.ListPorts(ctx, storage.PortQuery{NodeUUID: &n.UUID})
	if err != nil {
		t.Fatal(err)
	}
	var macs []string
	for _, p := range ports {
		macs = append(macs, p.Address)
	}
	slices.Sort(macs)
	if !slices.Equal(macs, []string{"12:44:6a:3b:04:11", "aa:bb:cc:dd:ee:00"}) {
		t.Fatalf("ports %v", macs)
	}

	if err := h.c.SetPower(ctx, n.UUID, "power off", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	h.wait(n.UUID, 10*time.Second, func(n *storage.Node) bool { return deref(n.PowerState) == "power off" && n.TargetPowerState == nil })
	if b.Get("/redfish/v1/Systems/437XR1138R2")["PowerState"] != "Off" {
		t.Fatal("BMC still on")
	}
	if err := h.c.SetPower(ctx, n.UUID, "rebooting", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	h.wait(n.UUID, 10*time.Second, func(n *storage.Node) bool { return deref(n.PowerState) == "power on" && n.TargetPowerState == nil })
	// Switched off behind castiron's back: the sync notices.
	b.Set("/redfish/v1/Systems/437XR1138R2", "PowerState", "Off")
	h.wait(n.UUID, 10*time.Second, func(n *storage.Node) bool { return deref(n.PowerState) == "power off" })

	if err := h.c.SetBootDevice(ctx, n.UUID, "pxe", true); err != nil {
		t.Fatal(err)
	}
	bd, err := h.c.BootDevice(ctx, n.UUID)
	if err != nil || bd.BootDevice != "pxe" || bd.Persistent == nil || !*bd.Persistent {
		t.Fatalf("boot device %+v %v", bd, err)
	}
	if err := h.c.InjectNMI(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}

	// Bad driver_info is a 400 at once.
	bad := h.enroll(map[string]any{"redfish_address": "bmc", "redfish_auth_type": "kerberos"})
	if err := h.c.SetPower(ctx, bad.UUID, "power on", time.Second); !fault.Is(err, fault.Invalid) {
		t.Fatalf("bad driver_info: %v", err)
	}
}

// TestConductorBadBMCs: manage against each bad BMC ends in enroll with a
// clear last_error, the node unlocked, within bounded time.
func TestConductorBadBMCs(t *testing.T) {
	good := redfishfake.Start(t, "idrac9", false)
	tlsBMC := redfishfake.Start(t, "idrac9", true)
	broken := redfishfake.Start(t, "idrac9", false)
	broken.Hook = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems") {
			redfishfake.Error(w, http.StatusInternalServerError, "Base.1.8.InternalError", "The request failed due to an internal service error.")
			return true
		}
		return false
	}
	hung := redfishfake.Start(t, "idrac9", false)
	hung.Hook = func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done()
		return true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	d := newTestDriver(t, Config{RequestTimeout: 500 * time.Millisecond, ConnectTimeout: 500 * time.Millisecond})
	h := startConductor(t, d)
	cases := []struct {
		name string
		di   map[string]any
		want string
	}{
		{"wrong password", good.Node(map[string]any{"redfish_password": "nope"}).DriverInfo, "check redfish_username and redfish_password"},
		{"unreachable", map[string]any{"redfish_address": closed, "redfish_username": "admin", "redfish_password": "x"}, "connection refused"},
		{"self-signed certificate", tlsBMC.Node(map[string]any{"redfish_verify_ca": nil}).DriverInfo, "certificate is not trusted"},
		{"unknown system", good.Node(map[string]any{"redfish_system_id": "/redfish/v1/Systems/System.Embedded.9"}).DriverInfo, "check redfish_system_id"},
		{"500", broken.Node(nil).DriverInfo, "HTTP 500"},
		{"hangs", hung.Node(nil).DriverInfo, "no answer within 500ms"},
	}
	nodes := map[string]*storage.Node{}
	start := time.Now()
	for _, c := range cases {
		nodes[c.name] = h.enroll(c.di)
		h.provision(nodes[c.name].UUID, "manage")
	}
	for _, c := range cases {
		n := h.wait(nodes[c.name].UUID, 20*time.Second, func(n *storage.Node) bool { return n.ProvisionState != "verifying" })
		if n.ProvisionState != "enroll" || !strings.Contains(deref(n.LastError), c.want) || !strings.Contains(deref(n.LastError), "Failed to verify BMC credentials") {
			t.Errorf("%s: state %q last_error %q", c.name, n.ProvisionState, deref(n.LastError))
			continue
		}
		t.Logf("%s: %s", c.name, deref(n.LastError))
	}
	t.Logf("all %d bad BMCs back in enroll after %v", len(cases), time.Since(start))
}

// TestConductorVirtualMediaAPI: POST/DELETE /v1/nodes/{id}/vmedia reach the
// BMC through the redfish management interface; a failure lands in
// last_error and the node is unlocked.
func TestConductorVirtualMediaAPI(t *testing.T) {
	b := redfishfake.Start(t, "idrac9", false)
	h := startConductor(t, newTestDriver(t, Config{}))
	ctx := ctxT(t, 30*time.Second)
	n := h.enroll(b.Node(nil).DriverInfo)
	const slot = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD"
	if err := h.c.AttachVirtualMedia(ctx, n.UUID, engine.VMediaRequest{DeviceType: "cdrom", ImageURL: "http://10.0.0.1/x.iso"}); err != nil {
		t.Fatal(err)
	}
	got := h.wait(n.UUID, 10*time.Second, func(*storage.Node) bool { return true })
	if b.Get(slot)["Inserted"] != true || got.LastError != nil {
		t.Fatalf("attach: slot %v last_error %v", b.Get(slot), deref(got.LastError))
	}
	if err := h.c.DetachVirtualMedia(ctx, n.UUID, nil); err != nil {
		t.Fatal(err)
	}
	h.wait(n.UUID, 10*time.Second, func(*storage.Node) bool { return true })
	if b.Get(slot)["Inserted"] != false {
		t.Fatalf("detach: slot %v", b.Get(slot))
	}
	// iDRAC has no floppy slot.
	if err := h.c.AttachVirtualMedia(ctx, n.UUID, engine.VMediaRequest{DeviceType: "floppy", ImageURL: "http://10.0.0.1/f.img"}); err != nil {
		t.Fatal(err)
	}
	got = h.wait(n.UUID, 10*time.Second, func(n *storage.Node) bool { return n.LastError != nil })
	if want := "Could not attach device floppy to node " + n.UUID + ": No suitable virtual media device found"; !strings.HasPrefix(deref(got.LastError), want) {
		t.Fatalf("last_error %q, want %q...", deref(got.LastError), want)
	}
}
