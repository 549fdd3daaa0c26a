package keystone

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixture is a stub with an admin, a second domain with a user whose name
// clashes with admin's, a user with no default project, and an application
// credential of admin's.
type fixture struct {
	ks    *Server
	admin Admin
	other User    // "admin" in domain "other": same name, other domain
	plain User    // no default project: unscoped by default
	demo  Project // plain's project
	cred  AppCredential
}

func newFixture(t *testing.T) *fixture {
	ks := Start(t, Config{Endpoints: map[string]string{"baremetal": "http://127.0.0.1:6385"}})
	f := &fixture{ks: ks, admin: ks.AddAdmin("s3cret")}
	d := ks.AddDomain(Domain{Name: "other"})
	op := ks.AddProject(Project{Name: "admin", DomainID: d.ID})
	f.other = ks.AddUser(User{Name: "admin", DomainID: d.ID, Password: "other-pass", ProjectRoles: map[string][]string{op.ID: {"member"}}})
	f.demo = ks.AddProject(Project{Name: "demo"})
	f.plain = ks.AddUser(User{Name: "plain", Password: "plain-pass", ProjectRoles: map[string][]string{f.demo.ID: {"member", "reader"}}})
	f.cred = ks.AddAppCredential(AppCredential{Name: "ci", Secret: "app-secret", UserID: f.admin.User.ID, ProjectID: f.admin.Project.ID, Roles: []string{"reader"}})
	return f
}

type answer struct {
	code   int
	header http.Header
	doc    map[string]any
	raw    string
}

func call(t *testing.T, method, url string, hdr map[string]string, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := answer{code: res.StatusCode, header: res.Header, raw: string(b)}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &a.doc); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %q", method, url, b)
		}
	}
	return a
}

func (f *fixture) auth(t *testing.T, body string) answer {
	t.Helper()
	return call(t, "POST", f.ks.URL()+"/v3/auth/tokens", nil, body)
}

// get walks a decoded document: get(doc, "token", "user", "name").
func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func roleNames(doc map[string]any) []string {
	var out []string
	list, _ := get(doc, "token", "roles").([]any)
	for _, r := range list {
		out = append(out, get(r, "name").(string))
	}
	slices.Sort(out)
	return out
}

func TestVersionDiscovery(t *testing.T) {
	f := newFixture(t)
	a := call(t, "GET", f.ks.URL()+"/", nil, "")
	values, _ := get(a.doc, "versions", "values").([]any)
	if a.code != 300 || len(values) != 1 || get(values[0], "id") != "v3.14" || get(values[0], "status") != "stable" {
		t.Fatalf("GET /: %d %s", a.code, a.raw)
	}
	for _, p := range []string{"/v3", "/v3/"} {
		a = call(t, "GET", f.ks.URL()+p, nil, "")
		links, _ := get(a.doc, "version", "links").([]any)
		if a.code != 200 || len(links) != 1 || get(links[0], "href") != f.ks.URL()+"/v3/" || get(a.doc, "version", "id") != "v3.14" {
			t.Fatalf("GET %s: %d %s", p, a.code, a.raw)
		}
	}
	if a := call(t, "GET", f.ks.URL()+"/v3/users", nil, ""); a.code != 404 || get(a.doc, "error", "title") != "Not Found" {
		t.Errorf("unknown path: %d %s", a.code, a.raw)
	}
}

func TestPasswordTokens(t *testing.T) {
	f := newFixture(t)
	adminRoles := []string{"admin", "manager", "member", "reader"}
	for _, tc := range []struct {
		name, body  string
		user, dom   string // expected user name and domain name
		project     string // expected project id, "" for none
		system      bool
		roles       []string
		withCatalog bool
	}{
		{"names and domain names, project scope",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}},"scope":{"project":{"name":"admin","domain":{"name":"Default"}}}}}`,
			"admin", "Default", f.admin.Project.ID, false, adminRoles, true},
		{"ids, project scope by id",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"` + f.admin.User.ID + `","password":"s3cret"}}},"scope":{"project":{"id":"` + f.admin.Project.ID + `"}}}}`,
			"admin", "Default", f.admin.Project.ID, false, adminRoles, true},
		{"domain ids",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"id":"default"},"password":"s3cret"}}},"scope":{"project":{"name":"admin","domain":{"id":"default"}}}}}`,
			"admin", "Default", f.admin.Project.ID, false, adminRoles, true},
		{"same user name in another domain",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"other"},"password":"other-pass"}}},"scope":{"project":{"name":"admin","domain":{"name":"other"}}}}}`,
			"admin", "other", "", false, []string{"member", "reader"}, true}, // member implies reader
		{"no scope: the default project",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}}}}`,
			"admin", "Default", f.admin.Project.ID, false, adminRoles, true},
		{"no scope and no default project: unscoped",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"plain","domain":{"name":"Default"},"password":"plain-pass"}}}}}`,
			"plain", "Default", "", false, nil, false},
		{"explicitly unscoped",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}},"scope":"unscoped"}}`,
			"admin", "Default", "", false, nil, false},
		{"system scope",
			`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}},"scope":{"system":{"all":true}}}}`,
			"admin", "Default", "", true, adminRoles, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.auth(t, tc.body)
			tok := a.header.Get("X-Subject-Token")
			if a.code != 201 || tok == "" {
				t.Fatalf("%d %q %s", a.code, tok, a.raw)
			}
			if get(a.doc, "token", "user", "name") != tc.user || get(a.doc, "token", "user", "domain", "name") != tc.dom {
				t.Errorf("user %v", get(a.doc, "token", "user"))
			}
			if tc.project != "" && get(a.doc, "token", "project", "id") != tc.project {
				t.Errorf("project %v, want %s", get(a.doc, "token", "project"), tc.project)
			}
			if tc.project == "" && tc.user == "admin" && tc.dom == "Default" && get(a.doc, "token", "project") != nil {
				t.Errorf("unexpected project %v", get(a.doc, "token", "project"))
			}
			if (get(a.doc, "token", "system", "all") == true) != tc.system {
				t.Errorf("system %v", get(a.doc, "token", "system"))
			}
			if got := roleNames(a.doc); !slices.Equal(got, tc.roles) {
				t.Errorf("roles %v, want %v", got, tc.roles)
			}
			if _, has := get(a.doc, "token").(map[string]any)["catalog"]; has != tc.withCatalog {
				t.Errorf("catalog present %v, want %v", has, tc.withCatalog)
			}
			if m := get(a.doc, "token", "methods").([]any); len(m) != 1 || m[0] != "password" {
				t.Errorf("methods %v", m)
			}
			// tempest parses both timestamps as %Y-%m-%dT%H:%M:%S.%fZ
			re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
			exp, _ := get(a.doc, "token", "expires_at").(string)
			if !re.MatchString(exp) || !re.MatchString(get(a.doc, "token", "issued_at").(string)) {
				t.Errorf("timestamps %v", get(a.doc, "token"))
			}
			if e, err := time.Parse(expiryFormat, exp); err != nil || time.Until(e) < 50*time.Minute {
				t.Errorf("expires_at %s: %v", exp, err)
			}
		})
	}
}

func TestCatalog(t *testing.T) {
	f := newFixture(t)
	f.ks.SetEndpoint("baremetal", "http://127.0.0.1:9999")
	a := f.auth(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}},"scope":{"project":{"name":"admin","domain":{"name":"Default"}}}}}`)
	cat, _ := get(a.doc, "token", "catalog").([]any)
	found := map[string]map[string]string{} // type -> interface -> url
	for _, svc := range cat {
		typ := get(svc, "type").(string)
		found[typ] = map[string]string{}
		for _, ep := range get(svc, "endpoints").([]any) {
			if get(ep, "region") != "RegionOne" || get(ep, "region_id") != "RegionOne" {
				t.Errorf("%s endpoint region %v", typ, ep)
			}
			found[typ][get(ep, "interface").(string)] = get(ep, "url").(string)
		}
	}
	want := map[string]map[string]string{
		"baremetal": {"public": "http://127.0.0.1:9999", "internal": "http://127.0.0.1:9999", "admin": "http://127.0.0.1:9999"},
		"identity":  {"public": f.ks.URL() + "/v3", "internal": f.ks.URL() + "/v3", "admin": f.ks.URL() + "/v3"},
	}
	for typ, ifaces := range want {
		for iface, url := range ifaces {
			if found[typ][iface] != url {
				t.Errorf("%s %s: %q, want %q (catalog %s)", typ, iface, found[typ][iface], url, a.raw)
			}
		}
	}
	// ?nocatalog leaves it out; /v3/auth/catalog serves it on its own.
	a = call(t, "POST", f.ks.URL()+"/v3/auth/tokens?nocatalog", nil, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"`+f.admin.User.ID+`","password":"s3cret"}}}}}`)
	if _, has := get(a.doc, "token").(map[string]any)["catalog"]; has || a.code != 201 {
		t.Errorf("nocatalog: %d %s", a.code, a.raw)
	}
	c := call(t, "GET", f.ks.URL()+"/v3/auth/catalog", map[string]string{"X-Auth-Token": a.header.Get("X-Subject-Token")}, "")
	if list, _ := get(c.doc, "catalog").([]any); c.code != 200 || len(list) != 2 {
		t.Errorf("auth/catalog: %d %s", c.code, c.raw)
	}
	p := call(t, "GET", f.ks.URL()+"/v3/auth/projects", map[string]string{"X-Auth-Token": a.header.Get("X-Subject-Token")}, "")
	if list, _ := get(p.doc, "projects").([]any); p.code != 200 || len(list) != 1 || get(list[0], "name") != "admin" {
		t.Errorf("auth/projects: %d %s", p.code, p.raw)
	}
	// Removing an endpoint removes it from later tokens.
	f.ks.SetEndpoint("baremetal", "")
	a = f.auth(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"`+f.admin.User.ID+`","password":"s3cret"}}}}}`)
	if cat, _ := get(a.doc, "token", "catalog").([]any); len(cat) != 1 || get(cat[0], "type") != "identity" {
		t.Errorf("catalog without baremetal: %s", a.raw)
	}
}

func TestApplicationCredentials(t *testing.T) {
	f := newFixture(t)
	for _, body := range []string{
		`{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"id":"` + f.cred.ID + `","secret":"app-secret"}}}}`,
		`{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"name":"ci","secret":"app-secret","user":{"name":"admin","domain":{"name":"Default"}}}}}}`,
		`{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"name":"ci","secret":"app-secret","user":{"id":"` + f.admin.User.ID + `"}}}}}`,
	} {
		a := f.auth(t, body)
		if a.code != 201 || a.header.Get("X-Subject-Token") == "" {
			t.Fatalf("%s: %d %s", body, a.code, a.raw)
		}
		if get(a.doc, "token", "project", "id") != f.admin.Project.ID || !slices.Equal(roleNames(a.doc), []string{"reader"}) ||
			get(a.doc, "token", "application_credential", "id") != f.cred.ID || get(a.doc, "token", "catalog") == nil {
			t.Errorf("%s: %s", body, a.raw)
		}
	}
	for name, body := range map[string]string{
		"wrong secret":     `{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"id":"` + f.cred.ID + `","secret":"nope"}}}}`,
		"unknown id":       `{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"id":"nope","secret":"app-secret"}}}}`,
		"name, wrong user": `{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"name":"ci","secret":"app-secret","user":{"name":"plain","domain":{"name":"Default"}}}}}}`,
		"other project":    `{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"id":"` + f.cred.ID + `","secret":"app-secret"}},"scope":{"project":{"id":"` + f.demo.ID + `"}}}}`,
	} {
		if a := f.auth(t, body); a.code != 401 || a.header.Get("X-Subject-Token") != "" {
			t.Errorf("%s: %d %s", name, a.code, a.raw)
		}
	}
}

func TestBadCredentials(t *testing.T) {
	f := newFixture(t)
	generic := "The request you have made requires authentication."
	for _, tc := range []struct {
		name, body string
		code       int
		message    string
	}{
		{"wrong password", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"nope"}}}}}`, 401, generic},
		{"unknown user", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"nobody","domain":{"name":"Default"},"password":"s3cret"}}}}}`, 401, generic},
		{"unknown domain", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Nowhere"},"password":"s3cret"}}}}}`, 401, generic},
		{"password of the same name in another domain", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"other-pass"}}}}}`, 401, generic},
		{"unknown project", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}},"scope":{"project":{"name":"nope","domain":{"name":"Default"}}}}}`, 401, generic},
		{"no role on the project", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"plain","domain":{"name":"Default"},"password":"plain-pass"}}},"scope":{"project":{"name":"admin","domain":{"name":"Default"}}}}}`, 401, "has no access to project"},
		{"no system role", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"plain","domain":{"name":"Default"},"password":"plain-pass"}}},"scope":{"system":{"all":true}}}}`, 401, "no access to the system"},
		{"unsupported method", `{"auth":{"identity":{"methods":["totp"],"totp":{}}}}`, 401, "unsupported method"},
		{"user name without domain", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","password":"s3cret"}}}}}`, 400, "Expecting to find domain in user."},
		{"project name without domain", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"` + f.admin.User.ID + `","password":"s3cret"}}},"scope":{"project":{"name":"admin"}}}}`, 400, "Expecting to find domain in project."},
		{"no methods", `{"auth":{"identity":{}}}`, 400, "'methods' is a required property"},
		{"no identity", `{"auth":{}}`, 400, "Expecting to find identity in auth."},
		{"not JSON", `{"auth":`, 400, "Malformed request body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.auth(t, tc.body)
			title := map[int]string{400: "Bad Request", 401: "Unauthorized"}[tc.code]
			if a.code != tc.code || get(a.doc, "error", "code") != float64(tc.code) || get(a.doc, "error", "title") != title ||
				!strings.Contains(get(a.doc, "error", "message").(string), tc.message) || a.header.Get("X-Subject-Token") != "" {
				t.Fatalf("%d %s", a.code, a.raw)
			}
			if tc.code == 401 && a.header.Get("WWW-Authenticate") != `Keystone uri="`+f.ks.URL()+`"` {
				t.Errorf("WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestValidateRescopeRevokeExpire(t *testing.T) {
	f := newFixture(t)
	a := f.auth(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"plain","domain":{"name":"Default"},"password":"plain-pass"}}}}}`)
	unscoped := a.header.Get("X-Subject-Token")
	// rescope the unscoped token to the user's project
	a = f.auth(t, `{"auth":{"identity":{"methods":["token"],"token":{"id":"`+unscoped+`"}},"scope":{"project":{"name":"demo","domain":{"id":"default"}}}}}`)
	scoped := a.header.Get("X-Subject-Token")
	if a.code != 201 || get(a.doc, "token", "project", "id") != f.demo.ID || get(a.doc, "token", "user", "name") != "plain" {
		t.Fatalf("rescope: %d %s", a.code, a.raw)
	}
	validate := func(method, caller, subject string) answer {
		return call(t, method, f.ks.URL()+"/v3/auth/tokens", map[string]string{"X-Auth-Token": caller, "X-Subject-Token": subject}, "")
	}
	v := validate("GET", unscoped, scoped)
	if v.code != 200 || v.header.Get("X-Subject-Token") != scoped || get(v.doc, "token", "project", "name") != "demo" || get(v.doc, "token", "catalog") == nil {
		t.Fatalf("validate: %d %s", v.code, v.raw)
	}
	if h := validate("HEAD", scoped, scoped); h.code != 200 || h.raw != "" {
		t.Errorf("HEAD: %d %q", h.code, h.raw)
	}
	if v := validate("GET", "", scoped); v.code != 401 {
		t.Errorf("no X-Auth-Token: %d %s", v.code, v.raw)
	}
	if v := validate("GET", "bogus", scoped); v.code != 401 {
		t.Errorf("bad X-Auth-Token: %d %s", v.code, v.raw)
	}
	if v := validate("GET", scoped, "bogus"); v.code != 404 || get(v.doc, "error", "title") != "Not Found" {
		t.Errorf("unknown subject: %d %s", v.code, v.raw)
	}
	if info, ok := f.ks.Validate(scoped); !ok || info.UserName != "plain" || info.ProjectName != "demo" || !slices.Equal(info.Roles, []string{"member", "reader"}) {
		t.Errorf("Validate: %+v %v", info, ok)
	}
	// revoke
	if r := call(t, "DELETE", f.ks.URL()+"/v3/auth/tokens", map[string]string{"X-Auth-Token": unscoped, "X-Subject-Token": scoped}, ""); r.code != 204 {
		t.Fatalf("revoke: %d %s", r.code, r.raw)
	}
	if v := validate("GET", unscoped, scoped); v.code != 404 {
		t.Errorf("revoked token still valid: %d %s", v.code, v.raw)
	}
	if _, ok := f.ks.Validate(scoped); ok {
		t.Error("Validate accepts a revoked token")
	}
	// expiry: move the stub's clock past the token's lifetime
	f.ks.mu.Lock()
	f.ks.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	f.ks.mu.Unlock()
	if _, ok := f.ks.Validate(unscoped); ok {
		t.Error("Validate accepts an expired token")
	}
	if a := f.auth(t, `{"auth":{"identity":{"methods":["token"],"token":{"id":"`+unscoped+`"}}}}`); a.code != 401 {
		t.Errorf("rescoping an expired token: %d %s", a.code, a.raw)
	}
	// a password change takes effect at once
	if err := f.ks.SetPassword(f.plain.ID, "new-pass"); err != nil {
		t.Fatal(err)
	}
	if a := f.auth(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"`+f.plain.ID+`","password":"plain-pass"}}}}}`); a.code != 401 {
		t.Errorf("old password: %d", a.code)
	}
}

func TestGuard(t *testing.T) {
	f := newFixture(t)
	var seenRoles, seenUser []string
	g, url := f.ks.StartGuard(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenRoles = append(seenRoles, r.Header.Get("X-Roles"))
		seenUser = append(seenUser, r.Header.Get("X-User-Name"))
		w.Write([]byte(`{}`))
	}))
	a := f.auth(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","domain":{"name":"Default"},"password":"s3cret"}}}}}`)
	tok := a.header.Get("X-Subject-Token")
	// the catalog now points at the guard
	if cat := get(a.doc, "token", "catalog").([]any); !strings.Contains(a.raw, `"url":"`+url+`"`) || len(cat) != 2 {
		t.Errorf("catalog does not point at the guard: %s", a.raw)
	}
	for _, tc := range []struct {
		path, token, forged string
		code                int
	}{
		{"/v1/nodes", tok, "", 200},
		{"/v1/nodes", "", "admin", 401},  // forged identity headers do not help
		{"/v1/nodes", "bogus", "", 401},  // not a stub token
		{"/v1", "", "", 200},             // version discovery is public
		{"/", "", "", 200},               // so is the root
		{"/v1/lookup", "", "", 200},      // and the ramdisk's lookup
		{"/v1/heartbeat/x", "", "", 200}, // and heartbeats
	} {
		hdr := map[string]string{}
		if tc.token != "" {
			hdr["X-Auth-Token"] = tc.token
		}
		if tc.forged != "" {
			hdr["X-User-Name"], hdr["X-Roles"], hdr["X-Identity-Status"] = tc.forged, "admin", "Confirmed"
		}
		if r := call(t, "GET", url+tc.path, hdr, ""); r.code != tc.code {
			t.Errorf("%s token=%q: %d %s", tc.path, tc.token, r.code, r.raw)
		}
	}
	passed := g.Passed()
	if len(passed) != 1 || passed[0].Path != "/v1/nodes" || passed[0].Token.UserName != "admin" || g.Denied() != 2 {
		t.Errorf("guard saw %+v, %s", passed, g)
	}
	if seenUser[0] != "admin" || seenRoles[0] != "admin,manager,member,reader" || slices.Contains(seenUser[1:], "admin") {
		t.Errorf("identity headers reaching the service: users %q roles %q", seenUser, seenRoles)
	}
}

// TestValidatePolicyImpliedFaults: only a service, a system reader or the
// token's own user may validate a token; roles imply others as Keystone's
// bootstrap sets them; a slow or unavailable stub behaves so.
func TestValidatePolicyImpliedFaults(t *testing.T) {
	f := newFixture(t)
	svcProject := f.ks.AddProject(Project{Name: "service"})
	f.ks.AddUser(User{Name: "ironic", Password: "ironic-pass", ProjectRoles: map[string][]string{svcProject.ID: {"service"}}})
	f.ks.AddUser(User{Name: "auditor", Password: "auditor-pass", SystemRoles: []string{"admin"}})
	token := func(user, pass, scope string) string {
		a := f.auth(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"`+user+`","domain":{"name":"Default"},"password":"`+pass+`"}}},"scope":`+scope+`}}`)
		if a.code != 201 {
			t.Fatalf("%s: %d %s", user, a.code, a.raw)
		}
		return a.header.Get("X-Subject-Token")
	}
	plain := token("plain", "plain-pass", `{"project":{"name":"demo","domain":{"name":"Default"}}}`)
	svc := token("ironic", "ironic-pass", `{"project":{"name":"service","domain":{"name":"Default"}}}`)
	sys := token("auditor", "auditor-pass", `{"system":{"all":true}}`)
	validate := func(caller, subject string) answer {
		return call(t, "GET", f.ks.URL()+"/v3/auth/tokens", map[string]string{"X-Auth-Token": caller, "X-Subject-Token": subject}, "")
	}
	if v := validate(svc, plain); v.code != 200 {
		t.Errorf("service validating: %d %s", v.code, v.raw)
	}
	v := validate(sys, plain)
	if v.code != 200 {
		t.Errorf("system admin (implies reader) validating: %d %s", v.code, v.raw)
	}
	if v := validate(plain, svc); v.code != 403 {
		t.Errorf("a project member validating another user's token: %d %s", v.code, v.raw)
	}
	if info, _ := f.ks.Validate(sys); !slices.Equal(info.Roles, []string{"admin", "manager", "member", "reader"}) || !info.System {
		t.Errorf("system admin token roles %v system %v", info.Roles, info.System)
	}

	f.ks.SetUnavailable(true)
	if v := validate(svc, plain); v.code != 503 {
		t.Errorf("unavailable: %d %s", v.code, v.raw)
	}
	f.ks.SetUnavailable(false)
	f.ks.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.ks.URL()+"/v3", nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Errorf("a delayed stub answered %d", res.StatusCode)
	}
	f.ks.SetDelay(0)
}
