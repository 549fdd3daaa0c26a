package redfishsim_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver/bmcsim/redfishsim"

	"golang.org/x/crypto/ssh"
)

// serveSSH runs s's SSH console on a loopback port until the test ends.
func serveSSH(t *testing.T, s *redfishsim.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeSSH(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeSSH: %v", err)
		}
	})
	for s.SSHPort() == 0 { // ServeSSH has not started yet
		time.Sleep(time.Millisecond)
	}
	return ln.Addr().String()
}

// sshSession logs in with password and opens a session with a pty.
func sshSession(t *testing.T, addr, user, pass string, key ssh.PublicKey) (*ssh.Session, io.WriteCloser, *expect) {
	t.Helper()
	c, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.Password(pass)},
		HostKeyCallback: ssh.FixedHostKey(key), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	in, _ := sess.StdinPipe()
	out, _ := sess.StdoutPipe()
	if err := sess.RequestPty("vt100", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	return sess, in, newExpect(t, out)
}

// expect reads a stream and keeps what was not matched yet.
type expect struct {
	t    *testing.T
	data chan []byte
	buf  []byte
}

func newExpect(t *testing.T, r io.Reader) *expect {
	e := &expect{t: t, data: make(chan []byte, 64)}
	go func() { // ends with the stream (the session is closed at the end)
		defer close(e.data)
		for {
			b := make([]byte, 512)
			n, err := r.Read(b)
			if n > 0 {
				e.data <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	return e
}

// until waits (10 s at most) for want and returns what came up to it.
func (e *expect) until(want string) string {
	e.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if i := bytes.Index(e.buf, []byte(want)); i >= 0 {
			got := string(e.buf[:i+len(want)])
			e.buf = e.buf[i+len(want):]
			return got
		}
		select {
		case b, ok := <-e.data:
			if !ok {
				e.t.Fatalf("no %q before the stream ended: %q", want, e.buf)
			}
			e.buf = append(e.buf, b...)
		case <-timeout:
			e.t.Fatalf("no %q in 10s: %q", want, e.buf)
		}
	}
}

// TestSSHConsoleGeneric: a generic (OpenBMC-like) BMC's SSH port is the
// host console at once: the Redfish resources advertise it (System
// SerialConsole.SSH with the port, the Manager's SerialConsole and
// NetworkProtocol), the state-only machine prints its boot log and echoes
// what is typed, a second console session is refused while one runs, a
// wrong password is refused and counted.
func TestSSHConsoleGeneric(t *testing.T) {
	s, url := bmc(t, redfishsim.Config{})
	code, sys, _ := call(t, s, "GET", url+s.SystemPath(), nil)
	if _, has := sys["SerialConsole"]; code != 200 || has {
		t.Fatalf("without ServeSSH the system shows SerialConsole: %d %v", code, sys["SerialConsole"])
	}
	addr := serveSSH(t, s)
	_, port, _ := net.SplitHostPort(addr)

	_, sys, _ = call(t, s, "GET", url+s.SystemPath(), nil)
	sc, _ := sys["SerialConsole"].(map[string]any)
	sshp, _ := sc["SSH"].(map[string]any)
	if sshp["ServiceEnabled"] != true || sshp["Port"] != mustFloat(port) || sshp["SharedWithManagerCLI"] != false {
		t.Fatalf("System SerialConsole = %v", sc)
	}
	_, mgr, _ := call(t, s, "GET", url+s.ManagerPath(), nil)
	msc, _ := mgr["SerialConsole"].(map[string]any)
	if msc["ServiceEnabled"] != true || !strings.Contains(strings.Join(anyStrings(msc["ConnectTypesSupported"]), ","), "SSH") {
		t.Fatalf("Manager SerialConsole = %v", msc)
	}
	_, np, _ := call(t, s, "GET", url+s.ManagerPath()+"/NetworkProtocol", nil)
	if np["SSH"].(map[string]any)["Port"] != mustFloat(port) {
		t.Fatalf("NetworkProtocol = %v", np)
	}

	if code, _, _ := call(t, s, "POST", url+s.SystemPath()+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}); code != 204 {
		t.Fatalf("power on: %d", code)
	}
	sess, in, out := sshSession(t, addr, s.User(), s.Password(), s.SSHHostKey())
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	out.until("simulated login: ")
	io.WriteString(in, "root\r")
	out.until("root\r\n")

	// One console at a time.
	sess2, _, out2 := sshSession(t, addr, s.User(), s.Password(), s.SSHHostKey())
	if err := sess2.Shell(); err != nil {
		t.Fatal(err)
	}
	out2.until("in use by another session")
	if err := sess2.Wait(); err == nil {
		t.Error("the refused session exited 0")
	}

	before := s.Stats().AuthFailures
	_, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{User: s.User(), Auth: []ssh.AuthMethod{ssh.Password("wrong")},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("wrong password: %v", err)
	}
	if s.Stats().AuthFailures <= before {
		t.Error("auth failure not counted")
	}

	// The client leaving frees the console.
	sess.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sess3, _, out3 := sshSession(t, addr, s.User(), s.Password(), s.SSHHostKey())
		if err := sess3.Shell(); err != nil {
			t.Fatal(err)
		}
		if got := out3.until("\n"); !strings.Contains(got, "in use") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the console stayed in use after the first session closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSSHConsoleVendorCLI: iDRAC's and iLO's SSH session is their CLI; the
// entry command (typed, or as an exec request) enters the host console,
// and the System's SerialConsole.SSH says which it is.
func TestSSHConsoleVendorCLI(t *testing.T) {
	for _, tc := range []struct {
		flavour        redfishsim.Flavour
		prompt, banner string
	}{
		{redfishsim.IDRAC, "racadm>>", "Connected to serial device com2"},
		{redfishsim.ILO, "</>hpiLO-> ", "Virtual Serial Port Active"},
	} {
		t.Run(string(tc.flavour), func(t *testing.T) {
			s, url := bmc(t, redfishsim.Config{Flavour: tc.flavour})
			addr := serveSSH(t, s)
			_, sys, _ := call(t, s, "GET", url+s.SystemPath(), nil)
			sshp := sys["SerialConsole"].(map[string]any)["SSH"].(map[string]any)
			entry, _ := sshp["ConsoleEntryCommand"].(string)
			if entry == "" || sshp["SharedWithManagerCLI"] != true {
				t.Fatalf("SerialConsole.SSH = %v", sshp)
			}
			call(t, s, "POST", url+s.SystemPath()+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"})

			sess, in, out := sshSession(t, addr, s.User(), s.Password(), s.SSHHostKey())
			if err := sess.Shell(); err != nil {
				t.Fatal(err)
			}
			out.until(tc.prompt)
			io.WriteString(in, "bogus\r")
			out.until("Invalid command: bogus")
			io.WriteString(in, entry+"\r")
			out.until(tc.banner)
			out.until("simulated login: ")
			io.WriteString(in, "typed\r")
			out.until("typed\r\n")
			sess.Close()

			// exec of the entry command: straight to the host console.
			var sess2 *ssh.Session
			var out2 *expect
			deadline := time.Now().Add(5 * time.Second)
			for {
				sess2, _, out2 = sshSession(t, addr, s.User(), s.Password(), s.SSHHostKey())
				if err := sess2.Start(entry); err != nil {
					t.Fatal(err)
				}
				if got := out2.until("\n"); !strings.Contains(got, "in use") {
					if !strings.Contains(got, "simulated login: ") {
						out2.until("simulated login: ")
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("console still in use")
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestSSHConsoleManagerOnly: SSHConsoleManagerOnly leaves the System's
// SerialConsole out; the Manager still says SSH.
func TestSSHConsoleManagerOnly(t *testing.T) {
	s, url := bmc(t, redfishsim.Config{SSHConsoleManagerOnly: true})
	serveSSH(t, s)
	_, sys, _ := call(t, s, "GET", url+s.SystemPath(), nil)
	_, mgr, _ := call(t, s, "GET", url+s.ManagerPath(), nil)
	if _, has := sys["SerialConsole"]; has || mgr["SerialConsole"] == nil {
		t.Fatalf("system %v manager %v", sys["SerialConsole"], mgr["SerialConsole"])
	}
}

func mustFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
