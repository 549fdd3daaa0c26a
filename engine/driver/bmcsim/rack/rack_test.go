package rack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/httpapi"
	"castiron/pxe/boot"
	"castiron/pxe/netboot"
)

// gate answers the boot script's question with the conductor's decision
// (what appliance wires for DHCP and /boot/).
type gate struct{ cond *engine.Conductor }

func (g gate) Allow(ctx context.Context, mac net.HardwareAddr) (boot.Decision, bool) {
	d, ok := g.cond.BootTarget(ctx, mac)
	return boot.Decision{NodeUUID: d.NodeUUID, Purpose: d.Purpose, CPUArch: d.CPUArch}, ok
}

// castiron is a real conductor with the ipmi and redfish hardware types,
// its API and /boot/ (the iPXE scripts) on one loopback server.
func castiron(t *testing.T) string {
	t.Helper()
	quiet := enginetest.Quiet()
	ip := ipmi.New(ipmi.Config{Logger: quiet})
	rf := redfish.New(redfish.Config{Logger: quiet})
	t.Cleanup(func() { _ = rf.Close(context.Background()) })
	cond, _ := enginetest.Start(t, engine.Config{Hostname: "rack-conductor", AutomatedClean: true,
		AgentHeartbeatInterval: 200 * time.Millisecond, PowerSyncInterval: time.Hour},
		engine.NewIPMIHardware(ip, ip, ipmi.Properties()), engine.NewRedfishHardware(rf, redfish.Properties()))
	bootH := netboot.New(netboot.Config{Gate: gate{cond}, Logger: quiet})
	api := httpapi.New(cond, httpapi.Options{Logger: quiet, Extra: map[string]http.Handler{"/boot/": bootH}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRackDeploys takes one IPMI and one Redfish machine from enroll to
// active: castiron powers them on through their BMCs, they fetch their iPXE
// script from castiron, the agent inspects, cleans and writes the image,
// and after deployment each boots its OS from disk.
func TestRackDeploys(t *testing.T) {
	url := castiron(t)
	img := bytes.Repeat([]byte("castiron"), 1<<17)
	sum := sha256.Sum256(img)
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "img", time.Time{}, bytes.NewReader(img))
	}))
	defer imgSrv.Close()

	r, err := Start(context.Background(), Config{N: 2, BootURL: url, BootDelay: 50 * time.Millisecond, RamdiskDelay: 50 * time.Millisecond,
		AgentMinHeartbeat: 50 * time.Millisecond, LatencyMin: time.Millisecond, LatencyMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := &Client{URL: url, Poll: 50 * time.Millisecond, Timeout: time.Minute}
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, m := range r.Machines {
		wg.Go(func() {
			id, err := c.Enroll(ctx, m, nil)
			if err == nil {
				err = c.ToAvailable(ctx, id)
			}
			if err == nil {
				err = c.Deploy(ctx, id, imgSrv.URL+"/img", hex.EncodeToString(sum[:]))
			}
			if err != nil {
				t.Errorf("%s (%s): %v\nconsole:\n%s", m.Name, m.Protocol, err, m.Console.Scrollback())
				return
			}
			// castiron boots the deployed node from disk.
			deadline := time.Now().Add(20 * time.Second)
			for m.State() != StateOS && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if m.State() != StateOS {
				t.Errorf("%s (%s) is %q after deploy, want %q", m.Name, m.Protocol, m.State(), StateOS)
			}
			st, _ := m.Disks.Get(m.Hardware.Disks[0].Name)
			if st.ImageBytes != int64(len(img)) {
				t.Errorf("%s: root disk %+v", m.Name, st)
			}
			boots, agents := m.Stats()
			if agents != 3 || boots < 4 {
				t.Errorf("%s: %d boots, %d agent runs; want inspect, clean, deploy agents and a disk boot", m.Name, boots, agents)
			}
			log := string(m.Console.Scrollback())
			for _, want := range []string{"castiron: inspect boot of node " + id, "inventory posted", "castiron: deploy boot", "image written", m.Name + " login:"} {
				if !strings.Contains(log, want) {
					t.Errorf("%s console lacks %q:\n%s", m.Name, want, log)
				}
			}
		})
	}
	wg.Wait()
}

// TestBMCUserStep: castiron_bmc_user run by a machine's agent creates an
// IPMI user whose new password castiron's ipmi driver can then log in with
// (a real lanplus session), and a wrong password still cannot.
func TestBMCUserStep(t *testing.T) {
	r, err := Start(context.Background(), Config{N: 1, Protocols: []string{"ipmi"}, BootURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Machines[0]
	creds, err := m.bmcUser(context.Background(), "castiron")
	if err != nil {
		t.Fatal(err)
	}
	if creds.Username != "castiron" || len(creds.Password) < 16 || creds.UserID < 3 || creds.Channel != 1 {
		t.Fatalf("credentials %+v", creds)
	}
	d := ipmi.New(ipmi.Config{Logger: enginetest.Quiet()})
	info := func(pw string) driver.Node {
		return driver.Node{UUID: "n1", DriverInfo: map[string]any{"ipmi_address": m.IPMI().Host(), "ipmi_port": m.IPMI().Port(),
			"ipmi_username": "castiron", "ipmi_password": pw}, InternalInfo: map[string]any{}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if ps, err := d.PowerState(ctx, info(creds.Password)); err != nil || ps != driver.PowerOff {
		t.Fatalf("power state with the new user: %q, %v", ps, err)
	}
	if _, err := d.PowerState(ctx, info("wrong-password")); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	// A second run resets the password of the same user.
	again, err := m.bmcUser(context.Background(), "castiron")
	if err != nil || again.UserID != creds.UserID || again.Password == creds.Password {
		t.Fatalf("second run: %+v, %v (first %+v)", again, err, creds)
	}
}
