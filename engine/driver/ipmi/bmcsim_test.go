package ipmi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
)

// The ipmi_sim harness itself is in ./ipmisim (shared with the client
// workflow tests); what follows is specific to this package's tests.

// udpRelay sits between the driver and a simulator on 127.0.0.1 and keeps a
// copy of every datagram the driver sent: with IPMI 1.5 the messages are
// signed but not encrypted, so a test can read the exact request bytes.
type udpRelay struct {
	port int
	mu   sync.Mutex
	sent [][]byte
}

func startRelay(t testing.TB, target int) *udpRelay {
	t.Helper()
	down, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: target})
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{port: down.LocalAddr().(*net.UDPAddr).Port}
	var client *net.UDPAddr
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // driver -> simulator
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, from, err := down.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			client = from
			r.sent = append(r.sent, append([]byte(nil), buf[:n]...))
			r.mu.Unlock()
			_, _ = up.Write(buf[:n])
		}
	}()
	go func() { // simulator -> driver
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP errors while nobody listens
			}
			r.mu.Lock()
			to := client
			r.mu.Unlock()
			if to != nil {
				_, _ = down.WriteToUDP(buf[:n], to)
			}
		}
	}()
	t.Cleanup(func() { down.Close(); up.Close(); wg.Wait() })
	return r
}

// bootFlagRequests returns the 5 data bytes of every Set System Boot Options
// parameter 5 request the driver sent: IPMI message rsAddr 0x20, netFn
// chassis (0x00), checksum 0xe0, rqAddr, rqSeq, cmd 0x08, param 0x05.
func (r *udpRelay) bootFlagRequests() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, p := range r.sent {
		for i := 0; i+12 <= len(p); i++ {
			if p[i] == 0x20 && p[i+1] == 0x00 && p[i+2] == 0xe0 && p[i+5] == 0x08 && p[i+6] == 0x05 {
				out = append(out, p[i+7:i+12])
			}
		}
	}
	return out
}

// newTestDriver logs through t.Log, so a driver's log lines show up next to
// the test that caused them.
func newTestDriver(t testing.TB, cfg Config) *Driver {
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	d := New(cfg)
	// Power reads keep their session open; close them before the leak
	// check (registered earlier, so it runs later).
	t.Cleanup(func() { d.CloseSessions(context.Background()) })
	return d
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
