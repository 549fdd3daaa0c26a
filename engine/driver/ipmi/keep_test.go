package ipmi

import (
	"sync"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/ipmisim"
)

func simNode(b *ipmisim.BMC) driver.Node {
	return testNode(map[string]any{"ipmi_address": b.Host(), "ipmi_port": b.Port(),
		"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword, "ipmi_cipher_suite": 17})
}

// A power read on a kept session is one exchange; a BMC that forgot the
// session (restarted) costs one failed try, then a new session; idle
// sessions are closed with Close Session.
func TestKeptSessions(t *testing.T) {
	noLeaks(t)
	ctx := ctxT(t, 30*time.Second)
	f, err := ipmisim.Start(ctx, ipmisim.Config{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := f.BMCs[0]
	d := newTestDriver(t, Config{Timeout: 100 * time.Millisecond, Retries: 1})
	n := simNode(b)
	read := func(want string) uint64 {
		t.Helper()
		before := b.Stats().Received
		ps, err := d.PowerState(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if ps != want {
			t.Fatalf("power %q, want %q", ps, want)
		}
		return b.Stats().Received - before
	}
	if got := read(driver.PowerOff); got != 6 {
		t.Fatalf("first read: %d packets, want 6 (caps, open, RAKP 1, RAKP 3, privilege, status)", got)
	}
	b.SetPower(true)
	for i := 0; i < 3; i++ {
		if got := read(driver.PowerOn); got != 1 {
			t.Fatalf("kept read %d: %d packets, want 1", i, got)
		}
	}
	if d.OpenSessions() != 1 {
		t.Fatalf("%d sessions open, want 1", d.OpenSessions())
	}

	// Two reads at once: one uses the kept session, the other its own.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
	if d.OpenSessions() != 1 {
		t.Fatalf("%d sessions open after concurrent reads, want 1", d.OpenSessions())
	}

	// The BMC restarts on the same address and knows no session.
	addr := b.Addr
	f.Close()
	f2, err := ipmisim.Start(ctx, ipmisim.Config{N: 1, Port: addr.Port, PoweredOn: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	b = f2.BMCs[0]
	if got := read(driver.PowerOn); got < 7 {
		t.Fatalf("read after a BMC restart: %d packets, want the stale try and a new session (>= 7)", got)
	}
	if got := read(driver.PowerOn); got != 1 {
		t.Fatalf("kept read after the restart: %d packets, want 1", got)
	}

	d.CloseIdleSessions(ctx, time.Hour)
	if d.OpenSessions() != 1 {
		t.Fatal("a session used just now was closed as idle")
	}
	before := b.Stats().Received
	d.CloseIdleSessions(ctx, 0)
	if d.OpenSessions() != 0 || b.Stats().Received-before != 1 {
		t.Fatalf("after closing idle sessions: %d open, %d packets (want 0, 1 Close Session)", d.OpenSessions(), b.Stats().Received-before)
	}
}

// SessionPerOperation: every read sets up and closes its own session.
func TestSessionPerOperation(t *testing.T) {
	noLeaks(t)
	ctx := ctxT(t, 30*time.Second)
	f, err := ipmisim.Start(ctx, ipmisim.Config{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := f.BMCs[0]
	d := newTestDriver(t, Config{SessionPerOperation: true})
	for range 2 {
		before := b.Stats().Received
		if _, err := d.PowerState(ctx, simNode(b)); err != nil {
			t.Fatal(err)
		}
		if got := b.Stats().Received - before; got != 7 {
			t.Fatalf("%d packets, want 7", got)
		}
	}
	if d.OpenSessions() != 0 {
		t.Fatal("a session was kept")
	}
}
