package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"castiron/httpapi/consoletest"
	"castiron/httpapi/identity"
	"castiron/tests/keystone"
)

// TestConsoleStreamKeystone: a browser's WebSocket cannot send
// X-Auth-Token, so under Keystone the web UI offers the token as a second
// subprotocol beside "castiron.console"; castiron validates it as a
// header token and selects "castiron.console" (never echoing the token).
func TestConsoleStreamKeystone(t *testing.T) {
	ks := keystone.Start(t, keystone.Config{})
	service := ks.AddProject(keystone.Project{Name: "service"})
	ks.AddUser(keystone.User{Name: "castiron", Password: "svc", ProjectRoles: map[string][]string{service.ID: {"service"}}})
	ks.AddUser(keystone.User{Name: "root", Password: "root", SystemRoles: []string{"admin"}})
	ks.AddUser(keystone.User{Name: "noc", Password: "noc", SystemRoles: []string{"reader"}})
	k, err := identity.NewKeystone(identity.KeystoneConfig{AuthURL: ks.URL(), Username: "castiron", Password: "svc", ProjectName: "service"})
	if err != nil {
		t.Fatal(err)
	}
	con := consoletest.New()
	h := newAPI(t, func(o *Options) { o.Auth = k; o.Console = con })
	token := func(user string) string {
		body := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"` + user + `","domain":{"name":"Default"},"password":"` + user + `"}}},"scope":{"system":{"all":true}}}}`
		res, err := http.Post(ks.URL()+"/v3/auth/tokens", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("X-Subject-Token")
	}
	root, noc := token("root"), token("noc")
	req, _ := http.NewRequest("POST", h.srv.URL+"/v1/nodes", strings.NewReader(`{"driver": "fake-hardware"}`))
	req.Header.Set("X-Auth-Token", root)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", err, res)
	}
	uuid := strings.TrimPrefix(res.Header.Get("Location"), h.srv.URL+"/v1/nodes/")
	res.Body.Close()
	con.Enable(uuid)
	con.Print(uuid, []byte("login: "))

	dial := func(protocols ...string) (*websocket.Conn, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, res, err := websocket.Dial(ctx, wsURL(h, uuid), &websocket.DialOptions{Subprotocols: protocols})
		if err != nil {
			if res == nil {
				t.Fatalf("dial: %v", err)
			}
			return nil, res.StatusCode
		}
		t.Cleanup(func() { c.CloseNow() })
		return c, http.StatusSwitchingProtocols
	}
	if _, st := dial("castiron.console"); st != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", st)
	}
	if _, st := dial("castiron.console", identity.WebSocketTokenPrefix+"not-a-token"); st != http.StatusUnauthorized {
		t.Errorf("bad token: %d, want 401", st)
	}
	for _, tc := range []struct {
		tok   string
		write bool
	}{{root, true}, {noc, false}} {
		c, st := dial("castiron.console", identity.WebSocketTokenPrefix+tc.tok)
		if st != http.StatusSwitchingProtocols {
			t.Fatalf("token as subprotocol: %d, want 101", st)
		}
		if p := c.Subprotocol(); p != "castiron.console" {
			t.Errorf("selected subprotocol %q, want castiron.console (the token never echoed)", p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, hello, err := c.Read(ctx)
		cancel()
		if err != nil || !strings.Contains(string(hello), map[bool]string{true: `"write":true`, false: `"write":false`}[tc.write]) {
			t.Errorf("hello %s (%v), want write=%v", hello, err, tc.write)
		}
	}
}
