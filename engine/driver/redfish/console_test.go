package redfish

import (
	"context"
	"io"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/console"
	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/fake"
	"castiron/engine/enginetest"
	"castiron/fault"
	"castiron/storage"

	"golang.org/x/crypto/ssh"
)

// The redfish-ssh console against castiron's emulator on loopback
// (state-only: its simulated host console prints a boot log and echoes
// what is typed).

// sshSim starts an emulator BMC with its SSH console served, powered on.
func sshSim(t *testing.T, cfg redfishsim.Config) (*redfishsim.Server, driver.Node) {
	t.Helper()
	bmc, n := startSim(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bmc.ServeSSH(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeSSH: %v", err)
		}
	})
	for bmc.SSHPort() == 0 {
		time.Sleep(time.Millisecond)
	}
	d := fastDriver(t)
	if err := d.SetPowerState(ctxT(t, 10*time.Second), n, driver.PowerOn, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return bmc, n
}

// runLink runs link with a pipe for input; it returns the writer, the
// output and a stop that ends Run and waits for it.
func runLink(t *testing.T, link driver.SerialLink) (io.Writer, io.Reader, func() error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := link.Run(ctx, inR, outW)
		outW.CloseWithError(io.EOF)
		inR.Close()
		done <- err
	}()
	stopped := false
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
			_ = link.Close(context.Background())
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return inW, outR, stop
}

// TestSSHConsoleLink: castiron's SSH console finds the BMC's SSH console
// through Redfish, logs in with the Redfish credentials, carries text both
// ways, learns the host key (trust on first use) and then refuses another
// one; a key pinned in driver_info is checked; a wrong password, a BMC
// without an SSH console and a BMC that does not answer fail in bounded
// time.
func TestSSHConsoleLink(t *testing.T) {
	bmc, n := sshSim(t, redfishsim.Config{})
	d := fastDriver(t)
	sc := d.SSHConsole()
	ctx := ctxT(t, 30*time.Second)
	if port, err := sc.ValidateSerial(n); port != 0 || err != nil {
		t.Fatalf("ValidateSerial = %d, %v", port, err)
	}

	link, err := sc.OpenSerial(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	learned := link.(driver.InternalInfoUpdater).InternalInfoUpdates()[ConsoleHostKeyKey]
	want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(bmc.SSHHostKey())))
	if learned != want {
		t.Fatalf("learned host key %q, want %q", learned, want)
	}
	in, out, stop := runLink(t, link)
	enginetest.ReadFor(t, out, "simulated login: ")
	io.WriteString(in, "castiron-typed\r")
	enginetest.ReadFor(t, out, "castiron-typed\r\n")
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}

	// The recorded key is required from now on.
	recorded := n
	recorded.InternalInfo = map[string]any{ConsoleHostKeyKey: want}
	link, err = sc.OpenSerial(ctx, recorded)
	if err != nil {
		t.Fatalf("with the recorded key: %v", err)
	}
	if u := link.(driver.InternalInfoUpdater).InternalInfoUpdates(); len(u) != 0 {
		t.Errorf("a known key recorded again: %v", u)
	}
	link.Close(ctx)
	other := otherKey(t)
	recorded.InternalInfo = map[string]any{ConsoleHostKeyKey: other}
	if _, err := sc.OpenSerial(ctx, recorded); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("a changed host key: %v", err)
	}
	// driver_info's key wins over the recorded one (how an operator
	// accepts a BMC's new key): the fingerprint, or the key.
	pinned := n
	pinned.DriverInfo = maps.Clone(n.DriverInfo)
	pinned.InternalInfo = recorded.InternalInfo
	pinned.DriverInfo[ConsoleHostKeyKey] = ssh.FingerprintSHA256(bmc.SSHHostKey())
	link, err = sc.OpenSerial(ctx, pinned)
	if err != nil {
		t.Fatalf("pinned fingerprint: %v", err)
	}
	link.Close(ctx)
	pinned.DriverInfo[ConsoleHostKeyKey] = other
	if _, err := sc.OpenSerial(ctx, pinned); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "driver_info/redfish_console_host_key") {
		t.Fatalf("a pinned key that differs: %v", err)
	}
	pinned.DriverInfo[ConsoleHostKeyKey] = "not a key"
	if _, err := sc.ValidateSerial(pinned); !fault.Is(err, fault.Invalid) {
		t.Fatalf("a malformed pinned key: %v", err)
	}

	// A wrong password: refused by the BMC, in bounded time.
	bad := n
	bad.DriverInfo = maps.Clone(n.DriverInfo)
	bad.DriverInfo["redfish_password"] = "wrong"
	start := time.Now()
	if _, err := sc.OpenSerial(ctx, bad); err == nil {
		t.Fatal("a wrong password opened the console")
	}
	t.Logf("wrong password refused in %v", time.Since(start).Round(time.Millisecond))
}

// TestSSHConsoleWrongSSHPassword: the Redfish login works but the BMC's
// SSH service refuses the password: a clear error, no hang.
func TestSSHConsoleWrongSSHPassword(t *testing.T) {
	_, n := sshSim(t, redfishsim.Config{SSHPassword: "only-ssh-knows"})
	start := time.Now()
	link, err := fastDriver(t).SSHConsole().OpenSerial(ctxT(t, 30*time.Second), n)
	if err == nil {
		link.Close(context.Background())
		t.Fatal("the BMC's SSH accepted the wrong password")
	}
	if !strings.Contains(err.Error(), "SSH login to the serial console") || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("wrong SSH password: %v", err)
	}
	t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func otherKey(t *testing.T) string {
	t.Helper()
	other, _ := startSim(t, redfishsim.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = other.ServeSSH(ctx, ln) }()
	for other.SSHHostKey() == nil {
		time.Sleep(time.Millisecond)
	}
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other.SSHHostKey())))
	cancel()
	<-done
	return k
}

// TestSSHConsoleNone: a BMC without an SSH serial console (no
// SerialConsole in its Redfish) is refused with a clear message.
func TestSSHConsoleNone(t *testing.T) {
	_, n := startSim(t, redfishsim.Config{})
	_, err := fastDriver(t).SSHConsole().OpenSerial(ctxT(t, 10*time.Second), n)
	if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "offers no serial console over SSH") {
		t.Fatalf("no SerialConsole: %v", err)
	}
}

// TestSSHConsoleVendors: iDRAC and iLO, whose SSH service is their CLI:
// the entry command from the System's SerialConsole (sent as exec, or
// typed on a shell when the BMC refuses exec), or, when only the Manager
// advertises the console (older Redfish), the vendor's usual one and the
// port from NetworkProtocol.
func TestSSHConsoleVendors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  redfishsim.Config
	}{
		{"idrac", redfishsim.Config{Flavour: redfishsim.IDRAC}},
		{"ilo", redfishsim.Config{Flavour: redfishsim.ILO}},
		{"idrac-manager-only", redfishsim.Config{Flavour: redfishsim.IDRAC, SSHConsoleManagerOnly: true}},
		{"ilo-manager-only", redfishsim.Config{Flavour: redfishsim.ILO, SSHConsoleManagerOnly: true}},
		// exec refused: a shell, and the entry command typed on it.
		{"idrac-no-exec", redfishsim.Config{Flavour: redfishsim.IDRAC, SSHNoExec: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, n := sshSim(t, tc.cfg)
			link, err := fastDriver(t).SSHConsole().OpenSerial(ctxT(t, 30*time.Second), n)
			if err != nil {
				t.Fatal(err)
			}
			in, out, _ := runLink(t, link)
			enginetest.ReadFor(t, out, "simulated login: ")
			io.WriteString(in, "typed\r")
			enginetest.ReadFor(t, out, "typed\r\n")
		})
	}
}

// TestConductorSSHConsole: redfish-ssh through the real conductor: enable
// (console_info socat URL, the host key recorded), a TCP client and an
// attached viewer see the same stream and both type, a conductor restart
// restores the console on the same URL, disable closes the viewers;
// a BMC without an SSH console leaves console_enabled false with Ironic's
// "Error enabling the console" in last_error.
func TestConductorSSHConsole(t *testing.T) {
	bmc, n0 := sshSim(t, redfishsim.Config{})
	d := fastDriver(t)
	rf := engine.WithSerialConsoles(engine.NewRedfishHardware(d, Properties()), nil, d.SSHConsole())
	if !rf.Enabled("console", engine.ConsoleRedfishSSH) || rf.Default("console") != "no-console" {
		t.Fatalf("console interfaces %v", rf.Interfaces["console"])
	}
	db, ports := filepath.Join(t.TempDir(), "castiron.db"), enginetest.FreePortRange(t)
	start := func() *harness {
		c, st := enginetest.StartAt(t, db, engine.Config{Hostname: "ssh-console-test", ConsoleHost: "127.0.0.1", ConsoleListen: "127.0.0.1",
			ConsolePorts: ports, Console: console.Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}},
			engine.NewFakeHardware(fake.New()), rf)
		return &harness{t: t, c: c, st: st}
	}
	h := start()
	c := h.c
	ctx := ctxT(t, time.Minute)

	n := &storage.Node{Driver: "redfish", DriverInfo: n0.DriverInfo, ConsoleInterface: engine.ConsoleRedfishSSH}
	if err := c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	got := h.wait(n.UUID, 20*time.Second, func(n *storage.Node) bool { return n.ConsoleEnabled || n.LastError != nil })
	if !got.ConsoleEnabled {
		t.Fatalf("console not enabled: %v", deref(got.LastError))
	}
	if k := got.DriverInternalInfo[ConsoleHostKeyKey]; k != strings.TrimSpace(string(ssh.MarshalAuthorizedKey(bmc.SSHHostKey()))) {
		t.Fatalf("host key not recorded: %v", k)
	}
	on, info, err := c.ConsoleInfo(ctx, n.UUID)
	url, _ := info["url"].(string)
	if err != nil || !on || info["type"] != "socat" || !strings.HasPrefix(url, "tcp://127.0.0.1:") {
		t.Fatalf("console info %v %v %v", on, info, err)
	}

	tcp, err := net.Dial("tcp", strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	enginetest.ReadFor(t, tcp, "simulated login: ")
	_, v1, err := c.AttachConsole(ctx, n.UUID, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	sb, v2, err := c.AttachConsole(ctx, n.UUID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if !strings.Contains(string(sb), "simulated login: ") {
		t.Errorf("scrollback %q", sb)
	}
	io.WriteString(tcp, "from-socat\r")
	enginetest.ReadFor(t, v1, "from-socat\r\n")
	io.WriteString(v1, "from-web\r")
	enginetest.ReadFor(t, tcp, "from-web\r\n")
	enginetest.ReadFor(t, v2, "from-web\r\n")
	if _, err := v2.Write([]byte("x")); !fault.Is(err, fault.Forbidden) {
		t.Errorf("read-only viewer typed: %v", err)
	}

	// A conductor restart: the console comes back on the same URL, over
	// the host key recorded at the first connection.
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v1.Close()
	v2.Close()
	tcp.Close()
	h = start()
	c = h.c
	var v3 io.ReadWriteCloser
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, v3, err = c.AttachConsole(ctx, n.UUID, true); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("console not restored after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer v3.Close()
	if _, info2, err := c.ConsoleInfo(ctx, n.UUID); err != nil || info2["url"] != url {
		t.Fatalf("after restart: %v %v, want %s", info2, err, url)
	}
	tcp, err = net.Dial("tcp", strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	io.WriteString(v3, "after-restart\r")
	enginetest.ReadFor(t, tcp, "after-restart\r\n")

	if err := c.SetConsole(ctx, n.UUID, false); err != nil {
		t.Fatal(err)
	}
	h.wait(n.UUID, 20*time.Second, func(n *storage.Node) bool { return !n.ConsoleEnabled })
	for name, r := range map[string]io.Reader{"tcp": tcp, "viewer": v3} {
		done := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, r); done <- err }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still open 10s after disable", name)
		}
	}

	// A BMC without an SSH console: enable fails, recorded as Ironic does.
	_, plain := startSim(t, redfishsim.Config{})
	bare := &storage.Node{Driver: "redfish", DriverInfo: plain.DriverInfo, ConsoleInterface: engine.ConsoleRedfishSSH}
	if err := c.CreateNode(ctx, bare, true); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := c.SetConsole(ctx, bare.UUID, true); err != nil {
		t.Fatal(err)
	}
	got = h.wait(bare.UUID, 20*time.Second, func(n *storage.Node) bool { return n.LastError != nil })
	if got.ConsoleEnabled || !strings.HasPrefix(deref(got.LastError), "Error enabling the console on node "+bare.UUID+". Reason: ") ||
		!strings.Contains(deref(got.LastError), "offers no serial console over SSH") {
		t.Fatalf("enable on a BMC without SSH console: enabled %v last_error %q", got.ConsoleEnabled, deref(got.LastError))
	}
	t.Logf("refused in %v: %s", time.Since(began).Round(time.Millisecond), deref(got.LastError))

	// redfish-ssh is not enabled on a type without it (Ironic's error).
	plainRF := &storage.Node{Driver: "fake-hardware", ConsoleInterface: engine.ConsoleRedfishSSH}
	if err := c.CreateNode(ctx, plainRF, true); !fault.Is(err, fault.Invalid) {
		t.Fatalf("redfish-ssh on fake-hardware: %v", err)
	}
}
