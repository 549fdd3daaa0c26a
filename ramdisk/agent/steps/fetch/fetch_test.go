package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"castiron/ramdisk/trust"
	"castiron/ramdisk/trust/trusttest"
)

func payload(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// flaky serves data, breaking the first `breaks` transfers after half of
// what they send; honourRange=false ignores Range headers.
type flaky struct {
	mu          sync.Mutex
	data        []byte
	breaks      int
	honourRange bool
	stall       time.Duration // before breaking, instead of closing
	ranges      []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.ranges = append(f.ranges, r.Header.Get("Range"))
	brk := f.breaks > 0
	f.breaks--
	f.mu.Unlock()
	if !f.honourRange {
		r.Header.Del("Range")
	}
	if !brk {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "img", time.Time{}, bytes.NewReader(f.data))
		return
	}
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		start, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		w.Header().Set("Content-Range", "bytes "+strconv.Itoa(start)+"-"+strconv.Itoa(len(f.data)-1)+"/"+strconv.Itoa(len(f.data)))
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)-start))
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
		w.Header().Set("ETag", `"v1"`)
	}
	rest := f.data[start:]
	w.Write(rest[:len(rest)/2])
	w.(http.Flusher).Flush()
	if f.stall > 0 {
		select {
		case <-time.After(f.stall):
		case <-r.Context().Done():
		}
		return
	}
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func opts() Options { return Options{RetryDelay: time.Millisecond, IdleTimeout: 5 * time.Second} }

func TestResume(t *testing.T) {
	data := payload(3 << 20)
	tests := []struct {
		name        string
		srv         *flaky
		o           Options
		wantRanges  int
		wantResumes int
		wantErr     bool
	}{
		{"whole", &flaky{data: data, honourRange: true}, opts(), 1, 0, false},
		{"range", &flaky{data: data, breaks: 2, honourRange: true}, opts(), 3, 2, false},
		{"no range support", &flaky{data: data, breaks: 1}, opts(), 2, 1, false},
		{"too many breaks", &flaky{data: data, breaks: 5, honourRange: true}, opts(), 4, 3, true},
		{"stalled", &flaky{data: data, breaks: 1, honourRange: true, stall: 3 * time.Second}, Options{RetryDelay: time.Millisecond, IdleTimeout: 200 * time.Millisecond}, 2, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.srv)
			defer srv.Close()
			b, err := Open(context.Background(), srv.URL+"/img", tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.Size() != int64(len(data)) {
				t.Fatalf("size %d", b.Size())
			}
			got, err := io.ReadAll(b)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("got %d bytes, not the file", len(got))
			}
			if len(tc.srv.ranges) != tc.wantRanges || b.Resumes() != tc.wantResumes {
				t.Fatalf("requests %q, resumes %d", tc.srv.ranges, b.Resumes())
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/busy":
			if n%3 != 0 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()

	_, err := Open(context.Background(), srv.URL+"/missing", opts())
	var he *HTTPError
	if !errors.As(err, &he) || he.Code != 404 || calls != 1 {
		t.Fatalf("404: %v after %d calls", err, calls)
	}
	calls = 0
	b, err := Open(context.Background(), srv.URL+"/busy", opts())
	if err != nil || calls != 3 {
		t.Fatalf("503 twice then 200: %v after %d calls", err, calls)
	}
	b.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, srv.URL+"/busy", opts()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := Get(context.Background(), srv.URL+"/busy", 1, opts()); err == nil {
		t.Fatal("Get past its limit succeeded")
	}
}

// TestTrustedOnly: with castiron's CA set, an image comes over HTTPS from a
// server the CA vouches for; a plain-HTTP URL and a server with another
// certificate are refused, and the plain-HTTP server sees no request.
func TestTrustedOnly(t *testing.T) {
	image := []byte("a trusted image")
	castiron, tlsCfg := trusttest.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(image) }))
	var rogueHits atomic.Int32
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rogueHits.Add(1)
		w.Write([]byte("a rogue image"))
	}))
	defer rogue.Close()
	impostor := httptest.NewTLSServer(rogue.Config.Handler)
	defer impostor.Close()
	o := opts()
	o.TLS = tlsCfg
	if got, err := Get(context.Background(), castiron.URL+"/image", 1<<20, o); err != nil || !bytes.Equal(got, image) {
		t.Fatalf("trusted download: %q %v", got, err)
	}
	if _, err := Get(context.Background(), rogue.URL+"/image", 1<<20, o); !errors.Is(err, trust.ErrPlainHTTP) {
		t.Errorf("plain HTTP: %v", err)
	}
	if _, err := Get(context.Background(), impostor.URL+"/image", 1<<20, o); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
	if n := rogueHits.Load(); n != 0 {
		t.Errorf("the rogue got %d requests", n)
	}
}
