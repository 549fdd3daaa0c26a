package appliance

import (
	"strings"
	"testing"

	"castiron/httpapi"
	"castiron/httpapi/identity"
)

// TestAuthStrategy: --auth-strategy and its settings, from flags, the
// environment and the configuration file alike.
func TestAuthStrategy(t *testing.T) {
	hash := "$2y$04$2/Mk1v1f8e8lRqpmqqDD5eTB0hq0t6R2kNbYRy3cm7BIxJrbJ7.Mq" // bcrypt of "x"
	htpasswd := writeFile(t, "htpasswd", "admin:"+hash+"\nnoc:"+hash+"\n")
	users := writeFile(t, "users.yaml", "admin: {roles: [admin, member, reader], scope: system}\nnoc: {roles: [reader], scope: system}\n")
	ksFile := writeFile(t, "castiron.yaml", "auth-strategy: keystone\nkeystone-auth-url: http://127.0.0.1:5000\nkeystone-username: castiron\nkeystone-project-name: service\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		kind string // "" noauth; else the type; or "error: ..."
	}{
		{"default on loopback", nil, nil, ""},
		{"default with htpasswd", []string{"--htpasswd", htpasswd}, nil, "*httpapi.HTPasswd"},
		{"http_basic with users", []string{"--auth-strategy", "http_basic", "--htpasswd", htpasswd, "--users-file", users}, nil, "*httpapi.BasicUsers"},
		{"keystone from file and env", []string{"--config", ksFile}, map[string]string{"CASTIRON_KEYSTONE_PASSWORD": "pw"}, "*identity.Keystone"},
		{"keystone without password", []string{"--config", ksFile}, nil, "error: --keystone-password"},
		{"http_basic without htpasswd", []string{"--auth-strategy", "http_basic"}, nil, "error: needs --htpasswd"},
		{"users file without http_basic", []string{"--users-file", users}, nil, "error: --users-file needs"},
		{"noauth with htpasswd", []string{"--auth-strategy", "noauth", "--htpasswd", htpasswd}, nil, "error: say which"},
		{"noauth off loopback", []string{"--listen", "0.0.0.0:6385"}, nil, "error: refusing to serve"},
		{"bad strategy", []string{"--auth-strategy", "ldap"}, nil, "error: want one of noauth, http_basic, keystone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseServeFlags(append([]string{"--conductor-name", "c"}, tc.args...), envMap(tc.env))
			var auth httpapi.Authenticator
			if err == nil {
				auth, err = authFor(c)
			}
			if want, ok := strings.CutPrefix(tc.kind, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch auth.(type) {
			case *httpapi.HTPasswd:
				got = "*httpapi.HTPasswd"
			case *httpapi.BasicUsers:
				got = "*httpapi.BasicUsers"
			case *identity.Keystone:
				got = "*identity.Keystone"
			}
			if got != tc.kind {
				t.Fatalf("auth %T, want %s", auth, tc.kind)
			}
		})
	}
}

// TestBadPolicyFileStopsStartUp: serve refuses to start with a policy
// file naming an unknown rule or holding one that does not parse, and says
// which.
func TestBadPolicyFileStopsStartUp(t *testing.T) {
	for body, want := range map[string]string{
		`"baremetal:node:gett": "role:admin"`:   "baremetal:node:gett: unknown rule name",
		`"baremetal:node:get": "role:admin or"`: "rule baremetal:node:get",
	} {
		p := writeFile(t, "policy.yaml", body+"\n")
		err := Serve([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--conductor-name", "c", "--policy-file", p}, "test")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
