package cli

// TestOpenstackCLIKeystone runs the stock openstack CLI against a real
// castiron process behind Keystone: the stub identity service of
// tests/keystone issues the tokens, its catalog leads the client to a
// token-checking guard (keystonemiddleware's job) in front of castiron.
// This is how tempest and operators with a Keystone reach castiron.

import (
	"encoding/json"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"castiron/tests/keystone"
)

func TestOpenstackCLIKeystone(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("openstack CLI not found (CI=true, so this is a failure): install python3-openstackclient python3-ironicclient")
		}
		t.Skip("openstack CLI not found; apt-get install -y python3-openstackclient python3-ironicclient")
	}
	dir := t.TempDir()
	srv := cliStart(t, cliBuild(t, dir), filepath.Join(dir, "data"), filepath.Join(dir, "castiron.log"))
	target, err := url.Parse(srv.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystone.Start(t, keystone.Config{})
	admin := ks.AddAdmin("s3cret")
	cred := ks.AddAppCredential(keystone.AppCredential{Name: "cli", Secret: "cli-secret", UserID: admin.User.ID, ProjectID: admin.Project.ID})
	guard, _ := ks.StartGuard(t, httputil.NewSingleHostReverseProxy(target))

	password := []string{"--os-auth-url", ks.URL(), "--os-identity-api-version", "3", "--os-username", "admin",
		"--os-password", "s3cret", "--os-project-name", "admin", "--os-user-domain-name", "Default",
		"--os-project-domain-name", "Default", "--os-region-name", "RegionOne", "--os-interface", "internal"}
	run := func(env []string, args ...string) (string, string, error) {
		t.Helper()
		cmd := exec.Command(osc, args...)
		cmd.Env = env
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	mustJSON := func(env []string, v any, args ...string) {
		t.Helper()
		out, stderr, err := run(env, args...)
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
		}
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("openstack %s: %v: %q", strings.Join(args, " "), err, out)
		}
	}
	env := cliEnv(dir)

	// token issue: a project-scoped token the stub accepts.
	var tok map[string]string
	mustJSON(env, &tok, append(password, "token", "issue", "-f", "json")...)
	if info, ok := ks.Validate(tok["id"]); !ok || tok["project_id"] != admin.Project.ID || tok["user_id"] != admin.User.ID || info.ProjectName != "admin" {
		t.Fatalf("token issue: %v (stub: %+v %v)", tok, info, ok)
	}

	// baremetal through the catalog (no --os-endpoint): create, then list.
	var node map[string]any
	mustJSON(env, &node, append(password, "baremetal", "node", "create", "--driver", "fake-hardware", "--name", "ks-node", "-f", "json")...)
	var list []map[string]any
	mustJSON(env, &list, append(password, "baremetal", "node", "list", "-f", "json")...)
	if len(list) != 1 || list[0]["Name"] != "ks-node" || list[0]["UUID"] != node["uuid"] {
		t.Fatalf("node list: %v", list)
	}

	// OS_* environment, then clouds.yaml with an application credential.
	osEnv := append(cliEnv(dir), "OS_AUTH_URL="+ks.URL()+"/v3", "OS_IDENTITY_API_VERSION=3", "OS_USERNAME=admin",
		"OS_PASSWORD=s3cret", "OS_PROJECT_NAME=admin", "OS_USER_DOMAIN_NAME=Default", "OS_PROJECT_DOMAIN_NAME=Default")
	var shown map[string]any
	mustJSON(osEnv, &shown, "baremetal", "node", "show", "ks-node", "-f", "json")
	if shown["uuid"] != node["uuid"] {
		t.Fatalf("node show: %v", shown)
	}
	clouds := filepath.Join(dir, "clouds.yaml")
	yaml := "clouds:\n  ks:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: " + ks.URL() +
		"\n      application_credential_id: " + cred.ID + "\n      application_credential_secret: cli-secret\n    region_name: RegionOne\n    interface: admin\n"
	if err := os.WriteFile(clouds, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	mustJSON(append(cliEnv(dir), "OS_CLIENT_CONFIG_FILE="+clouds, "OS_CLOUD=ks"), &list, "baremetal", "node", "list", "-f", "json")
	if len(list) != 1 || list[0]["Name"] != "ks-node" {
		t.Fatalf("node list with an application credential: %v", list)
	}

	// A wrong password: Keystone's 401 reaches the operator, nothing reaches castiron.
	before := len(guard.Passed())
	bad := slices.Clone(password)
	bad[slices.Index(bad, "s3cret")] = "wrong"
	out, stderr, err := run(env, append(bad, "baremetal", "node", "list")...)
	if err == nil || !strings.Contains(stderr, "The request you have made requires authentication") {
		t.Errorf("wrong password: err %v\n%s\n%s", err, out, stderr)
	}
	if n := len(guard.Passed()); n != before {
		t.Errorf("%d requests reached castiron with a wrong password", n-before)
	}

	// Every /v1 call reached castiron through the guard with a stub token,
	// the application credential's too.
	var posted, viaAppCred bool
	for _, p := range guard.Passed() {
		if p.Token.UserName != "admin" || p.Token.ProjectID != admin.Project.ID {
			t.Errorf("request with an unexpected identity: %+v", p)
		}
		posted = posted || (p.Method == "POST" && p.Path == "/v1/nodes")
		viaAppCred = viaAppCred || (p.Token.AppCredentialID == cred.ID && strings.HasPrefix(p.Path, "/v1/nodes"))
	}
	if !posted || !viaAppCred || guard.Denied() != 0 {
		t.Errorf("guard: %s; POST /v1/nodes seen %v, application credential seen %v", guard, posted, viaAppCred)
	}
}
