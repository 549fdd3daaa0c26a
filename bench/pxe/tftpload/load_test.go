package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pin/tftp/v3"
)

// serveDir runs a pin/tftp server on a random loopback port serving dir and
// stops it when the test ends.
func serveDir(t *testing.T, dir string) string {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	read := func(name string, rf io.ReaderFrom) error {
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			if ot, ok := rf.(tftp.OutgoingTransfer); ok {
				ot.SetSize(st.Size())
			}
		}
		_, err = rf.ReadFrom(f)
		return err
	}
	srv := tftp.NewServer(read, nil)
	srv.SetTimeout(time.Second)
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(conn) }()
	t.Cleanup(func() {
		srv.Shutdown()
		<-done
	})
	return conn.LocalAddr().String()
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	content := []byte(strings.Repeat("castiron-tftpload-", 7000)) // ~126 KB, 88 blocks of 1432
	if err := os.WriteFile(filepath.Join(dir, "boot.bin"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := serveDir(t, dir)
	other := append([]byte("X"), content[1:]...)

	tests := []struct {
		name                string
		cfg                 Config
		ok, failed, corrupt int
	}{
		{"all fetches succeed", Config{File: "boot.bin", N: 20, BlockSize: 1432, TSize: true, Want: content}, 20, 0, 0},
		{"512-byte blocks, no options", Config{File: "boot.bin", N: 3, Want: content}, 3, 0, 0},
		{"missing file fails every fetch", Config{File: "nope.bin", N: 4, BlockSize: 1432, Timeout: time.Second, Retries: 1}, 0, 4, 0},
		{"different bytes count as corrupt", Config{File: "boot.bin", N: 2, BlockSize: 1432, Want: other}, 0, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Addr = addr
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := Run(ctx, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tc.ok || res.Failed != tc.failed || res.Corrupt != tc.corrupt {
				t.Fatalf("ok/failed/corrupt = %d/%d/%d, want %d/%d/%d (errors %v)",
					res.OK, res.Failed, res.Corrupt, tc.ok, tc.failed, tc.corrupt, res.Errors)
			}
			if want := int64(tc.ok * len(content)); res.Bytes != want {
				t.Errorf("bytes = %d, want %d", res.Bytes, want)
			}
			if tc.ok > 0 && (res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max || res.Max > res.Wall) {
				t.Errorf("inconsistent times p50=%v p99=%v max=%v wall=%v", res.P50, res.P99, res.Max, res.Wall)
			}
		})
	}
}

func TestRunRejectsZeroClients(t *testing.T) {
	if _, err := Run(context.Background(), Config{Addr: "127.0.0.1:69", N: 0}); err == nil {
		t.Fatal("want an error for n=0")
	}
}

func TestRunCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Config{Addr: "127.0.0.1:9", File: "x", N: 3, Timeout: 100 * time.Millisecond, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The barrier may race with cancellation; every fetch either never
	// started (context error) or failed fast against the closed port.
	if res.OK != 0 || res.Failed != 3 {
		t.Fatalf("ok=%d failed=%d, want 0/3", res.OK, res.Failed)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.99, 4 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
	}
}

func TestSummarizeCountsErrors(t *testing.T) {
	boom := errors.New("boom")
	r := summarize([]fetch{{took: time.Second, bytes: 10}, {err: boom}, {err: boom}, {took: 2 * time.Second, err: errCorrupt}}, 3*time.Second)
	if r.OK != 1 || r.Failed != 2 || r.Corrupt != 1 || r.Bytes != 10 || r.Errors["boom"] != 2 {
		t.Fatalf("got %+v", r)
	}
}
