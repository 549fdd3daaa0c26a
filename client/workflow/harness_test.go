package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/client"
	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/httpapi"
	"castiron/storage"
)

// server is a real castiron (engine + httpapi over a temp SQLite file) on a
// loopback port with the fake-hardware, manual-management, ipmi and redfish
// types.
type server struct {
	t          testing.TB
	url        string
	st         *storage.SQLite
	user, pass string // http_basic credentials for the test's own reads
}

func newServer(t testing.TB, opts ...func(*httpapi.Options)) *server {
	t.Helper()
	quiet := enginetest.Quiet()
	d := fake.New()
	id := ipmi.New(ipmi.Config{Logger: quiet})
	rf := redfish.New(redfish.Config{Logger: quiet})
	// Registered first, so it runs after the conductor stopped.
	t.Cleanup(func() { _ = rf.Close(context.Background()) })
	cond, st := enginetest.Start(t, engine.Config{Hostname: "test-conductor", AutomatedClean: true, CallbackTimeout: time.Minute},
		engine.NewFakeHardware(d), engine.NewManualManagement(d),
		engine.NewIPMIHardware(id, id, ipmi.Properties()), engine.NewRedfishHardware(rf, redfish.Properties()))
	o := httpapi.Options{Logger: quiet}
	for _, f := range opts {
		f(&o)
	}
	srv := httptest.NewServer(httpapi.New(cond, o))
	t.Cleanup(srv.Close)
	return &server{t: t, url: srv.URL, st: st}
}

// run runs a client subcommand in-process (not on a terminal) and returns
// its exit code, stdout and stderr.
func (s *server) run(args ...string) (int, string, string) {
	s.t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, rest := args[0], append([]string{"--url", s.url}, args[1:]...)
	code := Run(ctx, cmd, rest, &out, &errb, false)
	return code, out.String(), errb.String()
}

// runWant is run that fails the test unless the exit code is want; it
// returns stdout and stderr.
func (s *server) runWant(want int, args ...string) (string, string) {
	s.t.Helper()
	code, out, errs := s.run(args...)
	if code != want {
		s.t.Fatalf("%s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out, errs
}

func (s *server) client() *client.Client {
	s.t.Helper()
	c, err := client.New(context.Background(), client.Config{URL: s.url, User: s.user, Password: s.pass})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *server) nodes() []client.Node {
	s.t.Helper()
	ns, err := s.client().ListNodes(context.Background(), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return ns
}

func (s *server) node(ident string) *client.Node {
	s.t.Helper()
	n, err := s.client().GetNode(context.Background(), ident)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// writeFile writes a test input into the test's temp dir.
func writeFile(t testing.TB, name string, body any) string {
	t.Helper()
	var b []byte
	switch x := body.(type) {
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.MarshalIndent(x, "", " "); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeRack is an instackenv document with n fake-hardware nodes.
func fakeRack(prefix string, n int) map[string]any {
	nodes := make([]map[string]any, n)
	for i := range nodes {
		nodes[i] = map[string]any{
			"name":         fmt.Sprintf("%s-%03d", prefix, i),
			"pm_type":      "fake-hardware",
			"mac":          []string{fmt.Sprintf("52:54:00:%02x:%02x:%02x", len(prefix), i/256, i%256)},
			"cpu":          "8",
			"memory":       "16384",
			"disk":         "100",
			"arch":         "x86_64",
			"capabilities": "boot_mode:uefi",
		}
	}
	return map[string]any{"nodes": nodes}
}

func mustContain(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}
