//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// solRelayAddr is where ipmi_sim's SOL device connects, on the lab
// namespace's loopback.
const solRelayAddr = "127.0.0.1:9003"

// solRelay is the BMC's side of the VM's serial port: ipmi_sim's sol
// device ("tcp:127.0.0.1:9003") connects here when a SOL payload is
// activated, gets a copy of everything the VM prints (from the lab's
// console logger, which still logs every line) and what it sends is typed
// into the VM. ipmi_sim reconnects by itself (about every 10 s) while SOL
// stays active.
type solRelay struct {
	addr string
	ln   net.Listener
	con  *consoleLogger
	mu   sync.Mutex
	conn net.Conn
	wg   sync.WaitGroup
}

func (l *Lab) startSOLRelay() error {
	ln, err := nsListen(l.NS.Path(), "tcp", solRelayAddr)
	if err != nil {
		return fmt.Errorf("SOL relay: %w", err)
	}
	r := &solRelay{addr: solRelayAddr, ln: ln, con: l.console}
	r.wg.Add(1)
	go r.accept()
	l.sol = r
	return nil
}

func (r *solRelay) accept() {
	defer r.wg.Done()
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			return // closed by Close
		}
		r.mu.Lock()
		r.conn = conn
		r.mu.Unlock()
		r.con.setTap(conn)
		buf := make([]byte, 1024)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				r.con.writeVM(buf[:n])
			}
			if err != nil {
				break
			}
		}
		r.con.setTap(nil)
		conn.Close()
	}
}

// Close stops the relay and waits for its goroutine.
func (r *solRelay) Close() {
	r.ln.Close()
	r.mu.Lock()
	if r.conn != nil {
		r.conn.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// nsListen is nsDialer's twin for a listening socket: created by a locked
// thread inside the namespace, it stays there.
func nsListen(nsPath, network, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ln, restored, err := listenIn(nsPath, network, addr)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}

func listenIn(nsPath, network, addr string) (ln net.Listener, restored bool, err error) {
	self, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer self.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns %s: %w", nsPath, err)
	}
	ln, err = net.Listen(network, addr)
	if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, false, fmt.Errorf("setns back to the host namespace: %w", rerr)
	}
	return ln, true, err
}

// lockedBuf collects a process's output for polling.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitOutput waits until buf holds want count times.
func waitOutput(t *testing.T, buf *lockedBuf, want string, count int, d time.Duration) time.Time {
	t.Helper()
	end := time.Now().Add(d)
	for strings.Count(buf.String(), want) < count {
		if time.Now().After(end) {
			t.Fatalf("console stream: %d× %q not seen in %v; got:\n%s", count, want, d, tailString(buf.String(), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Now()
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSerialConsoleSOL: a VM behind ipmi_sim with SOL wired to its serial
// port; the stock openstack CLI enables castiron's ipmitool-socat console
// and shows its URL, socat reads the VM's firmware output through it and
// types into iPXE's shell (Ctrl-B, a command, its echo), the web UI's
// Console tab in headless Chromium shows and types into the same session
// (a screenshot is written), the session
// survives a power cycle, and disabling the console closes socat's
// connection and the browser's.
func TestSerialConsoleSOL(t *testing.T) {
	requireLab(t, "socat", "openstack")
	l := NewLab(t, LabOptions{Boot: "bios", MemMB: 256, SOL: true})
	c := StartCastiron(t, l, CastironOptions{NoPXE: true, ExtraArgs: []string{
		"--console-port-range", "10000:10010", "--console-address", "127.0.0.1"}})
	node := c.EnrollIPMINode(t, l, "solvm", false)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := c.PatchNode(ctx, node.UUID, PatchOp{Op: "replace", Path: "/console_interface", Value: "ipmitool-socat"}); err != nil {
		t.Fatalf("console_interface: %v", err)
	}

	cli := baremetalCLI(ctx, t, l.NS, fmt.Sprintf("http://127.0.0.1:%d", CastironPort), l.Dir)
	url, enabled := enableConsoleCLI(ctx, t, cli, c, "solvm", node.UUID)

	// socat in the lab's namespace, as an operator would run it.
	stdin, out, socatDone := socatConsole(ctx, t, l.NS, url)

	// Power on (network boot: iPXE's banner and its Ctrl-B prompt).
	if o, err := l.Ipmitool(ctx, "chassis", "bootdev", "pxe"); err != nil {
		t.Fatalf("bootdev: %v: %s", err, o)
	}
	powerOn := time.Now()
	if o, err := l.Ipmitool(ctx, "chassis", "power", "on"); err != nil {
		t.Fatalf("power on: %v: %s", err, o)
	}
	firstByte, _, echo := typeIntoIPXE(t, stdin, out, "castiron-sol-")
	if _, ok := firstLine(l.Console(), powerOn, "iPXE"); !ok {
		t.Errorf("the lab's own console log has no iPXE line")
	}

	// The same session in the web UI's Console tab (headless Chromium).
	browser := webConsole(t, l, c, node.UUID, out)

	// Power off and on: the BMC keeps SOL active while the host is off
	// (the session stays, socat stays connected) and the next boot shows.
	powerOff(ctx, t, l)
	select {
	case err := <-socatDone:
		t.Fatalf("socat disconnected at power off: %v\n%s", err, tailString(out.String(), 500))
	case <-time.After(3 * time.Second):
	}
	seen := strings.Count(out.String(), "Ctrl-B")
	powerOn2 := time.Now()
	if o, err := l.Ipmitool(ctx, "chassis", "power", "on"); err != nil {
		t.Fatalf("power on: %v: %s", err, o)
	}
	secondBoot := waitOutput(t, out, "Ctrl-B", seen+1, 90*time.Second).Sub(powerOn2)

	// Disable: castiron closes the TCP connection, socat ends.
	disable := time.Now()
	cli("node", "console", "disable", "solvm")
	waitSocatClosed(t, socatDone, 20*time.Second)
	closed := time.Since(disable)
	if browser != nil {
		waitPage(t, browser, "the web console closed on disable", `document.getElementById('panel-console')?.dataset.state === 'closed'`)
	}
	if show := consoleShowCLI(t, cli, "solvm"); show.Enabled || show.Info != nil {
		t.Fatalf("after disable: %+v", show)
	}
	powerOff(ctx, t, l)
	t.Logf("E2E-TIMING sol enable=%.2fs power_on_to_first_ipxe_byte=%.2fs typed_line_echoed=%.2fs power_cycle_to_ctrlb=%.2fs disable_to_socat_closed=%.2fs",
		enabled.Seconds(), firstByte.Sub(powerOn).Seconds(), echo.Seconds(), secondBoot.Seconds(), closed.Seconds())
}

// baremetalCLI runs the stock `openstack baremetal` (no auth) in ns
// against castiron at endpoint, with HOME at home; a failure fails the
// test.
func baremetalCLI(ctx context.Context, t *testing.T, ns *netns, endpoint, home string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		full := append([]string{"--os-auth-type", "none", "--os-endpoint", endpoint,
			"--os-baremetal-api-version", "1.31", "baremetal"}, args...)
		cmd := ns.Command(ctx, "openstack", full...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openstack baremetal %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
}

// consoleShow is `openstack baremetal node console show -f json`.
type consoleShow struct {
	Enabled bool           `json:"console_enabled"`
	Info    map[string]any `json:"console_info"`
}

// consoleShowCLI is `node console show -f json`.
func consoleShowCLI(t *testing.T, cli func(args ...string) string, name string) consoleShow {
	t.Helper()
	var show consoleShow
	if err := json.Unmarshal([]byte(cli("node", "console", "show", name, "-f", "json")), &show); err != nil {
		t.Fatal(err)
	}
	return show
}

// enableConsoleCLI runs `node console enable` and polls `console show`
// until the console is enabled (30 s), failing at once when the node's
// last_error says enabling failed. The console must be a socat one on
// 127.0.0.1 (--console-address) in the 10000-10010 range; it returns its
// URL and how long enabling took.
func enableConsoleCLI(ctx context.Context, t *testing.T, cli func(args ...string) string, c *Castiron, name, uuid string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	cli("node", "console", "enable", name)
	for {
		show := consoleShowCLI(t, cli, name)
		if show.Enabled {
			took := time.Since(start)
			url, _ := show.Info["url"].(string)
			if show.Info["type"] != "socat" || !strings.HasPrefix(url, "tcp://127.0.0.1:100") {
				t.Fatalf("console show: %+v", show)
			}
			t.Logf("console show: %v (enabled in %v)", show.Info, took.Round(time.Millisecond))
			return url, took
		}
		if n, _ := c.GetNode(ctx, uuid); n != nil && n.LastErr() != "" {
			t.Fatalf("console enable failed: %s", n.LastErr())
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("console not enabled after 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// socatConsole runs `socat - TCP:host:port` in ns, as an operator would,
// for the console at url (tcp://host:port): what it prints collects in
// out, stdin types into the console, done gets socat's end.
func socatConsole(ctx context.Context, t *testing.T, ns *netns, url string) (io.WriteCloser, *lockedBuf, <-chan error) {
	t.Helper()
	socat := ns.Command(ctx, "socat", "-", "TCP:"+strings.TrimPrefix(url, "tcp://"))
	stdin, err := socat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuf{}
	socat.Stdout, socat.Stderr = out, out
	if err := socat.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- socat.Wait() }() // ends with socat (killed with ctx)
	return stdin, out, done
}

// waitSocatClosed fails the test unless socat ended within d.
func waitSocatClosed(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("socat still connected %v after console disable", d)
	}
}

// typeIntoIPXE waits on a console whose machine was just powered on from
// the network for iPXE's banner and its Ctrl-B prompt, opens iPXE's
// command line (Ctrl-B) and types `echo <prefix><random>`, until the word
// shows twice (echoed as typed, printed by the command). It returns when
// the first iPXE byte came, the word, and how long the echo took.
func typeIntoIPXE(t *testing.T, stdin io.Writer, out *lockedBuf, prefix string) (time.Time, string, time.Duration) {
	t.Helper()
	firstByte := waitOutput(t, out, "iPXE", 1, 90*time.Second)
	waitOutput(t, out, "Ctrl-B", 1, 60*time.Second)
	if _, err := stdin.Write([]byte{0x02}); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, "iPXE>", 1, 30*time.Second)
	typed := time.Now()
	word := prefix + randHex(3)
	if _, err := io.WriteString(stdin, "echo "+word+"\r"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, word, 2, 30*time.Second)
	return firstByte, word, time.Since(typed)
}
