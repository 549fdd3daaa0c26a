package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/enginetest"
	"castiron/storage"
)

// apiHarness is castiron's API on a real loopback HTTP server over a real
// SQLite file with the fake-hardware and manual-management types.
type apiHarness struct {
	t     testing.TB
	srv   *httptest.Server
	cond  *engine.Conductor
	store *storage.SQLite
	// dbPath is the database (SQLite file or PostgreSQL URL), for a
	// second store on it (another process writing the same database).
	dbPath string
}

func newAPI(t testing.TB, opts ...func(*Options)) *apiHarness {
	t.Helper()
	return newAPIWith(t, func(*engine.Config) {}, opts...)
}

// apiWithNode is newAPI with one node created from body (createNode);
// it returns the node's uuid.
func apiWithNode(t testing.TB, body map[string]any) (*apiHarness, string) {
	t.Helper()
	h := newAPI(t)
	return h, h.createNode(body)["uuid"].(string)
}

// newAPIWith is newAPI with a conductor configuration tweak.
func newAPIWith(t testing.TB, tweak func(*engine.Config), opts ...func(*Options)) *apiHarness {
	t.Helper()
	d := fake.New()
	cfg := engine.Config{Hostname: "test-conductor", AutomatedClean: true}
	tweak(&cfg)
	return serveAPI(t, cfg, []*engine.HardwareType{engine.NewFakeHardware(d), engine.NewManualManagement(d)}, opts...)
}

// serveAPI is the API over a conductor with hw (enginetest.Start) on a
// loopback server.
func serveAPI(t testing.TB, cfg engine.Config, hw []*engine.HardwareType, opts ...func(*Options)) *apiHarness {
	t.Helper()
	return serveAPIOn(t, filepath.Join(t.TempDir(), "castiron.db"), cfg, hw, opts...)
}

// serveAPIOn is serveAPI on the given database: a SQLite file or a
// PostgreSQL URL.
func serveAPIOn(t testing.TB, dbPath string, cfg engine.Config, hw []*engine.HardwareType, opts ...func(*Options)) *apiHarness {
	t.Helper()
	cond, st := enginetest.StartAt(t, dbPath, cfg, hw...)
	o := Options{Logger: enginetest.Quiet(), LockRetry: 5 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	srv := httptest.NewServer(New(cond, o))
	t.Cleanup(srv.Close)
	return &apiHarness{t: t, srv: srv, cond: cond, store: st, dbPath: dbPath}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// faultstring digs the message out of Ironic's double-encoded error body.
func (r resp) faultstring(t testing.TB) string {
	t.Helper()
	var inner map[string]any
	if err := json.Unmarshal([]byte(r.json(t)["error_message"].(string)), &inner); err != nil {
		t.Fatalf("error_message is not JSON: %s", r.body)
	}
	if s, ok := inner["faultstring"].(string); ok {
		return s
	}
	return inner["description"].(string)
}

// do sends a request with microversion ver ("" = no header).
func (h *apiHarness) do(method, path, ver string, body any) resp {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if ver != "" {
		req.Header.Set(hdrVersion, ver)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// expect checks the status and returns the response.
func (h *apiHarness) expect(status int, method, path, ver string, body any) resp {
	h.t.Helper()
	r := h.do(method, path, ver, body)
	if r.status != status {
		h.t.Fatalf("%s %s (ver %s): status %d, want %d: %s", method, path, ver, r.status, status, r.body)
	}
	return r
}

const latest = "latest"

func (h *apiHarness) createNode(body map[string]any) map[string]any {
	h.t.Helper()
	if _, ok := body["driver"]; !ok {
		body["driver"] = "fake-hardware"
	}
	return h.expect(http.StatusCreated, "POST", "/v1/nodes", latest, body).json(h.t)
}

// waitState polls the node until it is idle in want.
func (h *apiHarness) waitState(ident, want string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+ident, latest, nil).json(h.t)
		if n["provision_state"] == want && n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s in %v (last_error %v), want %s", ident, n["provision_state"], n["last_error"], want)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// db changes a node directly in the store (test set-up only).
func (h *apiHarness) db(id string, fn func(n *storage.Node)) {
	h.t.Helper()
	if _, err := h.store.UpdateNode(context.Background(), id, func(n *storage.Node) (*storage.Event, error) {
		fn(n)
		return nil, nil
	}); err != nil {
		h.t.Fatal(err)
	}
}

// wantFault checks an error response's status and message.
func wantFault(t *testing.T, r resp, status int, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	volFault(t, r, msg)
}

// verFault is a request body at a version and Ironic's status and
// message for it.
type verFault struct {
	ver    string
	body   any
	status int
	msg    string
}

// wantFaults sends each case's body by method to path (wantFault).
func (h *apiHarness) wantFaults(t *testing.T, method, path string, cases []verFault) {
	t.Helper()
	for _, tc := range cases {
		wantFault(t, h.do(method, path, tc.ver, tc.body), tc.status, tc.msg)
	}
}

// namedFault is a named request body and Ironic's status and message for
// it at the latest version.
type namedFault struct {
	name   string
	body   any
	status int
	want   string
}

// namedFaults sends each case's body by method to path in subtest
// prefix+name (volFault).
func (h *apiHarness) namedFaults(t *testing.T, prefix, method, path string, cases []namedFault) {
	t.Helper()
	for _, tc := range cases {
		t.Run(prefix+tc.name, func(t *testing.T) {
			volFault(t, h.expect(tc.status, method, path, latest, tc.body), tc.want)
		})
	}
}

// requestFault is a named request and Ironic's status and message for it
// ("" msg: the status alone).
type requestFault struct {
	name, method, path, ver string
	body                    any
	status                  int
	msg                     string
}

// listQueryFaults are the refusals of ?fields= and ?detail= every
// collection read by the shared list query answers (field: one it has).
func listQueryFaults(coll, field string) []requestFault {
	return []requestFault{
		{"bad field", "GET", "/v1/" + coll + "?fields=bogus", latest, nil, 400, `Field(s) "bogus" are not valid`},
		{"detail before 1.43", "GET", "/v1/" + coll + "?detail=true", "1.42", nil, 400, "Invalid query parameter ?detail=True received."},
		{"detail and fields", "GET", "/v1/" + coll + "?detail=true&fields=" + field, latest, nil, 400, "Can not specify ?detail=True and fields in the same request."},
	}
}

// requestFaults sends each case in subtest name and checks its status and
// message.
func (h *apiHarness) requestFaults(t *testing.T, cases []requestFault) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.expect(tc.status, tc.method, tc.path, tc.ver, tc.body)
			if tc.msg != "" {
				if got := r.faultstring(t); got != tc.msg {
					t.Fatalf("message %q, want %q", got, tc.msg)
				}
			}
		})
	}
}

// belowVersion checks a collection's routes at versions that do not have
// it: Ironic's 404 to GET, 405 to the rest, with the API's description.
func (h *apiHarness) belowVersion(t *testing.T, coll, item, msg string, versions ...string) {
	t.Helper()
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", coll, 404}, {"GET", item, 404}, {"POST", coll, 405}, {"PATCH", item, 405}, {"DELETE", item, 405},
	} {
		for _, ver := range versions {
			r := h.expect(tc.status, tc.method, tc.path, ver, map[string]any{})
			if d := volPecanDesc(t, r); d != msg {
				t.Fatalf("%s %s at %q: description %v", tc.method, tc.path, ver, d)
			}
		}
	}
}

// moveTo asks for the provision target (202) and waits until the node
// is idle in state.
func (h *apiHarness) moveTo(id, target, state string) map[string]any {
	h.t.Helper()
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": target})
	return h.waitState(id, state)
}

// failedWith waits until the node is idle in state and checks that its
// last_error holds want.
func (h *apiHarness) failedWith(id, state, want string) {
	h.t.Helper()
	n := h.waitState(id, state)
	if !strings.Contains(n["last_error"].(string), want) {
		h.t.Errorf("last_error %v", n["last_error"])
	}
}

func (h *apiHarness) provision(ident, target string, extra map[string]any) resp {
	h.t.Helper()
	body := map[string]any{"target": target}
	for k, v := range extra {
		body[k] = v
	}
	return h.do("PUT", "/v1/nodes/"+ident+"/states/provision", latest, body)
}

func newRequest(h *apiHarness, method, path string) (*http.Request, error) {
	req, err := http.NewRequest(method, h.srv.URL+path, nil)
	if err == nil {
		req.Header.Set(hdrVersion, latest)
	}
	return req, err
}
