package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"castiron/httpapi/identity"
	"castiron/tests/keystone"
)

// TestBrowserKeystoneLogin: under --auth-strategy keystone the page asks
// for a token, sends it on every call, and offers a system reader no
// action, a project member only what policy lets it do on its own node,
// and a system admin everything; a bad token is refused with a message;
// Log out forgets the token.
func TestBrowserKeystoneLogin(t *testing.T) {
	b := newBrowser(t, 1366, 860)
	ks := keystone.Start(t, keystone.Config{})
	svc := ks.AddProject(keystone.Project{Name: "service"})
	acme := ks.AddProject(keystone.Project{Name: "acme"})
	ks.AddUser(keystone.User{Name: "castiron", Password: "svc", ProjectRoles: map[string][]string{svc.ID: {"service"}}})
	ks.AddUser(keystone.User{Name: "root", Password: "root", SystemRoles: []string{"admin"}})
	ks.AddUser(keystone.User{Name: "noc", Password: "noc", SystemRoles: []string{"reader"}})
	ks.AddUser(keystone.User{Name: "tenant", Password: "tenant", ProjectRoles: map[string][]string{acme.ID: {"member"}}})
	k, err := identity.NewKeystone(identity.KeystoneConfig{AuthURL: ks.URL(), Username: "castiron", Password: "svc", ProjectName: "service"})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, k)
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
	tenant := token("tenant", `{"project":{"name":"acme","domain":{"name":"Default"}}}`)
	as := map[string]string{"X-Auth-Token": root}
	node := func(body map[string]any) string {
		r := s.do("POST", "/v1/nodes", body, as)
		if r.status != 201 {
			t.Fatalf("create node: %d %s", r.status, r.body)
		}
		return string(r.body[strings.Index(string(r.body), `"uuid": "`)+9:][:36])
	}
	n1 := node(map[string]any{"driver": "fake-hardware", "name": "rack1-node01", "owner": acme.ID})
	node(map[string]any{"driver": "fake-hardware", "name": "rack1-node02"})

	login := func(tok string) {
		t.Helper()
		b.waitReload("the login form", `!!document.querySelector('form.login #token')`)
		b.run(chromedp.SendKeys(`#token`, tok, chromedp.ByQuery), chromedp.Click(`form.login button[type=submit]`, chromedp.ByQuery))
	}
	logout := func() {
		t.Helper()
		b.run(chromedp.Click(`#logout`, chromedp.ByQuery))
		b.waitReload("the login form again", `!!document.querySelector('form.login #token')`)
		// The page stays where it was (the hash survives the reload): back
		// to the fleet for the next login.
		b.run(chromedp.Navigate(s.srv.URL + "/"))
	}

	b.sub(t, "no token: the login form, not a Basic prompt", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/"))
		login("not-a-token")
		b.waitReload("the refusal", `(document.querySelector('form.login .form-error')||{}).textContent === 'That token was refused (expired, revoked or mistyped).'`)
	})

	b.sub(t, "system reader: sees the fleet, offered no action", func(t *testing.T) {
		login(noc)
		b.waitReload("2 rows", `document.querySelectorAll('.vinner .row').length === 2`)
		var who string
		b.eval(`document.getElementById('who').textContent`, &who)
		if !strings.HasPrefix(who, "noc (system)") {
			t.Errorf("who: %q", who)
		}
		var hidden bool
		b.eval(`document.body.classList.contains('readonly') && document.querySelector('[data-nav=import]').hidden && !document.querySelector('a[href="#/import"].button')`, &hidden)
		if !hidden {
			t.Error("a system reader is offered the import")
		}
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + n1))
		b.waitJS("the node page", `(document.getElementById('node-h')||{}).textContent === 'rack1-node01'`)
		if got := actionsOffered(b); len(got) != 0 {
			t.Errorf("a system reader is offered %v", got)
		}
		var shown bool
		b.eval(`getComputedStyle(document.querySelector('.actions')).display !== 'none'`, &shown)
		if shown {
			t.Error("the action bar shows for a system reader")
		}
		logout()
	})

	b.sub(t, "project member: its own node's power, provision and maintenance, no delete", func(t *testing.T) {
		login(tenant)
		b.waitReload("its 1 row", `document.querySelectorAll('.vinner .row').length === 1`)
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + n1))
		b.waitJS("the node's actions", `document.querySelectorAll('.actions button[data-action]').length > 0`)
		got := actionsOffered(b)
		// Ironic's defaults: an owner's member may provision, power and
		// set maintenance; deleting needs a system admin or the owner's admin.
		if !contains(got, "manage") || !contains(got, "power on") || !contains(got, "maintenance on") || contains(got, "delete") {
			t.Errorf("a project member is offered %v", got)
		}
		logout()
	})

	b.sub(t, "system admin: everything", func(t *testing.T) {
		login(root)
		b.waitReload("2 rows", `document.querySelectorAll('.vinner .row').length === 2`)
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + n1))
		b.waitJS("the node's actions", `document.querySelectorAll('.actions button[data-action]').length > 0`)
		got := actionsOffered(b)
		for _, want := range []string{"manage", "power on", "maintenance on", "delete"} {
			if !contains(got, want) {
				t.Errorf("a system admin is not offered %s: %v", want, got)
			}
		}
		var importShown bool
		b.eval(`!document.querySelector('[data-nav=import]').hidden`, &importShown)
		if !importShown {
			t.Error("a system admin is not offered the import")
		}
	})
	b.checkErrors()
}

// waitReload is waitJS across the page reloads logging in and out cause:
// a poll cut short by the navigation is started again on the new page.
func (b *browser) waitReload(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			var page string
			_ = chromedp.Run(b.ctx, chromedp.Evaluate(`document.getElementById('main').innerText.slice(0, 1500)`, &page))
			b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
