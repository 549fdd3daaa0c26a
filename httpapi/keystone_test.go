package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"castiron/httpapi/identity"
	"castiron/tests/keystone"
)

// TestKeystoneAuth: castiron with --auth-strategy keystone against the
// Keystone stand-in: tokens of each scope get Ironic's policies; no or a
// bad token is 401 naming Keystone; Keystone down is 503.
func TestKeystoneAuth(t *testing.T) {
	ks := keystone.Start(t, keystone.Config{})
	service := ks.AddProject(keystone.Project{Name: "service"})
	owner := ks.AddProject(keystone.Project{Name: "owner"})
	ks.AddUser(keystone.User{Name: "castiron", Password: "svc", ProjectRoles: map[string][]string{service.ID: {"service"}}})
	ks.AddUser(keystone.User{Name: "root", Password: "root", SystemRoles: []string{"admin"}})
	ks.AddUser(keystone.User{Name: "noc", Password: "noc", SystemRoles: []string{"reader"}})
	aliceUser := ks.AddUser(keystone.User{Name: "alice", Password: "alice", ProjectRoles: map[string][]string{owner.ID: {"member"}}})
	k, err := identity.NewKeystone(identity.KeystoneConfig{AuthURL: ks.URL(), Username: "castiron", Password: "svc", ProjectName: "service"})
	if err != nil {
		t.Fatal(err)
	}
	h := newAPI(t, func(o *Options) { o.Auth = k })
	token := func(user, scope string) string {
		body := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"` + user + `","domain":{"name":"Default"},"password":"` + user + `"}}},"scope":` + scope + `}}`
		res, err := http.Post(ks.URL()+"/v3/auth/tokens", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("X-Subject-Token")
	}
	system := `{"system":{"all":true}}`
	root, noc := token("root", system), token("noc", system)
	alice := token("alice", `{"project":{"name":"owner","domain":{"name":"Default"}}}`)
	call := func(tok, method, path, ver, body string) resp {
		t.Helper()
		req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("X-Auth-Token", tok)
		}
		if ver != "" {
			req.Header.Set(hdrVersion, ver)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{status: res.StatusCode, header: res.Header, body: b}
	}
	want := func(status int, tok, method, path, ver, body string) resp {
		t.Helper()
		r := call(tok, method, path, ver, body)
		if r.status != status {
			t.Errorf("%s %s: %d, want %d: %s", method, path, r.status, status, r.body)
		}
		return r
	}
	n := want(201, root, "POST", "/v1/nodes", latest, `{"driver": "fake-hardware", "owner": "`+owner.ID+`"}`).json(t)
	id := n["uuid"].(string)
	other := want(201, root, "POST", "/v1/nodes", latest, `{"driver": "fake-hardware"}`).json(t)["uuid"].(string)

	// The rbac_defaults case of the issue: a system reader's boot mode
	// change at 1.70 is refused by policy (403) before the 1.76 gate.
	want(403, noc, "PUT", "/v1/nodes/"+id+"/states/boot_mode", "1.70", `{"target": "uefi"}`)
	want(200, noc, "GET", "/v1/nodes/"+id, latest, "")
	want(200, alice, "GET", "/v1/nodes/"+id, latest, "")
	want(404, alice, "GET", "/v1/nodes/"+other, latest, "")
	if got := len(want(200, alice, "GET", "/v1/nodes", latest, "").json(t)["nodes"].([]any)); got != 1 {
		t.Errorf("alice lists %d nodes, want 1", got)
	}
	want(403, alice, "DELETE", "/v1/nodes/"+id, latest, "")
	want(200, noc, "GET", "/v1", "", "") // version discovery stays public

	for _, tok := range []string{"", "bogus"} {
		r := want(401, tok, "GET", "/v1/nodes", latest, "")
		if r.header.Get("WWW-Authenticate") != `Keystone uri="`+ks.URL()+`"` {
			t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
		}
	}
	// Revoked: refused once castiron asks Keystone again (a token it has
	// not cached yet is asked at once).
	rev := token("alice", `{"project":{"name":"owner","domain":{"name":"Default"}}}`)
	ks.RevokeTokens(aliceUser.ID)
	want(401, rev, "GET", "/v1/nodes", latest, "")
	late := token("noc", system)
	ks.SetUnavailable(true)
	want(503, late, "GET", "/v1/nodes", latest, "")
	ks.SetUnavailable(false)
	want(200, late, "GET", "/v1/nodes", latest, "")
}
