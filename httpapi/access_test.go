package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi/identity"
	"castiron/httpapi/policy"
	"castiron/storage"
)

// TestRouteAccess: every route has a policy row naming one of Ironic's
// rules, and every row is a route (no typos).
func TestRouteAccess(t *testing.T) {
	h := newAPI(t, func(o *Options) { o.MaxMinor = 200 })
	api := h.srv.Config.Handler.(*API)
	e := defaultPolicy()
	seen := map[string]bool{}
	for _, k := range api.routeKeys {
		seen[k] = true
		acc, ok := routeAccess[k]
		if !ok {
			t.Errorf("route %s has no policy row in access_routes.go", k)
			continue
		}
		if acc.on != onAnyone && !e.Known(acc.rule) {
			t.Errorf("route %s: rule %s is not one of Ironic's", k, acc.rule)
		}
	}
	for k := range routeAccess {
		if !seen[k] {
			t.Errorf("policy row %s names no route", k)
		}
	}
	if len(seen) < 120 {
		t.Errorf("only %d routes registered", len(seen))
	}
}

// rbacUsers are the personas of the access tests: users of the htpasswd
// file with their roles and scope in the users file.
const rbacUsers = `
sysadmin: {roles: [admin, member, reader], scope: system}
sysmember: {roles: [member, reader], scope: system}
sysreader: {roles: [reader], scope: system}
ownermember: {roles: [member, reader], project: owner}
ownerreader: {roles: [reader], project: owner}
owneradmin: {roles: [admin, member, reader], project: owner}
lesseemember: {roles: [member, reader], project: lessee}
lesseereader: {roles: [reader], project: lessee}
otheradmin: {roles: [admin, member, reader], project: other}
ownermanager: {roles: [manager, member, reader], project: owner}
othermanager: {roles: [manager, member, reader], project: other}
lesseeadmin: {roles: [admin, member, reader], project: lessee}
`

// rbacHarness is the API with http_basic and the users file.
type rbacHarness struct {
	*apiHarness
	logs *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// requestIDLog adds the request id as castiron's logger does.
type requestIDLog struct{ slog.Handler }

func (h requestIDLog) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestIDsOf(ctx).Local; id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// writeHTPasswd writes an htpasswd file: every user's password is
// "pw-<user>" (bcrypt at its minimum cost: the tests check logic).
func writeHTPasswd(t testing.TB, dir string, users ...string) string {
	t.Helper()
	var b strings.Builder
	for _, u := range users {
		hash, err := bcrypt.GenerateFromPassword([]byte("pw-"+u), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(u + ":" + string(hash) + "\n")
	}
	p := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newRBAC(t testing.TB, opts ...func(*Options)) *rbacHarness {
	t.Helper()
	dir := t.TempDir()
	pw, err := LoadHTPasswd(writeHTPasswd(t, dir, "sysadmin", "sysmember", "sysreader", "ownermember", "ownerreader",
		"owneradmin", "lesseemember", "lesseereader", "otheradmin", "ownermanager", "othermanager", "lesseeadmin", "noroles"))
	if err != nil {
		t.Fatal(err)
	}
	usersFile := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(usersFile, []byte(rbacUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := LoadBasicUsers(pw, usersFile)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h := newAPI(t, append([]func(*Options){func(o *Options) {
		o.Auth = users
		o.Logger = slog.New(requestIDLog{slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})})
	}}, opts...)...)
	return &rbacHarness{apiHarness: h, logs: logs}
}

// as sends a request as user (password pw-<user>) at version ver.
func (h *rbacHarness) as(user, method, path, ver string, body any) resp {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		js, _ := json.Marshal(body)
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
	if user != "" {
		req.SetBasicAuth(user, "pw-"+user)
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func (h *rbacHarness) want(status int, user, method, path, ver string, body any) resp {
	h.t.Helper()
	r := h.as(user, method, path, ver, body)
	if r.status != status {
		h.t.Errorf("%s: %s %s (%s): %d, want %d: %s", user, method, path, ver, r.status, status, r.body)
	}
	return r
}

// rbacFixture: node A owned by "owner" and leased to "lessee", with a
// port and an error and secrets; node B nobody's, with a port.
func rbacFixture(t testing.TB, h *rbacHarness) (a, b, portA, portB string) {
	t.Helper()
	na := h.want(201, "sysadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "name": "node-a",
		"owner": "owner", "lessee": "lessee", "driver_info": map[string]any{"ipmi_address": "10.0.0.1", "ipmi_password": "s3cret"}}).json(t)
	nb := h.want(201, "sysadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "name": "node-b"}).json(t)
	a, b = na["uuid"].(string), nb["uuid"].(string)
	pa := h.want(201, "sysadmin", "POST", "/v1/ports", latest, map[string]any{"node_uuid": a, "address": "52:54:00:00:00:0a"}).json(t)
	pb := h.want(201, "sysadmin", "POST", "/v1/ports", latest, map[string]any{"node_uuid": b, "address": "52:54:00:00:00:0b"}).json(t)
	h.db(a, func(n *storage.Node) { msg := "BMC 10.0.0.1 unreachable from conductor-7"; n.LastError = &msg })
	return a, b, pa["uuid"].(string), pb["uuid"].(string)
}

func uuids(t *testing.T, r resp, coll string) []string {
	t.Helper()
	var out []string
	for _, x := range r.json(t)[coll].([]any) {
		out = append(out, x.(map[string]any)["uuid"].(string))
	}
	return out
}

func TestAccessPersonas(t *testing.T) {
	h := newRBAC(t)
	a, b, portA, portB := rbacFixture(t, h)

	// Lists: the system sees all, a project what it owns or leases.
	for user, want := range map[string]int{"sysreader": 2, "ownerreader": 1, "lesseereader": 1, "otheradmin": 0} {
		if got := uuids(t, h.want(200, user, "GET", "/v1/nodes", latest, nil), "nodes"); len(got) != want {
			t.Errorf("%s lists %d nodes, want %d", user, len(got), want)
		}
		if got := uuids(t, h.want(200, user, "GET", "/v1/ports/detail", latest, nil), "ports"); len(got) != want {
			t.Errorf("%s lists %d ports, want %d", user, len(got), want)
		}
	}
	h.want(403, "ownerreader", "GET", "/v1/nodes?project=lessee", latest, nil) // another project's nodes
	if got := uuids(t, h.want(200, "sysreader", "GET", "/v1/nodes?project=lessee", latest, nil), "nodes"); len(got) != 1 || got[0] != a {
		t.Errorf("system reader's ?project=lessee: %v", got)
	}
	h.want(403, "noroles", "GET", "/v1/nodes", latest, nil) // no roles: no list

	// What a caller may not see is not there (404); what it may see but
	// not change is 403.
	for _, c := range []struct {
		user, method, path, ver string
		body                    any
		status                  int
	}{
		{"otheradmin", "GET", "/v1/nodes/" + a, latest, nil, 404},
		{"ownerreader", "GET", "/v1/nodes/" + b, latest, nil, 404},
		{"ownerreader", "GET", "/v1/nodes/node-a", latest, nil, 200},
		{"sysreader", "GET", "/v1/nodes/" + b, latest, nil, 200},
		{"sysreader", "PATCH", "/v1/nodes/" + a, latest, []any{map[string]any{"op": "add", "path": "/extra/x", "value": 1}}, 403},
		{"lesseemember", "PATCH", "/v1/nodes/" + a, latest, []any{map[string]any{"op": "add", "path": "/extra/x", "value": 1}}, 200},
		{"lesseemember", "PATCH", "/v1/nodes/" + a, latest, []any{map[string]any{"op": "add", "path": "/driver_info/x", "value": 1}}, 403},
		{"ownermember", "PATCH", "/v1/nodes/" + a, latest, []any{map[string]any{"op": "replace", "path": "/owner", "value": "x"}}, 403},
		{"ownermember", "PATCH", "/v1/nodes/" + a, latest, []any{map[string]any{"op": "add", "path": "/driver_info/y", "value": 2}}, 200},
		{"otheradmin", "PATCH", "/v1/nodes/" + a, latest, []any{map[string]any{"op": "add", "path": "/extra/x", "value": 1}}, 404},
		// Policy before the version gate: boot_mode came at 1.76.
		{"sysreader", "PUT", "/v1/nodes/" + a + "/states/boot_mode", "1.70", map[string]any{"target": "uefi"}, 403},
		{"lesseereader", "PUT", "/v1/nodes/" + a + "/states/power", latest, map[string]any{"target": "power on"}, 403},
		{"otheradmin", "PUT", "/v1/nodes/" + a + "/states/power", latest, map[string]any{"target": "power on"}, 404},
		{"sysmember", "DELETE", "/v1/nodes/" + b, latest, nil, 403},
		{"ownermember", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware"}, 403},
		{"otheradmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "owner": "owner"}, 400},
		{"sysreader", "GET", "/v1/chassis", latest, nil, 200},
		{"owneradmin", "GET", "/v1/chassis", latest, nil, 403}, // system-only: a project token's scope is refused
		{"ownerreader", "GET", "/v1/conductors", latest, nil, 403},
		{"ownerreader", "GET", "/v1/drivers", latest, nil, 403},
		{"ownerreader", "GET", "/v1/ports/" + portA, latest, nil, 200},
		{"ownerreader", "GET", "/v1/ports/" + portB, latest, nil, 404},
		{"ownermember", "PATCH", "/v1/ports/" + portA, latest, []any{map[string]any{"op": "add", "path": "/extra/x", "value": 1}}, 403},
		{"owneradmin", "PATCH", "/v1/ports/" + portA, latest, []any{map[string]any{"op": "add", "path": "/extra/x", "value": 1}}, 200},
		{"otheradmin", "POST", "/v1/ports", latest, map[string]any{"node_uuid": a, "address": "52:54:00:00:00:0c"}, 403},
		{"owneradmin", "POST", "/v1/ports", latest, map[string]any{"node_uuid": a, "address": "52:54:00:00:00:0c"}, 201},
		{"ownerreader", "GET", "/v1/nodes/" + a + "/ports", latest, nil, 200},
		{"otheradmin", "GET", "/v1/nodes/" + a + "/ports", latest, nil, 404},
		{"sysmember", "POST", "/v1/events", latest, map[string]any{"events": []any{}}, 403},
	} {
		h.want(c.status, c.user, c.method, c.path, c.ver, c.body)
	}
	// A system member may set the boot mode: it gets past policy to the
	// version gate, which then answers as without authentication.
	if r := h.as("sysmember", "PUT", "/v1/nodes/"+a+"/states/boot_mode", "1.70", map[string]any{"target": "uefi"}); r.status == 403 || r.status < 400 {
		t.Errorf("system member boot_mode at 1.70: %d %s", r.status, r.body)
	}

	// A project admin's node is its project's.
	n := h.want(201, "otheradmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "name": "mine"}).json(t)
	if n["owner"] != "other" {
		t.Errorf("project admin's node owner %v, want other", n["owner"])
	}
	h.want(200, "otheradmin", "GET", "/v1/nodes/mine", latest, nil)
	h.want(204, "otheradmin", "DELETE", "/v1/nodes/mine", latest, nil) // delete:self_owned_node

	// Masking: the owner sees driver_info with secrets masked; the
	// lessee sees neither it nor the last error.
	owner := h.want(200, "ownerreader", "GET", "/v1/nodes/"+a, latest, nil).json(t)
	di := owner["driver_info"].(map[string]any)
	if di["ipmi_password"] != "******" || di["ipmi_address"] != "10.0.0.1" {
		t.Errorf("owner's driver_info %v", di)
	}
	if s, _ := owner["last_error"].(string); !strings.Contains(s, "unreachable") {
		t.Errorf("owner's last_error %v", owner["last_error"])
	}
	if _, redacted := owner["driver_internal_info"].(map[string]any)["content"]; redacted {
		t.Errorf("owner's driver_internal_info redacted: %v", owner["driver_internal_info"])
	}
	lessee := h.want(200, "lesseereader", "GET", "/v1/nodes/"+a, latest, nil).json(t)
	if c, _ := lessee["driver_info"].(map[string]any)["content"].(string); !strings.HasPrefix(c, "** Redacted - requires baremetal:node:get:driver_info") {
		t.Errorf("lessee's driver_info %v", lessee["driver_info"])
	}
	if c, _ := lessee["driver_internal_info"].(map[string]any)["content"].(string); !strings.HasPrefix(c, "** Redacted - Requires") {
		t.Errorf("lessee's driver_internal_info %v", lessee["driver_internal_info"])
	}
	if s, _ := lessee["last_error"].(string); !strings.HasPrefix(s, "** Value Redacted") {
		t.Errorf("lessee's last_error %v", lessee["last_error"])
	}
	list := h.want(200, "lesseereader", "GET", "/v1/nodes/detail", latest, nil).json(t)["nodes"].([]any)
	if c, _ := list[0].(map[string]any)["driver_info"].(map[string]any)["content"].(string); !strings.HasPrefix(c, "** Redacted") {
		t.Errorf("lessee's listed driver_info %v", list[0].(map[string]any)["driver_info"])
	}
	// Volume target properties: only system readers and admins.
	vt := h.want(201, "sysadmin", "POST", "/v1/volume/targets", latest, map[string]any{"node_uuid": a, "volume_type": "iscsi",
		"volume_id": "vol-1", "boot_index": 0, "properties": map[string]any{"target_iqn": "iqn.2026-01.example:vol1"}}).json(t)["uuid"].(string)
	for user, visible := range map[string]bool{"ownerreader": false, "owneradmin": true, "sysreader": true} {
		props := h.want(200, user, "GET", "/v1/volume/targets/"+vt, latest, nil).json(t)["properties"].(map[string]any)
		if _, redacted := props["redacted_contents"]; redacted == visible {
			t.Errorf("%s sees target properties %v", user, props)
		}
	}
	if got := uuids(t, h.want(200, "lesseereader", "GET", "/v1/volume/targets", latest, nil), "targets"); len(got) != 1 {
		t.Errorf("lessee lists %d volume targets, want 1", len(got))
	}
	if got := uuids(t, h.want(200, "otheradmin", "GET", "/v1/volume/targets", latest, nil), "targets"); len(got) != 0 {
		t.Errorf("another project lists %d volume targets, want 0", len(got))
	}
	h.want(404, "otheradmin", "GET", "/v1/volume/targets/"+vt, latest, nil)

	sys := h.want(200, "sysreader", "GET", "/v1/nodes/"+a, latest, nil).json(t)
	if sys["driver_info"].(map[string]any)["ipmi_address"] != "10.0.0.1" || !strings.Contains(sys["last_error"].(string), "unreachable") {
		t.Errorf("system reader's view redacted: %v %v", sys["driver_info"], sys["last_error"])
	}
}

// TestAccessAuditAndHistory: a write is logged with who made it and the
// node's history names the user and project, each in its own field.
func TestAccessAuditAndHistory(t *testing.T) {
	h := newRBAC(t)
	a, _, _, _ := rbacFixture(t, h)
	r := h.want(202, "ownermember", "PUT", "/v1/nodes/"+a+"/states/provision", latest, map[string]any{"target": "manage"})
	for deadline := time.Now().Add(10 * time.Second); ; {
		n := h.want(200, "sysreader", "GET", "/v1/nodes/"+a, latest, nil).json(t)
		if n["provision_state"] == "manageable" && n["target_provision_state"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node stuck in %v", n["provision_state"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	reqID := r.header.Get(hdrRequestID)
	var line string
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, "write request") && strings.Contains(l, reqID) {
			line = l
		}
	}
	for _, want := range []string{"user=ownermember", "project=owner", "roles=\"[member reader]\"", "status=202", "method=PUT", "scope=project"} {
		if !strings.Contains(line, want) {
			t.Errorf("audit line %q lacks %s", line, want)
		}
	}
	hist := h.want(200, "sysreader", "GET", "/v1/nodes/"+a+"/history?detail=true", latest, nil).json(t)["history"].([]any)
	// Ironic's node_history: user is the caller's user id (an http_basic
	// user's name), project its project.
	found := false
	for _, ev := range hist {
		if e := ev.(map[string]any); e["user"] == "ownermember" && e["project"] == "owner" {
			found = true
		}
	}
	if !found {
		t.Errorf("no history event by user ownermember, project owner: %v", hist)
	}
}

// TestAccessUnrestrictedAndFailures: an htpasswd file without users file
// is today's http_basic (anyone authenticated may do anything); wrong
// passwords are 401 and slow down only their own address.
func TestAccessUnrestrictedAndFailures(t *testing.T) {
	dir := t.TempDir()
	pw, err := LoadHTPasswd(writeHTPasswd(t, dir, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	th := identity.NewThrottle()
	th.Free = 2
	h := &rbacHarness{apiHarness: newAPI(t, func(o *Options) { o.Auth = pw; o.Throttle = th })}
	n := h.want(201, "admin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware"}).json(t)
	h.want(204, "admin", "DELETE", "/v1/nodes/"+n["uuid"].(string), latest, nil)

	bad := func(client *http.Client) resp {
		req, _ := http.NewRequest("GET", h.srv.URL+"/v1/nodes", nil)
		req.SetBasicAuth("admin", "wrong")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{status: res.StatusCode, header: res.Header, body: b}
	}
	for range 3 {
		r := bad(h.srv.Client())
		if r.status != 401 || r.header.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
			t.Fatalf("wrong password: %d %v", r.status, r.header)
		}
	}
	if th.Delay("127.0.0.1") == 0 {
		t.Error("three failures past two free ones did not slow 127.0.0.1 down")
	}
	// Another address is not slowed, and its admin logs in.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	if th.Delay("127.0.0.2") != 0 {
		t.Error("127.0.0.2 slowed by 127.0.0.1's failures")
	}
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/nodes", nil)
	req.SetBasicAuth("admin", "pw-admin")
	res, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("admin from 127.0.0.2: %d", res.StatusCode)
	}
	// A request without credentials is not a failed login.
	before := th.Len()
	r, _ := http.Get(h.srv.URL + "/v1/nodes")
	r.Body.Close()
	if th.Len() != before {
		t.Error("a request without credentials was counted")
	}
}

// TestAccessPolicyFile: a policy file's override applies.
func TestAccessPolicyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(p, []byte(`"baremetal:node:list": "role:reader and system_scope:all"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	h := newRBAC(t, func(o *Options) { o.Policy = e })
	h.want(403, "ownerreader", "GET", "/v1/nodes", latest, nil)
	h.want(200, "sysreader", "GET", "/v1/nodes", latest, nil)
}

// TestUnknownStatesAndDoubleSlash: two answers the rbac_defaults suite
// checks whoever asks (PUT on an unknown states/<x> is 405, a path with an
// empty segment is 404, not the mux's redirect); bodies the guard cannot
// read are judged strictly; below an API's version Ironic answers the
// version before policy.
func TestUnknownStatesAndDoubleSlash(t *testing.T) {
	h := newRBAC(t)
	a, _, _, _ := rbacFixture(t, h)
	for _, user := range []string{"sysreader", "ownerreader", "otheradmin"} {
		h.want(405, user, "PUT", "/v1/nodes/"+a+"/states/target_raid_config", "1.70", map[string]any{"target": map[string]any{"raid": "config"}})
		h.want(404, user, "PUT", "/v1//v1/nodes/"+a+"/management/inject_nmi", "1.70", map[string]any{})
	}
	h.want(401, "", "PUT", "/v1/nodes/"+a+"/states/target_raid_config", "1.70", map[string]any{})

	h.want(403, "owneradmin", "POST", "/v1/ports", latest, "not an object")
	h.want(400, "sysadmin", "POST", "/v1/ports", latest, "not an object")
	h.want(403, "lesseereader", "PATCH", "/v1/nodes/"+a, latest, "not a patch")
	h.want(400, "sysmember", "PATCH", "/v1/nodes/"+a, latest, "not a patch")
	h.want(403, "owneradmin", "POST", "/v1/nodes", latest, "not an object")

	h.want(405, "ownerreader", "POST", "/v1/allocations", "1.51", map[string]any{"resource_class": "x"})
	h.want(403, "ownerreader", "POST", "/v1/allocations", "1.52", map[string]any{"resource_class": "x"})
	h.want(404, "ownerreader", "GET", "/v1/deploy_templates", "1.54", nil)
	h.want(403, "ownerreader", "GET", "/v1/deploy_templates", "1.55", nil)
}
