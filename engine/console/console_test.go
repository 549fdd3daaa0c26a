package console

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/fault"
)

const nodeUUID = "6c616230-0000-4000-8000-0000000000c0"

// noLeaks fails the test if goroutines outlive it (registered first, so it
// runs after the other cleanups).
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		for end := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// rig is a node behind real ipmi_sim with SOL wired to a TCP serial port
// the test plays the machine on.
type rig struct {
	sim    *ipmisim.Sim
	port   *ipmisim.SerialPort
	drv    *ipmi.Driver
	node   driver.Node
	m      *Manager
	serial net.Conn
	cport  int
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{port: ipmisim.NewSerialPort(t)}
	r.sim = ipmisim.StartSimSOL(t, r.port.Addr())
	r.drv = ipmi.New(ipmi.Config{Timeout: 300 * time.Millisecond, Retries: 1, Logger: testLogger(t)})
	t.Cleanup(func() { r.drv.CloseSessions(context.Background()) })
	r.node = driver.Node{UUID: nodeUUID, DriverInfo: r.sim.DriverInfo()}
	cfg.Logger = testLogger(t)
	r.m = New(cfg)
	t.Cleanup(r.m.Close)
	return r
}

func (r *rig) opener() Opener {
	return func(ctx context.Context) (driver.SerialLink, error) { return r.drv.OpenSerial(ctx, r.node) }
}

func (r *rig) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := r.m.Start(ctx, nodeUUID, "127.0.0.1", Ports{Min: 1, Max: 0}.orFree(t), r.opener())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.cport = p
	r.serial = r.port.Accept(t)
}

// orFree replaces an unset range with one free port of the machine.
func (p Ports) orFree(t *testing.T) Ports {
	if p.Max >= p.Min {
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return Ports{Min: port, Max: port}
}

// readUntil reads r until want was seen, up to 15s.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got bytes.Buffer
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if strings.Contains(got.String(), want) {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reading for %q: %v (got %q)", want, err, got.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out reading for %q", want)
	}
	return got.String()
}

// TestConsoleEndToEnd: scrollback, two viewers, a TCP client both ways, a
// read-only viewer, and Stop ending every reader.
func TestConsoleEndToEnd(t *testing.T) {
	noLeaks(t)
	r := newRig(t, Config{})
	r.start(t)

	// What the machine printed before anyone looked is the scrollback.
	if _, err := r.serial.Write([]byte("SeaBIOS (version 1.16)\r\nBooting from ROM...\r\n")); err != nil {
		t.Fatal(err)
	}
	var sb []byte
	var ro io.ReadWriteCloser
	waitFor(t, "scrollback", func() bool {
		var err error
		if ro != nil {
			ro.Close()
		}
		sb, ro, err = r.m.Attach(nodeUUID, false)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(sb, []byte("Booting from ROM"))
	})
	defer ro.Close()

	// A TCP client gets the scrollback first, then what follows.
	tc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.cport))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	readUntil(t, tc, "Booting from ROM")
	r.serial.Write([]byte("login: "))
	readUntil(t, tc, "login: ")
	readUntil(t, ro, "login: ")

	// The TCP client types; the machine receives it.
	tc.Write([]byte("root\r"))
	br := bufio.NewReader(r.serial)
	r.serial.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := br.ReadString('\r'); err != nil || line != "root\r" {
		t.Fatalf("machine got %q, %v", line, err)
	}

	// A read-only viewer may not type.
	if _, err := ro.Write([]byte("x")); !fault.Is(err, fault.Forbidden) {
		t.Fatalf("read-only write: %v", err)
	}
	// A second writer types too.
	_, rw, err := r.m.Attach(nodeUUID, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Write([]byte("ls\r")); err != nil {
		t.Fatal(err)
	}
	if line, err := br.ReadString('\r'); err != nil || line != "ls\r" {
		t.Fatalf("machine got %q, %v", line, err)
	}
	// Close detaches this viewer only.
	rw.Close()
	r.serial.Write([]byte("still here\r\n"))
	readUntil(t, ro, "still here")

	// Stop: every reader ends with EOF, the TCP client is disconnected,
	// the port is closed, attach answers not running.
	r.m.Stop(nodeUUID)
	if _, err := io.ReadAll(ro); err != nil {
		t.Fatalf("viewer after stop: %v", err)
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(tc); err != nil {
		t.Fatalf("TCP client after stop: %v", err)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.cport)); err == nil {
		c.Close()
		t.Fatal("console port still open after Stop")
	}
	if _, _, err := r.m.Attach(nodeUUID, false); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("attach after stop: %v", err)
	}
}

// TestConsoleHugePasteAndStop: a paste far larger than any buffer waits for
// the serial link (bounded memory) and Stop ends it at once.
func TestConsoleHugePasteAndStop(t *testing.T) {
	noLeaks(t)
	r := newRig(t, Config{})
	r.start(t)
	// The machine drains what it is sent.
	var got int64
	var mu sync.Mutex
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 4096)
		for {
			n, err := r.serial.Read(buf)
			mu.Lock()
			got += int64(n)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	_, rw, err := r.m.Attach(nodeUUID, true)
	if err != nil {
		t.Fatal(err)
	}
	paste := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	wrote := make(chan error, 1)
	go func() { _, err := rw.Write(paste); wrote <- err }()
	waitFor(t, "some of the paste to reach the machine", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got > 512
	})
	start := time.Now()
	r.m.Stop(nodeUUID)
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("1 MiB paste completed: expected it to be cut by Stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("paste Write still blocked 5s after Stop")
	}
	mu.Lock()
	t.Logf("Stop with a 1 MiB paste pending took %v; %d bytes had reached the machine", time.Since(start), got)
	mu.Unlock()
	rw.Close()
	r.serial.Close()
	<-drained
}

// TestConsoleIdleTCPClient: a TCP client that neither sends nor receives is
// closed after IdleTimeout; the console keeps running.
func TestConsoleIdleTCPClient(t *testing.T) {
	noLeaks(t)
	r := newRig(t, Config{IdleTimeout: 300 * time.Millisecond})
	r.start(t)
	tc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.cport))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(tc); err != nil {
		t.Fatalf("idle client: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
	if _, ok := r.m.Port(nodeUUID); !ok {
		t.Fatal("console stopped with its idle client")
	}
}

// TestConsoleVanishedBMC: the BMC disappears (ipmi_sim killed): the link
// drops, the session keeps trying with backoff, viewers stay attached, and
// Stop still ends everything promptly.
func TestConsoleVanishedBMC(t *testing.T) {
	noLeaks(t)
	r := newRig(t, Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond})
	r.start(t)
	_, ro, err := r.m.Attach(nodeUUID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	waitFor(t, "link up", func() bool { return r.m.Connected(nodeUUID) })
	p, _ := os.FindProcess(r.sim.PID)
	p.Kill() // only the simulator this test started
	waitFor(t, "link down", func() bool { return !r.m.Connected(nodeUUID) })
	time.Sleep(time.Second) // a few reconnect attempts
	start := time.Now()
	r.m.Stop(nodeUUID)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Stop took %v with the BMC gone", d)
	}
	if _, err := io.ReadAll(ro); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleRefusedAndPortBusy: a BMC without SOL fails Start and frees the
// port; a fixed port in use fails Start without asking the BMC.
func TestConsoleRefusedAndPortBusy(t *testing.T) {
	noLeaks(t)
	sim := ipmisim.StartSim(t) // no sol device
	drv := ipmi.New(ipmi.Config{Logger: testLogger(t)})
	defer drv.CloseSessions(context.Background())
	n := driver.Node{UUID: nodeUUID, DriverInfo: sim.DriverInfo()}
	m := New(Config{Logger: testLogger(t)})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ports := Ports{Min: 1, Max: 0}.orFree(t)
	_, err := m.Start(ctx, nodeUUID, "127.0.0.1", ports, func(ctx context.Context) (driver.SerialLink, error) {
		return drv.OpenSerial(ctx, n)
	})
	if err == nil || !strings.Contains(err.Error(), "Serial-over-LAN activation failed") {
		t.Fatalf("Start on a BMC without SOL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports.Min))
	if err != nil {
		t.Fatalf("port not freed after a failed start: %v", err)
	}
	defer ln.Close()
	asked := false
	_, err = m.Start(ctx, nodeUUID, "127.0.0.1", ports, func(ctx context.Context) (driver.SerialLink, error) {
		asked = true
		return nil, errors.New("unreachable")
	})
	if !fault.Is(err, fault.Conflict) || asked {
		t.Fatalf("Start on a busy port: %v (BMC asked: %v)", err, asked)
	}
	if _, err := m.Start(ctx, nodeUUID, "127.0.0.1", Ports{}, nil); !fault.Is(err, fault.Invalid) {
		t.Fatalf("Start without ports: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
