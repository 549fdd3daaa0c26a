package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi"
	"castiron/tests/keystone"
)

// cloudLab is a castiron behind the stub Keystone: the catalog's baremetal
// endpoint is a guard that lets only requests with a stub token through.
type cloudLab struct {
	s      *server
	ks     *keystone.Server
	guard  *keystone.Guard
	gurl   string
	admin  keystone.Admin
	demo   keystone.User
	demoP  keystone.Project // demo's default project
	otherP keystone.Project // a second project demo is a member of
	cred   keystone.AppCredential
	dir    string // dir/wd is the working directory, dir/xdg the XDG config home
}

func newCloudLab(t *testing.T) *cloudLab {
	s := newServer(t)
	target, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystone.Start(t, keystone.Config{})
	l := labDirs(t)
	l.s, l.ks, l.admin = s, ks, ks.AddAdmin("s3cret")
	l.demoP = ks.AddProject(keystone.Project{Name: "demo"})
	l.otherP = ks.AddProject(keystone.Project{Name: "other"})
	l.demo = ks.AddUser(keystone.User{Name: "demo", Password: "demo-pass", DefaultProjectID: l.demoP.ID,
		ProjectRoles: map[string][]string{l.demoP.ID: {"member", "reader"}, l.otherP.ID: {"member"}}})
	l.cred = ks.AddAppCredential(keystone.AppCredential{Name: "ci", Secret: "ci-secret", UserID: l.demo.ID, ProjectID: l.otherP.ID})
	l.guard, l.gurl = ks.StartGuard(t, httputil.NewSingleHostReverseProxy(target))
	return l
}

// labDirs is a lab with only its directories: wd (the working directory),
// xdg (XDG_CONFIG_HOME) and home (HOME).
func labDirs(t *testing.T) *cloudLab {
	l := &cloudLab{dir: t.TempDir()}
	for _, d := range []string{"wd", "xdg", "home"} {
		if err := os.MkdirAll(filepath.Join(l.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// env puts the test in a clean environment (no OS_*/CASTIRON_* of the
// caller, private HOME and XDG_CONFIG_HOME, the lab's working directory)
// plus the given variables; it returns the same as a list for a process.
func (l *cloudLab) env(t *testing.T, vars map[string]string) []string {
	t.Helper()
	var list []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OS_") || strings.HasPrefix(k, "CASTIRON_") {
			t.Setenv(k, "")
			continue
		}
		if k != "HOME" && k != "XDG_CONFIG_HOME" {
			list = append(list, kv)
		}
	}
	vars["HOME"], vars["XDG_CONFIG_HOME"] = filepath.Join(l.dir, "home"), filepath.Join(l.dir, "xdg")
	for k, v := range vars {
		t.Setenv(k, v)
		list = append(list, k+"="+v)
	}
	t.Chdir(filepath.Join(l.dir, "wd"))
	return append(list, "PYTHONDONTWRITEBYTECODE=1")
}

// run runs a client command in-process in the current environment.
func (l *cloudLab) run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := Run(ctx, args[0], args[1:], &out, &errb, false)
	return code, out.String(), errb.String()
}

// identities lists who the guard let through since mark: "user/project"
// (plus "+appcred" for an application credential token), once each.
func (l *cloudLab) identities(mark int) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range l.guard.Passed()[mark:] {
		id := p.Token.UserName + "/" + p.Token.ProjectName
		if p.Token.AppCredentialID != "" {
			id += "+appcred"
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// TestCommandsBehindKeystone runs the client commands with Keystone
// credentials from the environment, from flags and from clouds.yaml: every
// request reaches castiron through the guard with a token the stub issued,
// a wrong password stops the command before anything is sent, and a
// client that sends no token is refused.
func TestCommandsBehindKeystone(t *testing.T) {
	l := newCloudLab(t)
	openrc := map[string]string{"OS_AUTH_URL": l.ks.URL() + "/v3", "OS_USERNAME": "admin", "OS_PASSWORD": "s3cret",
		"OS_PROJECT_NAME": "admin", "OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default"}
	l.env(t, openrc)
	file := writeFile(t, "rack.json", fakeRack("ks", 3))
	mark := len(l.guard.Passed())
	code, out, errs := l.run("import", file, "--provide")
	if code != 0 {
		t.Fatalf("import with OS_* credentials: exit %d\n%s\n%s", code, out, errs)
	}
	mustContain(t, "import", out, "3 succeeded, 0 failed")
	var posted, provided bool
	for _, p := range l.guard.Passed()[mark:] {
		posted = posted || (p.Method == "POST" && p.Path == "/v1/nodes")
		provided = provided || (p.Method == "PUT" && strings.HasSuffix(p.Path, "/states/provision"))
	}
	if ids := l.identities(mark); !posted || !provided || len(ids) != 1 || ids[0] != "admin/admin" || l.guard.Denied() != 0 {
		t.Errorf("guard: %s, identities %v, POST seen %v, provide seen %v", l.guard, ids, posted, provided)
	}
	for _, n := range l.s.nodes() {
		if n.ProvisionState != "available" {
			t.Errorf("%s: %s", n.Name, n.ProvisionState)
		}
	}

	// A wrong password: a clear error naming Keystone's answer, exit 1,
	// nothing reaches castiron.
	mark = len(l.guard.Passed())
	openrc["OS_PASSWORD"] = "wrong"
	l.env(t, openrc)
	code, out, errs = l.run("node", "list")
	if code != 1 || !strings.Contains(errs, "authentication at "+l.ks.URL()+"/v3 failed") ||
		!strings.Contains(errs, "401 Unauthorized: The request you have made requires authentication.") || strings.Contains(errs, "wrong") {
		t.Errorf("wrong password: exit %d\n%s\n%s", code, out, errs)
	}
	// ... and the right one on the command line wins over the environment.
	code, out, errs = l.run("node", "show", "ks-001", "--os-password", "s3cret", "-o", "json")
	if code != 0 || !strings.Contains(out, `"name": "ks-001"`) {
		t.Errorf("--os-password over OS_PASSWORD: exit %d\n%s\n%s", code, out, errs)
	}

	// clouds.yaml with an application credential (demo's, on project other).
	clouds := "clouds:\n  lab:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: " + l.ks.URL() +
		"\n      application_credential_id: " + l.cred.ID + "\n      application_credential_secret: ci-secret\n    region_name: RegionOne\n    interface: internal\n"
	writeCloud(t, filepath.Join(l.dir, "xdg", "openstack", "clouds.yaml"), clouds)
	l.env(t, map[string]string{"OS_CLOUD": "lab"})
	mark = len(l.guard.Passed())
	code, out, errs = l.run("conductor", "list")
	if code != 0 || !strings.Contains(out, "test-conductor") {
		t.Fatalf("conductor list with an application credential: exit %d\n%s\n%s", code, out, errs)
	}
	if ids := l.identities(mark); len(ids) != 1 || ids[0] != "demo/other+appcred" {
		t.Errorf("identities %v", ids)
	}

	// A client that ignores Keystone gets nothing past the guard.
	mark = len(l.guard.Passed())
	l.env(t, map[string]string{})
	code, _, errs = l.run("node", "list", "--os-auth-type", "none", "--url", l.gurl)
	if code != 1 || !strings.Contains(errs, "requires authentication") || len(l.guard.Passed()) != mark {
		t.Errorf("no token: exit %d %s", code, errs)
	}
}

func writeCloud(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuthPrecedenceAsOpenstackCLI gives the openstack CLI and castiron the
// same clouds.yaml, environment and options and checks that both succeed or
// fail alike and reach castiron as the same user, project and kind of
// credential. Skipped without the openstack CLI unless CI=true.
func TestAuthPrecedenceAsOpenstackCLI(t *testing.T) {
	osc := openstackCLI(t)
	l := newCloudLab(t)
	if _, err := l.s.client().CreateNode(context.Background(), map[string]any{"driver": "fake-hardware", "name": "seen"}); err != nil {
		t.Fatal(err)
	}
	ksURL := l.ks.URL()
	cloud := func(name, extra string) string {
		return "  " + name + ":\n    region_name: RegionOne\n    auth:\n      auth_url: " + ksURL + "\n      username: demo\n      user_domain_name: Default\n      project_domain_name: Default\n" + extra
	}
	clouds := "clouds:\n" +
		cloud("good", "      password: demo-pass\n      project_name: demo\n") +
		cloud("nopass", "      project_name: demo\n") +
		cloud("wrongpass", "      password: wrong\n      project_name: demo\n") +
		cloud("byid", "      password: demo-pass\n      project_id: "+l.demoP.ID+"\n") +
		cloud("noproject", "      password: demo-pass\n") +
		"  appcred:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: " + ksURL +
		"\n      application_credential_id: " + l.cred.ID + "\n      application_credential_secret: ci-secret\n"
	openrc := map[string]string{"OS_AUTH_URL": ksURL, "OS_USERNAME": "demo", "OS_PASSWORD": "demo-pass", "OS_PROJECT_NAME": "demo",
		"OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		where string // clouds.yaml location: "wd" (./clouds.yaml) or "xdg"
		env   map[string]string
		args  []string
		want  string // identity both must show, "" when both must fail
	}{
		{"openrc", "", openrc, nil, "demo/demo"},
		// The openstack CLI fills in the default domain only for identity v3;
		// castiron speaks only v3.
		{"openrc without domains (default domain)", "", with(openrc, "OS_USER_DOMAIN_NAME", "", "OS_PROJECT_DOMAIN_NAME", "", "OS_IDENTITY_API_VERSION", "3"), nil, "demo/demo"},
		{"openrc, wrong password", "", with(openrc, "OS_PASSWORD", "wrong"), nil, ""},
		{"flag over environment", "", with(openrc, "OS_PROJECT_NAME", "nope"), []string{"--os-project-name", "other"}, "demo/other"},
		{"clouds.yaml in the working directory", "wd", map[string]string{"OS_CLOUD": "good"}, nil, "demo/demo"},
		{"--os-cloud over OS_CLOUD", "xdg", map[string]string{"OS_CLOUD": "wrongpass"}, []string{"--os-cloud", "good"}, "demo/demo"},
		{"OS_PASSWORD completes the cloud", "xdg", map[string]string{"OS_CLOUD": "nopass", "OS_PASSWORD": "demo-pass"}, nil, "demo/demo"},
		{"OS_PASSWORD over the cloud's", "wd", map[string]string{"OS_CLOUD": "wrongpass", "OS_PASSWORD": "demo-pass"}, nil, "demo/demo"},
		// A project named in the cloud stays, whatever the variables and
		// options say (openstacksdk reads the auth section last for it).
		{"the cloud's project over OS_PROJECT_NAME", "wd", map[string]string{"OS_CLOUD": "good", "OS_PROJECT_NAME": "other"}, nil, "demo/demo"},
		{"the cloud's project over --os-project-name", "xdg", map[string]string{"OS_CLOUD": "good"}, []string{"--os-project-name", "other"}, "demo/demo"},
		{"--os-project-name for a cloud without a project", "xdg", map[string]string{"OS_CLOUD": "noproject"}, []string{"--os-project-name", "other"}, "demo/other"},
		{"the cloud's project id and OS_PROJECT_NAME", "wd", map[string]string{"OS_CLOUD": "byid", "OS_PROJECT_NAME": "other"}, nil, "demo/demo"},
		{"OS_REGION_NAME over the cloud's", "wd", map[string]string{"OS_CLOUD": "good", "OS_REGION_NAME": "RegionTwo"}, nil, ""},
		{"application credential cloud", "xdg", map[string]string{"OS_CLOUD": "appcred"}, nil, "demo/other+appcred"},
		{"application credential from the environment", "", map[string]string{"OS_AUTH_URL": ksURL, "OS_AUTH_TYPE": "v3applicationcredential",
			"OS_APPLICATION_CREDENTIAL_ID": l.cred.ID, "OS_APPLICATION_CREDENTIAL_SECRET": "ci-secret"}, nil, "demo/other+appcred"},
		{"OS_USERNAME and OS_PASSWORD over the cloud's", "wd", map[string]string{"OS_CLOUD": "noproject", "OS_USERNAME": "admin",
			"OS_PASSWORD": "s3cret", "OS_PROJECT_NAME": "admin"}, nil, "admin/admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, d := range []string{"wd", "xdg/openstack"} {
				os.Remove(filepath.Join(l.dir, d, "clouds.yaml"))
			}
			switch tc.where {
			case "wd":
				writeCloud(t, filepath.Join(l.dir, "wd", "clouds.yaml"), clouds)
			case "xdg":
				writeCloud(t, filepath.Join(l.dir, "xdg", "openstack", "clouds.yaml"), clouds)
			}
			procEnv := l.env(t, with(tc.env))

			mark := len(l.guard.Passed())
			cmd := exec.Command(osc, append(append([]string{}, tc.args...), "baremetal", "node", "list", "-f", "json")...)
			cmd.Env, cmd.Dir = procEnv, filepath.Join(l.dir, "wd")
			var oscOut, oscErr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &oscOut, &oscErr
			oscRun := cmd.Run()
			oscIDs := l.identities(mark)

			mark = len(l.guard.Passed())
			code, out, errs := l.run(append([]string{"node", "list", "-o", "json"}, tc.args...)...)
			ourIDs := l.identities(mark)

			if (oscRun == nil) != (tc.want != "") || (code == 0) != (tc.want != "") {
				t.Fatalf("want success %v: openstack %v, castiron exit %d\nopenstack: %s%s\ncastiron: %s%s",
					tc.want != "", oscRun, code, oscOut.String(), lastLines(oscErr.String(), 12), out, errs)
			}
			if tc.want == "" {
				return
			}
			if strings.Join(oscIDs, ",") != tc.want || strings.Join(ourIDs, ",") != tc.want {
				t.Errorf("identity: openstack %v, castiron %v, want %s", oscIDs, ourIDs, tc.want)
			}
			var nodes []map[string]any
			if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes) != 1 || nodes[0]["name"] != "seen" {
				t.Errorf("castiron node list: %v %s", err, out)
			}
		})
	}
}

// openstackCLI is the openstack binary; the test is skipped without it,
// except under CI=true where that is a failure.
func openstackCLI(t *testing.T) string {
	t.Helper()
	osc, err := exec.LookPath("openstack")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openstack CLI not found (CI=true, so this is a failure): install python3-openstackclient python3-ironicclient")
		}
		t.Skip("openstack CLI not found: apt-get install python3-openstackclient python3-ironicclient")
	}
	return osc
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestCommandsOverTLS: Keystone and the guard speak HTTPS with a
// certificate the system does not trust; OS_CACERT or --os-cacert makes
// the client trust it, OS_INSECURE skips the check, neither fails.
func TestCommandsOverTLS(t *testing.T) {
	s := newServer(t)
	target, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystone.New(keystone.Config{})
	ksSrv := httptest.NewTLSServer(ks)
	defer ksSrv.Close()
	ks.SetURL(ksSrv.URL)
	ks.AddAdmin("s3cret")
	guard := ks.Guard(httputil.NewSingleHostReverseProxy(target))
	gSrv := httptest.NewTLSServer(guard)
	defer gSrv.Close()
	ks.SetEndpoint("baremetal", gSrv.URL)

	l := labDirs(t)
	ca := filepath.Join(l.dir, "ca.pem")
	// httptest's TLS servers share one self-signed certificate.
	writeCloud(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ksSrv.Certificate().Raw})))
	openrc := func(kv ...string) map[string]string {
		m := map[string]string{"OS_AUTH_URL": ksSrv.URL, "OS_USERNAME": "admin", "OS_PASSWORD": "s3cret", "OS_PROJECT_NAME": "admin"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	l.env(t, openrc())
	if code, _, errs := l.run("node", "list"); code != 1 || !strings.Contains(errs, "certificate") {
		t.Errorf("untrusted certificate: exit %d %s", code, errs)
	}
	l.env(t, openrc("OS_CACERT", ca))
	if code, out, errs := l.run("node", "list"); code != 0 {
		t.Errorf("OS_CACERT: exit %d\n%s\n%s", code, out, errs)
	}
	l.env(t, openrc())
	if code, out, errs := l.run("node", "list", "--os-cacert", ca); code != 0 {
		t.Errorf("--os-cacert: exit %d\n%s\n%s", code, out, errs)
	}
	l.env(t, openrc("OS_INSECURE", "true"))
	if code, out, errs := l.run("conductor", "list"); code != 0 || !strings.Contains(out, "test-conductor") {
		t.Errorf("OS_INSECURE: exit %d\n%s\n%s", code, out, errs)
	}
	if n := len(guard.Passed()); n < 3 {
		t.Errorf("%d requests through the guard, want at least 3", n)
	}
}

// TestHTTPBasicAsOpenstackCLI: http_basic from OS_* variables (as for
// `openstack --os-auth-type http_basic`) and from a bifrost-style
// clouds.yaml entry, against a castiron with an htpasswd file.
func TestHTTPBasicAsOpenstackCLI(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	auth, err := httpapi.LoadHTPasswd(writeFile(t, "htpasswd", "operator:"+string(hash)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *httpapi.Options) { o.Auth = auth })
	l := labDirs(t)
	writeCloud(t, filepath.Join(l.dir, "wd", "clouds.yaml"), "clouds:\n  bifrost:\n    auth_type: http_basic\n    auth:\n      username: operator\n      password: s3cret\n    baremetal_endpoint_override: "+s.url+"\n")
	for _, tc := range []struct {
		env  map[string]string
		code int
	}{
		{map[string]string{"OS_AUTH_TYPE": "http_basic", "OS_ENDPOINT": s.url, "OS_USERNAME": "operator", "OS_PASSWORD": "s3cret"}, 0},
		{map[string]string{"OS_AUTH_TYPE": "http_basic", "OS_ENDPOINT": s.url, "OS_USERNAME": "operator", "OS_PASSWORD": "wrong"}, 1},
		{map[string]string{"OS_ENDPOINT": s.url}, 1}, // noauth: refused
		{map[string]string{"OS_CLOUD": "bifrost"}, 0},
		{map[string]string{"OS_CLOUD": "bifrost", "OS_PASSWORD": "wrong"}, 1},
	} {
		l.env(t, tc.env)
		if code, out, errs := l.run("conductor", "list"); code != tc.code || (code == 0) != strings.Contains(out, "test-conductor") {
			t.Errorf("%v: exit %d, want %d\n%s\n%s", tc.env, code, tc.code, out, errs)
		}
	}
}
