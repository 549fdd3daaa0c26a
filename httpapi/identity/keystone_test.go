package identity

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"castiron/tests/keystone"
)

// ksFixture is the Keystone stand-in with castiron's service user (role
// service on project service, as a deployment gives Ironic's), a project
// member and a system reader.
type ksFixture struct {
	ks                  *keystone.Server
	svc, alice, auditor keystone.User
	owner               keystone.Project
}

func newKSFixture(t *testing.T) *ksFixture {
	t.Helper()
	ks := keystone.Start(t, keystone.Config{})
	f := &ksFixture{ks: ks}
	service := ks.AddProject(keystone.Project{Name: "service"})
	f.owner = ks.AddProject(keystone.Project{Name: "owner"})
	f.svc = ks.AddUser(keystone.User{Name: "castiron", Password: "svc-pass", ProjectRoles: map[string][]string{service.ID: {"service"}}})
	f.alice = ks.AddUser(keystone.User{Name: "alice", Password: "alice-pass", ProjectRoles: map[string][]string{f.owner.ID: {"member"}}})
	f.auditor = ks.AddUser(keystone.User{Name: "auditor", Password: "auditor-pass", SystemRoles: []string{"reader"}})
	return f
}

func (f *ksFixture) config() KeystoneConfig {
	return KeystoneConfig{AuthURL: f.ks.URL(), Username: "castiron", Password: "svc-pass", ProjectName: "service"}
}

// token gets a token from the stand-in over HTTP.
func (f *ksFixture) token(t *testing.T, user, pass, scope string) string {
	t.Helper()
	body := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"` + user + `","domain":{"name":"Default"},"password":"` + pass + `"}}},"scope":` + scope + `}}`
	res, err := http.Post(f.ks.URL()+"/v3/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("token for %s: %d", user, res.StatusCode)
	}
	return res.Header.Get("X-Subject-Token")
}

func requestWith(tok string) *http.Request {
	r, _ := http.NewRequest("GET", "http://castiron/v1/nodes", nil)
	if tok != "" {
		r.Header.Set("X-Auth-Token", tok)
	}
	return r
}

func TestKeystoneScopedTokens(t *testing.T) {
	f := newKSFixture(t)
	k, err := NewKeystone(f.config())
	if err != nil {
		t.Fatal(err)
	}
	proj := f.token(t, "alice", "alice-pass", `{"project":{"name":"owner","domain":{"name":"Default"}}}`)
	id, err := k.Identify(requestWith(proj))
	if err != nil {
		t.Fatal(err)
	}
	if id.User != "alice" || id.ProjectID != f.owner.ID || id.ProjectName != "owner" || id.System || strings.Join(id.Roles, ",") != "member,reader" || id.Unrestricted {
		t.Errorf("project token: %+v", id)
	}
	// History names a Keystone user by its ID, as Ironic's user_id.
	if id.Scope() != "project" || id.UserID == "" || id.UserID == "alice" || id.Actor() != id.UserID {
		t.Errorf("scope %s actor %s", id.Scope(), id.Actor())
	}
	sys := f.token(t, "auditor", "auditor-pass", `{"system":{"all":true}}`)
	id, err = k.Identify(requestWith(sys))
	if err != nil {
		t.Fatal(err)
	}
	if !id.System || id.ProjectID != "" || strings.Join(id.Roles, ",") != "reader" || id.Scope() != "system" {
		t.Errorf("system token: %+v", id)
	}
	for _, tok := range []string{"", "bogus"} {
		if _, err := k.Identify(requestWith(tok)); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	if c := k.Challenge(); c != `Keystone uri="`+f.ks.URL()+`"` {
		t.Errorf("challenge %q", c)
	}
}

// TestKeystoneRevocationAndCache: a revoked token keeps working only
// within the cache lifetime; the cache is bounded.
func TestKeystoneRevocationAndCache(t *testing.T) {
	f := newKSFixture(t)
	cfg := f.config()
	cfg.CacheTime = time.Minute
	cfg.CacheSize = 2
	k, err := NewKeystone(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	k.now = func() time.Time { return now }
	tok := f.token(t, "alice", "alice-pass", `{"project":{"name":"owner","domain":{"name":"Default"}}}`)
	if _, err := k.Identify(requestWith(tok)); err != nil {
		t.Fatal(err)
	}
	f.ks.RevokeTokens(f.alice.ID)
	if _, err := k.Identify(requestWith(tok)); err != nil {
		t.Errorf("within the cache lifetime a revoked token is still trusted (as keystonemiddleware): %v", err)
	}
	now = now.Add(cfg.CacheTime + time.Second)
	if _, err := k.Identify(requestWith(tok)); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("revoked token after the cache lifetime: %v", err)
	}
	for range 3 {
		if _, err := k.Identify(requestWith(f.token(t, "auditor", "auditor-pass", `{"system":{"all":true}}`))); err != nil {
			t.Fatal(err)
		}
	}
	k.mu.Lock()
	n := k.lru.Len()
	k.mu.Unlock()
	if n != 2 {
		t.Errorf("cache holds %d tokens, bound 2", n)
	}
}

// TestKeystoneServiceTokenRenewed: when Keystone stops taking castiron's
// own token, castiron gets a new one and the caller is not refused.
func TestKeystoneServiceTokenRenewed(t *testing.T) {
	f := newKSFixture(t)
	k, err := NewKeystone(f.config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Identify(requestWith(f.token(t, "alice", "alice-pass", `{"project":{"name":"owner","domain":{"name":"Default"}}}`))); err != nil {
		t.Fatal(err)
	}
	if f.ks.RevokeTokens(f.svc.ID) == 0 {
		t.Fatal("castiron held no service token")
	}
	if _, err := k.Identify(requestWith(f.token(t, "auditor", "auditor-pass", `{"system":{"all":true}}`))); err != nil {
		t.Errorf("after the service token was revoked: %v", err)
	}
}

// TestKeystoneDownSlowMisconfigured: nobody gets in when Keystone cannot
// answer: 503 (UnavailableError), never a pass.
func TestKeystoneDownSlowMisconfigured(t *testing.T) {
	f := newKSFixture(t)
	tok := f.token(t, "alice", "alice-pass", `{"project":{"name":"owner","domain":{"name":"Default"}}}`)
	unavailable := func(name string, k *Keystone) {
		t.Helper()
		id, err := k.Identify(requestWith(tok))
		var down *UnavailableError
		if !errors.As(err, &down) || id != nil {
			t.Errorf("%s: %v %v, want UnavailableError", name, id, err)
		}
	}
	k, _ := NewKeystone(f.config())
	f.ks.SetUnavailable(true)
	unavailable("503 from Keystone", k)
	f.ks.SetUnavailable(false)

	cfg := f.config()
	cfg.Timeout = 100 * time.Millisecond
	slow, _ := NewKeystone(cfg)
	f.ks.SetDelay(10 * time.Second)
	unavailable("Keystone slower than the timeout", slow)
	f.ks.SetDelay(0)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	cfg = f.config()
	cfg.AuthURL = dead
	gone, _ := NewKeystone(cfg)
	unavailable("nothing listening", gone)

	cfg = f.config()
	cfg.Password = "wrong"
	wrong, _ := NewKeystone(cfg)
	unavailable("castiron's own password refused", wrong)

	// A service user without the right to validate gets 403 from
	// Keystone: unavailable too, not a pass.
	cfg = f.config()
	cfg.Username, cfg.Password, cfg.ProjectName = "alice", "alice-pass", "owner"
	weak, _ := NewKeystone(cfg)
	if _, err := weak.Identify(requestWith(f.token(t, "auditor", "auditor-pass", `{"system":{"all":true}}`))); err == nil {
		t.Error("a service user that may not validate tokens let a caller in")
	}

	if _, err := NewKeystone(KeystoneConfig{AuthURL: f.ks.URL()}); err == nil || !strings.Contains(err.Error(), "--keystone-username") {
		t.Errorf("missing settings: %v", err)
	}
}

func TestThrottle(t *testing.T) {
	th := &Throttle{Free: 2, Base: 100 * time.Millisecond, Max: time.Second, Window: time.Minute, Size: 3}
	now := time.Now()
	th.now = func() time.Time { return now }
	want := []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for i, w := range want {
		th.Failed("10.0.0.1")
		if d := th.Delay("10.0.0.1"); d != w {
			t.Errorf("after %d failures: %v, want %v", i+1, d, w)
		}
	}
	if th.Delay("10.0.0.2") != 0 {
		t.Error("another address slowed")
	}
	now = now.Add(2 * time.Minute)
	if th.Delay("10.0.0.1") != 0 {
		t.Error("failures not forgotten after the window")
	}
	for i := range 10 {
		th.Failed("10.1.0." + string(rune('0'+i)))
	}
	if th.Len() != 3 {
		t.Errorf("%d addresses kept, bound 3", th.Len())
	}
	th.Failed("a")
	th.Failed("a")
	th.Failed("a")
	th.Succeeded("a")
	if th.Delay("a") != 0 {
		t.Error("a success did not clear the address")
	}
}
