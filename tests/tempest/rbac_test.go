package tempest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/tests/castironserve"
	"castiron/tests/keystone"
)

// rbacPassed is what the plugin's rbac_defaults tests need to pass: Ironic
// 21.4 with RBAC enforced passes 92 of them (the 2 runbook tests skip there,
// below 1.92).
const rbacPassed = 92

// rbacRegex selects ironic-tempest-plugin's secure-RBAC default tests
// (tests/api/rbac_defaults: project and system readers on nodes, runbook
// ownership); they run only with [enforce_scope] ironic = true.
const rbacRegex = `^ironic_tempest_plugin.tests.api.rbac_defaults`

// pluginDirEnv names a source checkout of ironic-tempest-plugin whose
// rbac_defaults tests are run instead of the installed plugin's: Debian's
// 2.5.0 has none (they came later; 3.1.0 has 94).
const pluginDirEnv = "IRONIC_TEMPEST_PLUGIN_DIR"

// compatShim is a sitecustomize.py for running a newer plugin under
// Debian's tempest 33: the two names the plugin 3.x imports that tempest
// 33 lacks, defined at run time only (nothing of the plugin is copied).
const compatShim = `try:
    from tempest.lib import exceptions as _exc
    if not hasattr(_exc, 'NotAcceptable'):
        class NotAcceptable(_exc.ClientRestClientException):
            status_code = 406
            message = "Not Acceptable"
        _exc.NotAcceptable = NotAcceptable
    from tempest.common import compute as _compute
    if not hasattr(_compute, 'NoVNCValidateMixin'):
        class NoVNCValidateMixin(object):
            pass
        _compute.NoVNCValidateMixin = NoVNCValidateMixin
except ImportError:
    pass
`

// rbacPlugin finds the rbac_defaults tests: in $IRONIC_TEMPEST_PLUGIN_DIR
// (a source tree; the environment then puts it first on PYTHONPATH with an
// entry point tempest discovers it by), else in the installed plugin. It
// skips the test, saying why, when neither has them.
func rbacPlugin(t *testing.T, dir string) (env []string, what string) {
	t.Helper()
	if src := os.Getenv(pluginDirEnv); src != "" {
		if _, err := os.Stat(filepath.Join(src, "ironic_tempest_plugin", "tests", "api", "rbac_defaults")); err != nil {
			t.Fatalf("%s=%s: no ironic_tempest_plugin/tests/api/rbac_defaults there: %v", pluginDirEnv, src, err)
		}
		site := filepath.Join(dir, "site")
		info := filepath.Join(site, "ironic_tempest_plugin-0.0.0.dist-info")
		if err := os.MkdirAll(info, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			filepath.Join(info, "METADATA"):         "Metadata-Version: 2.1\nName: ironic-tempest-plugin\nVersion: 0.0.0\n",
			filepath.Join(info, "entry_points.txt"): "[tempest.test_plugins]\nironic_tests = ironic_tempest_plugin.plugin:IronicTempestPlugin\n",
			filepath.Join(site, "sitecustomize.py"): compatShim,
		}
		for p, body := range files {
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return []string{"PYTHONPATH=" + site + ":" + src}, "the source tree " + src
	}
	out, err := exec.Command("/usr/bin/python3", "-c",
		"import os, importlib.metadata as m, ironic_tempest_plugin as p; print(m.version('ironic-tempest-plugin')); print(os.path.dirname(p.__file__))").Output()
	if err != nil {
		t.Fatalf("locate the installed ironic-tempest-plugin: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("locate the installed ironic-tempest-plugin: %q", out)
	}
	if _, err := os.Stat(filepath.Join(lines[1], "tests", "api", "rbac_defaults")); err != nil {
		t.Skipf("the installed ironic-tempest-plugin %s (%s) has no rbac_defaults tests (Debian's 2.5.0 predates them); "+
			"to run them, check out a newer plugin (git clone -b 3.1.0 https://opendev.org/openstack/ironic-tempest-plugin /tmp/itp) "+
			"and set %s=/tmp/itp", lines[0], lines[1], pluginDirEnv)
	}
	return nil, "the installed plugin " + lines[0]
}

// TestIronicTempestRBAC runs ironic-tempest-plugin's rbac_defaults tests
// against castiron on --auth-strategy keystone, with the Keystone stand-in
// of tests/keystone issuing the tokens (system and project scoped) and
// castiron validating them against it with its own service user, as
// keystonemiddleware does. No failure is allowed and at least as many pass
// as on Ironic 21.4.
func TestIronicTempestRBAC(t *testing.T) {
	tempest, err := exec.LookPath("tempest")
	if err == nil {
		err = exec.Command("/usr/bin/python3", "-c", "import ironic_tempest_plugin").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tempest or ironic-tempest-plugin missing (CI=true, so this is a failure): apt-get install python3-tempest ironic-tempest-plugin: %v", err)
		}
		t.Skipf("tempest or ironic-tempest-plugin missing; apt-get install -y python3-tempest ironic-tempest-plugin: %v", err)
	}
	dir := t.TempDir()
	env, what := rbacPlugin(t, dir)
	if testing.Short() {
		t.Skip("-short: the tempest run takes a minute")
	}
	bin := castironserve.Build(t, dir)

	ks := keystone.Start(t, keystone.Config{})
	svc := ks.AddProject(keystone.Project{Name: "service"})
	ks.AddUser(keystone.User{Name: "castiron", Password: "svc-pw", DefaultProjectID: svc.ID,
		ProjectRoles: map[string][]string{svc.ID: {"service"}}})
	srv := castironserve.Start(t, bin, filepath.Join(dir, "data"), filepath.Join(dir, "castiron.log"),
		"--conductor-name", "tempest-conductor", "--auth-strategy", "keystone",
		"--keystone-auth-url", ks.URL(), "--keystone-username", "castiron", "--keystone-password", "svc-pw",
		"--keystone-project-name", "service")
	ks.SetEndpoint("baremetal", srv.Endpoint)

	conf := writeConfig(t, dir, ks.URL(), rbacAccounts(ks, 2*concurrency), "latest", true)
	res := runTempest(t, tempest, dir, conf, rbacRegex, env, false)
	t.Logf("rbac_defaults (%s): %d passed, %d failed, %d skipped in %s",
		what, res.passed, res.failed, len(res.skips), res.took.Round(time.Second))
	for _, s := range res.skips {
		t.Logf("skipped: %s: %s", s.name, s.reason)
		if !allowedReason(s.reason) {
			t.Errorf("unexpected skip %s: %s", s.name, s.reason)
		}
	}
	if res.failed > 0 || res.passed < rbacPassed {
		t.Errorf("tempest rbac_defaults: %d failed, %d passed (Ironic 21.4: 0 failed, %d passed); failures:\n%s",
			res.failed, res.passed, rbacPassed, strings.Join(res.failures, "\n"))
		t.Logf("tempest output (end):\n%s", tail(res.output, 60000))
	}
}

// rbacAccounts makes the personas the rbac_defaults classes ask for, n of
// each (tempest holds a class's accounts to the end of the run): system
// admins and readers, project readers each in a project of its own (a
// reader of another project), and one project admin with one project
// member sharing a project (the runbook class expects the member to see
// the runbooks its admin made).
func rbacAccounts(ks *keystone.Server, n int) []account {
	var out []account
	for i := 1; i <= n; i++ {
		sa := fmt.Sprintf("rbac-system-admin-%d", i)
		ks.AddUser(keystone.User{Name: sa, Password: "pw-" + sa, SystemRoles: []string{"admin"}})
		out = append(out, account{user: sa, password: "pw-" + sa, roles: []string{"admin"}})
		sr := fmt.Sprintf("rbac-system-reader-%d", i)
		ks.AddUser(keystone.User{Name: sr, Password: "pw-" + sr, SystemRoles: []string{"reader"}})
		out = append(out, account{user: sr, password: "pw-" + sr, roles: []string{"reader"}})
		pr := fmt.Sprintf("rbac-project-reader-%d", i)
		p := ks.AddProject(keystone.Project{Name: pr})
		ks.AddUser(keystone.User{Name: pr, Password: "pw-" + pr, DefaultProjectID: p.ID, ProjectRoles: map[string][]string{p.ID: {"reader"}}})
		out = append(out, account{user: pr, password: "pw-" + pr, project: pr, roles: []string{"reader"}})
	}
	p := ks.AddProject(keystone.Project{Name: "rbac-owner"})
	for _, role := range []string{"admin", "member"} {
		u := "rbac-owner-" + role
		ks.AddUser(keystone.User{Name: u, Password: "pw-" + u, DefaultProjectID: p.ID, ProjectRoles: map[string][]string{p.ID: {role}}})
		out = append(out, account{user: u, password: "pw-" + u, project: p.Name, roles: []string{role}})
	}
	return out
}
