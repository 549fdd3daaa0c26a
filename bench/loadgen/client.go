package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// client sends Ironic API requests to one loopback server.
type client struct {
	base       string // scheme://host:port without trailing slash
	apiVersion string
	http       *http.Client
	errs       *tally
}

// loopbackURL checks that raw points at a loopback address and returns it
// without a trailing slash.
func loopbackURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("bad -url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("bad -url %q: scheme must be http or https", raw)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("refusing -url %q: only loopback addresses such as 127.0.0.1 are allowed", raw)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host, "/"), nil
}

func newClient(c *common, workers int) (*client, error) {
	base, err := loopbackURL(c.url)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        workers + 4,
		MaxIdleConnsPerHost: workers + 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	return &client{
		base:       base,
		apiVersion: c.apiVersion,
		http:       &http.Client{Transport: tr, Timeout: c.timeout},
		errs:       newTally(),
	}, nil
}

// response is what one request produced.
type response struct {
	status int
	body   []byte
	dur    time.Duration
}

// do sends one request. A non-nil error means no HTTP response was read.
func (cl *client) do(ctx context.Context, method, path string, body []byte) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, cl.base+path, rd)
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Accept", "application/json")
	if cl.apiVersion != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", cl.apiVersion)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	t0 := time.Now()
	resp, err := cl.http.Do(req)
	if err != nil {
		return response{dur: time.Since(t0)}, err
	}
	var b []byte
	if n := resp.ContentLength; n >= 0 && n < 64<<20 {
		// One allocation of the announced size instead of ReadAll's
		// doubling (a page of nodes is 40 KB).
		b = make([]byte, n)
		_, err = io.ReadFull(resp.Body, b)
	} else {
		b, err = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	r := response{status: resp.StatusCode, body: b, dur: time.Since(t0)}
	if err != nil {
		return r, fmt.Errorf("reading body: %w", err)
	}
	return r, nil
}

// expect sends a request and checks the status. Failures are counted in the
// client's tally under key (e.g. "GET /v1/nodes/{uuid}") and returned.
func (cl *client) expect(ctx context.Context, key, method, path string, body []byte, want int) (response, error) {
	r, err := cl.do(ctx, method, path, body)
	if err != nil {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		cl.errs.add(key+" -> transport error", fmt.Sprintf("%s %s: %v", method, path, err))
		return r, err
	}
	if r.status != want {
		err := fmt.Errorf("%s %s: status %d, want %d: %s", method, path, r.status, want, snippet(r.body))
		cl.errs.add(fmt.Sprintf("%s -> %d", key, r.status), err.Error())
		return r, err
	}
	return r, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// tally counts failures by kind and keeps a few examples.
type tally struct {
	mu      sync.Mutex
	counts  map[string]int
	samples []string
}

func newTally() *tally { return &tally{counts: map[string]int{}} }

func (t *tally) add(kind, sample string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts[kind] == 0 && len(t.samples) < 8 {
		t.samples = append(t.samples, sample)
	}
	t.counts[kind]++
}

// record is one measurement, written as one JSON line.
type record struct {
	Time         string             `json:"time"`
	Target       string             `json:"target"`
	Mode         string             `json:"mode"`
	Variant      string             `json:"variant,omitempty"`
	Label        string             `json:"label,omitempty"`
	URL          string             `json:"url,omitempty"`
	OK           bool               `json:"ok"`
	Params       map[string]any     `json:"params"`
	Figures      map[string]float64 `json:"figures"`
	Errors       map[string]int     `json:"errors,omitempty"`
	ErrorSamples []string           `json:"error_samples,omitempty"`
	Note         string             `json:"note,omitempty"`
}

func newRecord(c *common, mode string) *record {
	return &record{
		Time:    time.Now().UTC().Format(time.RFC3339),
		Target:  c.target,
		Mode:    mode,
		Label:   c.label,
		URL:     c.url,
		OK:      true,
		Params:  map[string]any{},
		Figures: map[string]float64{},
	}
}

// attach copies the tally into the record; any failure makes it not OK.
func (r *record) attach(t *tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.counts) == 0 {
		return
	}
	r.Errors = map[string]int{}
	for k, v := range t.counts {
		r.Errors[k] = v
	}
	r.ErrorSamples = append([]string(nil), t.samples...)
	r.OK = false
}

// emit writes the JSON line to stdout and the human line (plus any error
// samples) to stderr.
func emit(r *record, human string) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // only plain maps and strings inside
	}
	fmt.Fprintf(os.Stdout, "%s\n", b)
	status := ""
	if !r.OK {
		status = "  [FAILURES]"
	}
	fmt.Fprintf(os.Stderr, "[%s] %s%s\n", r.Target, human, status)
	if len(r.Errors) > 0 {
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(os.Stderr, "    %6d x %s\n", r.Errors[k], k)
		}
		for _, s := range r.ErrorSamples {
			fmt.Fprintf(os.Stderr, "    e.g. %s\n", s)
		}
	}
}
