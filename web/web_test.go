package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/httpapi"
	"castiron/storage"
)

// testServer is castiron wired as appliance/ wires it (engine + httpapi + the
// UI) on a loopback HTTP server over a temp SQLite file with fake hardware
// (and the redfish type, for imports: no test here talks to a BMC).
type testServer struct {
	t     *testing.T
	srv   *httptest.Server
	store *storage.SQLite
	// sent counts response body bytes, for the page-load measurements.
	sent atomic.Int64
	reqs atomic.Int64
}

func newServer(t *testing.T, auth httpapi.Authenticator) *testServer {
	t.Helper()
	return newServerWith(t, auth, serverOpts{})
}

// serverOpts vary the test server.
type serverOpts struct {
	// console is the API's console attacher (nil: none).
	console httpapi.ConsoleAttacher
	// noTerminal serves the UI as built without make web-vendor.
	noTerminal bool
}

func newServerWith(t *testing.T, auth httpapi.Authenticator, so serverOpts) *testServer {
	t.Helper()
	quiet := enginetest.Quiet()
	d := fake.New()
	rf := redfish.New(redfish.Config{Logger: quiet})
	cond, st := enginetest.Start(t, engine.Config{Hostname: "test-conductor", AutomatedClean: true},
		engine.NewFakeHardware(d), engine.NewManualManagement(d), engine.NewRedfishHardware(rf, redfish.Properties()))
	ui := Handler(Options{Auth: auth})
	if so.noTerminal {
		h := ui.(*handler)
		h.assets = sync.OnceValue(func() map[string]*asset {
			all := loadAssets()
			for _, name := range terminalAssets {
				delete(all, name)
			}
			return all
		})
	}
	api := httpapi.New(cond, httpapi.Options{Auth: auth, Logger: quiet, HTML: ui, Extra: Mounts(ui), Console: so.console})
	s := &testServer{t: t, store: st}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reqs.Add(1)
		api.ServeHTTP(&countingWriter{ResponseWriter: w, n: &s.sent}, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.ResponseWriter.Write(b)
}

// Unwrap lets the console's WebSocket hijack the connection.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (s *testServer) do(method, path string, body any, hdr map[string]string) response {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		js, _ := json.Marshal(body)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// A bare transport: no transparent gzip, so Content-Encoding is visible.
	res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (s *testServer) expect(status int, method, path string, body any) map[string]any {
	s.t.Helper()
	r := s.do(method, path, body, nil)
	if r.status != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	var m map[string]any
	if len(r.body) > 0 {
		if err := json.Unmarshal(r.body, &m); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, r.body)
		}
	}
	return m
}

func (s *testServer) createNode(name string) string {
	s.t.Helper()
	n := s.expect(http.StatusCreated, "POST", "/v1/nodes", map[string]any{"name": name, "driver": "fake-hardware"})
	return n["uuid"].(string)
}

func (s *testServer) node(id string) map[string]any {
	s.t.Helper()
	return s.expect(http.StatusOK, "GET", "/v1/nodes/"+id, nil)
}

// provision sends a verb and waits until the node rests in want.
func (s *testServer) provision(id, target, want string) {
	s.t.Helper()
	s.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": target})
	s.waitState(id, want)
}

func (s *testServer) waitState(id, want string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := s.node(id)
		if n["provision_state"] == want && n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("node %s in %v (last_error %v), want %s", id, n["provision_state"], n["last_error"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRootNegotiation(t *testing.T) {
	s := newServer(t, nil)
	for _, tc := range []struct {
		name, accept string
		html         bool
	}{
		{"no Accept (gophercloud, curl)", "", false},
		{"JSON client", "application/json", false},
		{"anything", "*/*", false},
		{"browser", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.accept != "" {
				hdr["Accept"] = tc.accept
			}
			r := s.do("GET", "/", nil, hdr)
			if r.status != http.StatusOK {
				t.Fatalf("status %d", r.status)
			}
			if !slices.Contains(r.header.Values("Vary"), "Accept") {
				t.Errorf("Vary = %q, want Accept", r.header.Values("Vary"))
			}
			ct := r.header.Get("Content-Type")
			if tc.html {
				if !strings.HasPrefix(ct, "text/html") || !bytes.Contains(r.body, []byte(`<script type="module" src="/ui/js/app.js">`)) {
					t.Fatalf("want the UI, got %s: %.200s", ct, r.body)
				}
				if r.header.Get("Content-Security-Policy") == "" {
					t.Error("no Content-Security-Policy on the page")
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal(r.body, &doc); err != nil || doc["name"] != "OpenStack Ironic API" {
				t.Fatalf("want Ironic's version document, got %s: %.200s", ct, r.body)
			}
		})
	}
}

func TestAssets(t *testing.T) {
	s := newServer(t, nil)
	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/ui/js/app.js", "text/javascript; charset=utf-8", 200},
		{"/ui/style.css", "text/css; charset=utf-8", 200},
		{"/ui/icon.svg", "image/svg+xml", 200},
		{"/ui/index.html", "text/html; charset=utf-8", 200},
		{"/ui/nope.js", "", 404},
	} {
		r := s.do("GET", tc.path, nil, nil)
		if r.status != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, r.status, tc.status)
			continue
		}
		if tc.ctype != "" && r.header.Get("Content-Type") != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, r.header.Get("Content-Type"), tc.ctype)
		}
	}
	// Every embedded file has a type of its own (a new kind of file needs
	// its line in contentType).
	h := Handler(Options{}).(*handler)
	for name, a := range h.assets() {
		if a.ctype == "application/octet-stream" {
			t.Errorf("%s: no content type for its extension", name)
		}
	}
	// ETag revalidation and gzip.
	r := s.do("GET", "/ui/js/fleet.js", nil, map[string]string{"Accept-Encoding": "gzip"})
	if r.header.Get("Content-Encoding") != "gzip" || r.header.Get("ETag") == "" {
		t.Fatalf("fleet.js: encoding %q etag %q", r.header.Get("Content-Encoding"), r.header.Get("ETag"))
	}
	if zr, err := gzip.NewReader(bytes.NewReader(r.body)); err != nil {
		t.Errorf("fleet.js: %v", err)
	} else if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, s.do("GET", "/ui/js/fleet.js", nil, nil).body) {
		t.Errorf("fleet.js: gzipped body is not the file (%v)", err)
	}
	if r := s.do("GET", "/ui/js/fleet.js", nil, map[string]string{"If-None-Match": r.header.Get("ETag")}); r.status != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", r.status)
	}
	// /ui and /ui/ go to the page; other methods are refused.
	if r := s.do("GET", "/ui/", nil, nil); r.status != http.StatusFound || r.header.Get("Location") != "/" {
		t.Errorf("GET /ui/: %d %q", r.status, r.header.Get("Location"))
	}
	if r := s.do("POST", "/ui/js/app.js", map[string]any{}, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/js/app.js: %d, want 405", r.status)
	}
	// The API is untouched.
	if r := s.do("GET", "/v1/nodes", nil, nil); r.status != http.StatusOK {
		t.Errorf("GET /v1/nodes: %d", r.status)
	}
}

// Every asset the page references exists, and no asset reaches off-site.
func TestAssetsSelfContained(t *testing.T) {
	h := Handler(Options{}).(*handler)
	for name, a := range h.assets() {
		if strings.HasPrefix(name, "vendor/") {
			// Third-party code (make web-vendor) names its authors' sites in
			// comments and licenses; what it may fetch is bounded by the
			// page's Content-Security-Policy (default-src 'self'), under
			// which the browser tests run it.
			continue
		}
		body := string(a.body)
		for _, bad := range []string{"http://", "https://"} {
			// A URL with a host after the scheme; a scheme put in front of
			// an operator's address (`https://${addr}`) reaches nowhere by itself.
			offsite := regexp.MustCompile(regexp.QuoteMeta(bad) + `[A-Za-z0-9\[]`)
			for _, line := range strings.Split(body, "\n") {
				if offsite.MatchString(line) && !strings.Contains(line, "placeholder") && !strings.Contains(line, "xmlns") &&
					!strings.Contains(line, "startsWith") && !strings.Contains(line, "must start with") && !strings.Contains(line, "test(v)") {
					t.Errorf("%s references %s: %s", name, bad, strings.TrimSpace(line))
				}
			}
		}
	}
	for _, ref := range []string{"style.css", "icon.svg", "js/app.js", "js/ui.js", "js/api.js", "js/store.js", "js/fleet.js",
		"js/node.js", "js/actions.js", "js/conductors.js", "js/import.js", "js/console.js", "vendor/README.md"} {
		if h.assets()[ref] == nil {
			t.Errorf("missing asset %s", ref)
		}
	}
}

func TestStatesJSON(t *testing.T) {
	s := newServer(t, nil)
	r := s.do("GET", "/ui/api/states", nil, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q", r.status, r.header.Get("Content-Type"))
	}
	var st States
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Transitions) != len(engine.Transitions()) || len(st.States) != len(engine.AllStates()) {
		t.Fatalf("%d transitions, %d states; engine has %d, %d", len(st.Transitions), len(st.States), len(engine.Transitions()), len(engine.AllStates()))
	}
	for _, tc := range []struct {
		state       string
		offered     []string
		not         []string
		stable, bad bool
	}{
		{"enroll", []string{"manage"}, []string{"provide", "deploy", "inspect"}, true, false},
		{"manageable", []string{"inspect", "provide", "clean"}, []string{"manage", "deploy", "undeploy"}, true, false},
		{"available", []string{"manage", "deploy"}, []string{"provide", "undeploy", "abort"}, true, false},
		{"active", []string{"rebuild", "undeploy"}, []string{"deploy", "manage", "abort"}, true, false},
		{"clean wait", []string{"abort"}, []string{"manage", "provide"}, false, false},
		{"deploy failed", []string{"deploy", "rebuild", "undeploy"}, []string{"abort", "manage"}, false, true},
		{"inspect failed", []string{"manage", "inspect"}, []string{"provide"}, false, true},
		// The conductor holds the lock: nothing is offered.
		{"cleaning", nil, []string{"manage"}, false, false},
		{"deleting", nil, []string{"clean"}, false, false},
	} {
		got := st.Actions[tc.state]
		for _, v := range tc.offered {
			if !slices.Contains(got, v) {
				t.Errorf("%s: %q not offered (got %v)", tc.state, v, got)
			}
			if !engine.Actionable(engine.State(tc.state), mustVerb(t, v)) {
				t.Errorf("%s: %q offered but engine refuses it", tc.state, v)
			}
		}
		for _, v := range tc.not {
			if slices.Contains(got, v) {
				t.Errorf("%s: %q offered (got %v)", tc.state, v, got)
			}
		}
		if info := st.States[tc.state]; info.Stable != tc.stable || info.Failure != tc.bad {
			t.Errorf("%s: stable %v failure %v", tc.state, info.Stable, info.Failure)
		}
	}
	// Every offered verb is one engine accepts, in every state.
	for state, acts := range st.Actions {
		for _, v := range acts {
			if !engine.Actionable(engine.State(state), mustVerb(t, v)) {
				t.Errorf("%s: %q offered but not in the machine", state, v)
			}
		}
	}
	if !st.States["available"].Deletable || st.States["active"].Deletable {
		t.Error("deletable: available must be, active must not")
	}
}

type htpasswdAuth struct{ hash []byte }

func (a htpasswdAuth) Authenticate(r *http.Request) (string, bool) {
	u, p, ok := r.BasicAuth()
	return u, ok && u == "admin" && bcrypt.CompareHashAndPassword(a.hash, []byte(p)) == nil
}

func TestAuth(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	s := newServer(t, htpasswdAuth{hash})
	browser := map[string]string{"Accept": "text/html"}
	withCreds := func(m map[string]string, user, pass string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		out["Authorization"] = req.Header.Get("Authorization")
		return out
	}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		status     int
	}{
		{"page without credentials", "/", browser, 401},
		{"page, wrong password", "/", withCreds(browser, "admin", "nope"), 401},
		{"page with credentials", "/", withCreds(browser, "admin", "secret"), 200},
		{"asset without credentials", "/ui/js/app.js", nil, 401},
		{"states without credentials", "/ui/api/states", nil, 401},
		{"states with credentials", "/ui/api/states", withCreds(nil, "admin", "secret"), 200},
		// Ironic's version document stays public, as in Ironic.
		{"API root without credentials", "/", nil, 200},
		{"API without credentials", "/v1/nodes", nil, 401},
	} {
		r := s.do("GET", tc.path, nil, tc.hdr)
		if r.status != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, r.status, tc.status)
		}
		if r.status == 401 && r.header.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, r.header.Get("WWW-Authenticate"))
		}
	}
}

func mustVerb(t *testing.T, target string) engine.Event {
	t.Helper()
	ev, ok := engine.VerbEvent(target)
	if !ok {
		t.Fatalf("%q is not a provision target", target)
	}
	return ev
}
