package ipmisim_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/ipmi"
)

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

// TestSerialOverLAN: castiron's SOL client against the simulator's serial
// port, both cipher suites: output before activation is lost, output after
// reaches the console, typing reaches the machine, a second activation
// (after the first is closed) works.
func TestSerialOverLAN(t *testing.T) {
	f := start(t, ipmisim.Config{N: 1, Serial: true})
	b := f.BMCs[0]
	sp := b.Serial()
	sp.Write([]byte("lost: nobody listens\r\n"))
	d := newDriver(t, ipmi.Config{})
	for _, suite := range []int{3, 17} {
		ctx := ctxT(t, 30*time.Second)
		link, err := d.OpenSerial(ctx, node(b, suite))
		if err != nil {
			t.Fatalf("suite %d: OpenSerial: %v", suite, err)
		}
		if !sp.Attached() {
			t.Fatal("serial port not attached after activation")
		}
		pr, pw := io.Pipe()
		var out syncBuf
		done := make(chan error, 1)
		go func() { done <- link.Run(ctx, pr, &out) }()
		sp.Write([]byte("castiron demo boot log\r\nlogin: "))
		for end := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "login: "); {
			if time.Now().After(end) {
				t.Fatalf("suite %d: console got %q", suite, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if strings.Contains(out.String(), "lost") {
			t.Fatalf("output from before activation reached the console: %q", out.String())
		}
		pw.Write([]byte("root\r"))
		got := make([]byte, 5)
		if _, err := io.ReadFull(sp, got); err != nil || string(got) != "root\r" {
			t.Fatalf("machine read %q, %v", got, err)
		}
		pw.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := link.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if sp.Attached() {
			t.Fatal("still attached after Close")
		}
	}
	// Without Config.Serial, activation is refused.
	g := start(t, ipmisim.Config{N: 1})
	if _, err := d.OpenSerial(ctxT(t, 30*time.Second), node(g.BMCs[0], 3)); err == nil {
		t.Fatal("SOL activated on a BMC without a serial port")
	}
}

// BenchmarkSOL measures castiron's SOL client against the simulator over
// UDP loopback: output (machine prints 64 KiB, the console receives it)
// and input (4 KiB typed, the machine reads it), in bytes per second.
func BenchmarkSOL(b *testing.B) {
	f, err := ipmisim.Start(context.Background(), ipmisim.Config{N: 1, Serial: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sp := f.BMCs[0].Serial()
	d := ipmi.New(ipmi.Config{})
	defer d.CloseSessions(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	link, err := d.OpenSerial(ctx, node(f.BMCs[0], 3))
	if err != nil {
		b.Fatal(err)
	}
	defer link.Close(ctx)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out syncBuf
	go func() { _ = link.Run(ctx, pr, &out) }()

	b.Run("output-64KiB", func(b *testing.B) {
		chunk := bytes.Repeat([]byte("x"), 1024)
		b.SetBytes(64 << 10)
		for b.Loop() {
			before := len(out.String())
			for range 64 {
				sp.Write(chunk) // the simulator holds 64 KiB: none is dropped
			}
			for len(out.String()) < before+64<<10 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	b.Run("input-4KiB", func(b *testing.B) {
		in := bytes.Repeat([]byte("y"), 4096)
		got := make([]byte, 4096)
		b.SetBytes(4096)
		for b.Loop() {
			go pw.Write(in)
			if _, err := io.ReadFull(sp, got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
