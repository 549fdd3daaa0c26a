package web

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi"
)

// TestMeReadOnly: /ui/api/me tells the page whether the caller may change
// anything; a system reader gets read_only and the page hides what has
// class "write" (the node actions, bulk actions, import).
func TestMeReadOnly(t *testing.T) {
	dir := t.TempDir()
	var pw strings.Builder
	for _, u := range []string{"admin", "noc", "tenant"} {
		hash, _ := bcrypt.GenerateFromPassword([]byte("pw-"+u), bcrypt.MinCost)
		pw.WriteString(u + ":" + string(hash) + "\n")
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ht, err := httpapi.LoadHTPasswd(write("htpasswd", pw.String()))
	if err != nil {
		t.Fatal(err)
	}
	users, err := httpapi.LoadBasicUsers(ht, write("users.yaml", `
admin: {roles: [admin, member, reader], scope: system}
noc: {roles: [reader], scope: system}
tenant: {roles: [member, reader], project: acme}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, users)
	for user, want := range map[string]bool{"admin": false, "noc": true, "tenant": false} {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, "pw-"+user)
		r := s.do("GET", "/ui/api/me", nil, map[string]string{"Authorization": req.Header.Get("Authorization")})
		var me httpapi.Caller
		if r.status != 200 || json.Unmarshal(r.body, &me) != nil {
			t.Fatalf("%s: %d %s", user, r.status, r.body)
		}
		if me.ReadOnly != want || me.User != user || me.Auth != "http_basic" {
			t.Errorf("%s: %+v, want read_only %v", user, me, want)
		}
		// can: which node actions policy allows, by the caller's
		// relation to the node (Ironic's defaults).
		can := map[string]string{}
		for k, v := range me.Can {
			can[k] = strings.Join(v, ",")
		}
		wantCan := map[string]map[string]string{
			"admin":  {"create": "other", "provision": "other", "power": "other", "maintenance on": "other", "delete": "other"},
			"noc":    {"create": "", "provision": "", "power": "", "maintenance on": "", "delete": ""},
			"tenant": {"create": "", "provision": "owner", "power": "owner,lessee", "maintenance on": "owner", "delete": ""},
		}[user]
		for k, v := range wantCan {
			if can[k] != v {
				t.Errorf("%s: can %s = %q, want %q", user, k, can[k], v)
			}
		}
	}
	if r := s.do("GET", "/ui/api/me", nil, nil); r.status != 401 {
		t.Errorf("without credentials: %d", r.status)
	}
	css := s.do("GET", "/ui/style.css", nil, map[string]string{"Authorization": "Basic " + basic("admin", "pw-admin")})
	if !strings.Contains(string(css.body), "body.readonly .write") {
		t.Error("style.css does not hide .write for read-only callers")
	}
	noauth := newServer(t, nil)
	var me httpapi.Caller
	if r := noauth.do("GET", "/ui/api/me", nil, nil); r.status != 200 || json.Unmarshal(r.body, &me) != nil || me.ReadOnly {
		t.Errorf("noauth: %d %s", r.status, r.body)
	}
}

func basic(user, pass string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}
