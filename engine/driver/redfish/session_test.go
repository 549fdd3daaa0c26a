package redfish

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/redfish/redfishfake"
)

// One session per BMC endpoint and user, shared by every node and call,
// logged in once even under concurrent calls, deleted at Close.
func TestSessionReusedAndClosed(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	n1, n2 := b.Node(nil), b.Node(nil)
	n2.UUID = "7265646a-0000-4000-8000-000000000002"
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := n1
			if i%2 == 1 {
				n = n2
			}
			_, err := d.PowerState(ctx, n)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if b.Logins != 1 || d.Sessions() != 1 || b.LiveSessions() != 1 {
		t.Fatalf("logins %d, driver sessions %d, BMC sessions %d: want one shared session", b.Logins, d.Sessions(), b.LiveSessions())
	}
	if b.Count("GET /redfish/v1/Systems/437XR1138R2") != 20 || b.Count("GET /redfish/v1/Systems") != 21 {
		t.Fatalf("the only system is looked up once per endpoint: %v", b.Requests)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Logouts != 1 || b.LiveSessions() != 0 || d.Sessions() != 0 {
		t.Fatalf("after Close: %d logouts, %d sessions left on the BMC", b.Logouts, b.LiveSessions())
	}
	// Usable again after Close: a new session.
	if _, err := d.PowerState(ctx, n1); err != nil || b.Logins != 2 {
		t.Fatalf("after Close: %v, %d logins", err, b.Logins)
	}
	_ = d.Close(ctx)
	if b.LiveSessions() != 0 {
		t.Fatal("session leaked")
	}
}

// A session the BMC forgot (timeout, BMC reboot) is replaced on the 401 and
// the call goes through.
func TestSessionRefreshedOn401(t *testing.T) {
	b := redfishfake.Start(t, "ilo5", false)
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	n := b.Node(nil)
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	b.Mu.Lock()
	b.Tokens = map[string]string{} // the BMC expired it
	b.Mu.Unlock()
	if err := d.SetPowerState(ctx, n, driver.PowerOff, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if b.Logins != 2 || b.LiveSessions() != 1 {
		t.Fatalf("logins %d, live %d", b.Logins, b.LiveSessions())
	}
	_ = d.Close(ctx)
	if b.LiveSessions() != 0 || b.Logouts != 1 {
		t.Fatalf("iLO's absolute Location: session not deleted (%d live, %d logouts)", b.LiveSessions(), b.Logouts)
	}
}

// Another password is another endpoint: a cached session never hides a
// wrong password.
func TestSessionKeyedByPassword(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	ctx := ctxT(t, 30*time.Second)
	if err := d.Verify(ctx, b.Node(nil)); err != nil {
		t.Fatal(err)
	}
	err := d.Verify(ctx, b.Node(map[string]any{"redfish_password": "wrong", "redfish_auth_type": "session"}))
	if !errors.Is(err, ErrAuthentication) {
		t.Fatalf("wrong password with a live session for the right one: %v", err)
	}
}

// auth_type auto falls back to basic on a BMC without a session service
// (sushy-tools); "session" says what is missing; "basic" never logs in.
func TestAuthTypes(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	b.SessionsPath = ""
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	if err := d.Verify(ctx, b.Node(nil)); err != nil {
		t.Fatal(err)
	}
	if d.Sessions() != 0 || b.Count("POST /redfish/v1/SessionService/Sessions") != 1 {
		t.Fatalf("auto without a session service: %d sessions, requests %v", d.Sessions(), b.Requests)
	}
	if _, err := d.PowerState(ctx, b.Node(nil)); err != nil || b.Count("POST /redfish/v1/SessionService/Sessions") != 1 {
		t.Fatalf("basic remembered: %v %v", err, b.Requests)
	}
	err := d.Verify(ctx, b.Node(map[string]any{"redfish_auth_type": "session"}))
	if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "refused a session") || !strings.Contains(err.Error(), "redfish_auth_type") {
		t.Fatalf("session auth without a session service: %v", err)
	}

	b2 := redfishfake.Start(t, "idrac9", false)
	if err := d.Verify(ctx, b2.Node(map[string]any{"redfish_auth_type": "basic"})); err != nil {
		t.Fatal(err)
	}
	if b2.Logins != 0 || b2.Count("POST") != 0 {
		t.Fatalf("basic auth logged in: %v", b2.Requests)
	}
}

// Endpoints beyond MaxSessions, and idle ones, are logged out.
func TestSessionEviction(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	b1 := redfishfake.Start(t, "dmtf-rackmount", false)
	b2 := redfishfake.Start(t, "idrac9", false)
	d := newTestDriver(t, Config{MaxSessions: 1})
	defer d.Close(context.Background())
	if err := d.Verify(ctx, b1.Node(nil)); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(ctx, b2.Node(nil)); err != nil {
		t.Fatal(err)
	}
	if b1.LiveSessions() != 0 || b1.Logouts != 1 || b2.LiveSessions() != 1 {
		t.Fatalf("LRU: b1 live %d logouts %d, b2 live %d", b1.LiveSessions(), b1.Logouts, b2.LiveSessions())
	}

	d2 := newTestDriver(t, Config{SessionIdle: 50 * time.Millisecond})
	defer d2.Close(context.Background())
	if err := d2.Verify(ctx, b1.Node(nil)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := d2.Verify(ctx, b2.Node(nil)); err != nil {
		t.Fatal(err)
	}
	if b1.LiveSessions() != 0 {
		t.Fatalf("idle endpoint kept its session")
	}
}
