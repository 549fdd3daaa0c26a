package ipmi

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver/ipmi/ipmisim"
)

// syncBuf is a bytes.Buffer safe for the SOL writer and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSOLAgainstIPMISim activates SOL on real ipmi_sim, reads what the
// "machine" prints, types into it, and deactivates.
func TestSOLAgainstIPMISim(t *testing.T) {
	noLeaks(t)
	port := ipmisim.NewSerialPort(t)
	s := ipmisim.StartSimSOL(t, port.Addr())
	d := newTestDriver(t, Config{})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 60*time.Second)

	link, err := d.OpenSerial(ctx, n)
	if err != nil {
		t.Fatalf("OpenSerial: %v", err)
	}
	serial := port.Accept(t)

	inR, inW := io.Pipe()
	var out syncBuf
	runErr := make(chan error, 1)
	go func() { runErr <- link.Run(ctx, inR, &out) }()

	// The machine prints; the console sees it.
	boot := "Linux version 6.1.0 (castiron test)\r\nlogin: "
	if _, err := serial.Write([]byte(boot)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "boot text over SOL", func() bool { return strings.Contains(out.String(), "login: ") })
	if got := out.String(); got != boot {
		t.Fatalf("SOL output %q, want %q", got, boot)
	}

	// The operator types; the machine receives it.
	if _, err := inW.Write([]byte("root\r")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(serial)
	serial.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.ReadString('\r')
	if err != nil || line != "root\r" {
		t.Fatalf("serial got %q, %v", line, err)
	}

	// Closing the input ends Run cleanly; Close deactivates.
	inW.Close()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := link.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestSOLRefused: a BMC without a SOL device refuses activation with an
// error naming the node and BMC, promptly.
func TestSOLRefused(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 30*time.Second)
	start := time.Now()
	link, err := d.OpenSerial(ctx, n)
	if err == nil {
		link.Close(ctx)
		t.Fatal("OpenSerial succeeded on a BMC without SOL")
	}
	if !strings.Contains(err.Error(), "Serial-over-LAN activation failed") || !strings.Contains(err.Error(), n.UUID) {
		t.Fatalf("error %q", err)
	}
	t.Logf("refused in %v: %v", time.Since(start), err)
}
