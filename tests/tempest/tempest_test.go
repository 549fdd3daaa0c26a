// Package tempest runs the stock ironic-tempest-plugin API suite (Debian's
// python3-tempest and ironic-tempest-plugin) against castiron, with the
// Keystone stub of tests/keystone as the identity service and its guard in
// front of castiron, so that every request tempest makes carries a token
// the stub issued.
package tempest

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/tests/castironserve"
	"castiron/tests/keystone"
)

// ironic21Passed is what Ironic 21.4 passes of this suite on this kind of
// machine at the default settings (0 failures, the 3 TestNodesVif tests
// skipped); castiron must pass at least as many.
const ironic21Passed = 232

// concurrency is tempest's worker count: the tests wait on HTTP far more
// than they compute, so four workers on two cores finish sooner than two.
const concurrency = 4

// allowedSkips are the only reasons a test may be skipped: tempest has no
// Neutron here (the VIF tests need its ports), and a run capped below a
// test's microversion leaves it out.
var allowedSkips = []*regexp.Regexp{
	regexp.MustCompile(`^Neutron is not enabled\.$`),
	regexp.MustCompile(`^The microversion range\[[0-9.]+ - [0-9a-z.]+\] of this test is out of the configuration range\[1\.1 - 1\.[0-9]+\]\.$`),
}

// TestIronicTempestAPI runs `^ironic_tempest_plugin.tests.api` three times:
// [baremetal] min_microversion 1.1 with max_microversion latest, capped at
// 1.78 (what python-ironicclient negotiates) and capped at 1.38. Each run
// must have no failure and only the allowed skips; the uncapped one must
// pass at least as many tests as Ironic 21.4.
func TestIronicTempestAPI(t *testing.T) {
	tempest, err := exec.LookPath("tempest")
	if err == nil {
		err = exec.Command("/usr/bin/python3", "-c", "import ironic_tempest_plugin").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tempest or ironic-tempest-plugin missing (CI=true, so this is a failure): apt-get install python3-tempest ironic-tempest-plugin: %v", err)
		}
		t.Skipf("tempest or ironic-tempest-plugin missing; apt-get install -y python3-tempest ironic-tempest-plugin (or run `make test` as root): %v", err)
	}
	if testing.Short() {
		t.Skip("-short: the tempest runs take minutes")
	}
	dir := t.TempDir()
	bin := castironserve.Build(t, dir)
	listed := 0 // the regex's tests, listed once (the same for every run)

	for _, run := range []struct{ name, max string }{
		{"latest", "latest"}, {"1.78", "1.78"}, {"1.38", "1.38"},
	} {
		t.Run("max_microversion="+run.name, func(t *testing.T) {
			rdir := filepath.Join(dir, run.name)
			if err := os.MkdirAll(rdir, 0o755); err != nil {
				t.Fatal(err)
			}
			srv := castironserve.Start(t, bin, filepath.Join(rdir, "data"), filepath.Join(rdir, "castiron.log"),
				"--conductor-name", "tempest-conductor")
			ks := keystone.Start(t, keystone.Config{})
			target, err := url.Parse(srv.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			guard, _ := ks.StartGuard(t, httputil.NewSingleHostReverseProxy(target))
			accounts := addAccounts(ks, 2*concurrency+2)
			conf := writeConfig(t, rdir, ks.URL(), accounts, run.max, false)

			res := runTempest(t, tempest, rdir, conf, regex, nil, listed == 0)
			if listed == 0 {
				listed = res.listed
			}
			res.listed = listed
			t.Logf("max_microversion=%s: %d passed, %d failed, %d skip entries (%d tests not run) in %s; castiron saw %d token-checked requests, %d refused",
				run.max, res.passed, res.failed, len(res.skips), res.listed-res.passed-res.failed, res.took.Round(time.Second),
				len(guard.Passed()), guard.Denied())
			for _, s := range res.skips {
				t.Logf("skipped: %s: %s", s.name, s.reason)
			}
			if res.failed > 0 || res.passed == 0 {
				t.Errorf("tempest: %d failed, %d passed; failures:\n%s", res.failed, res.passed, strings.Join(res.failures, "\n"))
				t.Logf("tempest output (end):\n%s", tail(res.output, 60000))
			}
			for _, s := range res.skips {
				if !allowedReason(s.reason) {
					t.Errorf("unexpected skip %s: %s", s.name, s.reason)
				}
			}
			if run.max == "latest" && res.passed < ironic21Passed {
				t.Errorf("%d tests passed, Ironic 21.4 passes %d", res.passed, ironic21Passed)
			}
			if guard.Denied() > 0 {
				t.Errorf("the guard refused %d requests without a valid token", guard.Denied())
			}
		})
	}
}

func allowedReason(reason string) bool {
	for _, re := range allowedSkips {
		if re.MatchString(reason) {
			return true
		}
	}
	return false
}

// account is one pre-provisioned tempest credential.
type account struct {
	user, password, project string // project "" = system scope
	// roles are what the accounts file says (tempest picks an account by
	// them); none means [admin].
	roles []string
}

// addAccounts makes n project admins and n system admins in the stub:
// tempest holds one of each per test class while it runs
// (BaseBaremetalTest's credentials are admin and system_admin), and its
// "admin" may take a system account too, so n must cover both per worker.
func addAccounts(ks *keystone.Server, n int) []account {
	roles := []string{"admin", "member", "reader"}
	var out []account
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("tempest-admin-%d", i)
		p := ks.AddProject(keystone.Project{Name: name})
		ks.AddUser(keystone.User{Name: name, Password: "pw-" + name, DefaultProjectID: p.ID, ProjectRoles: map[string][]string{p.ID: roles}})
		out = append(out, account{user: name, password: "pw-" + name, project: name})
		sys := fmt.Sprintf("tempest-system-%d", i)
		ks.AddUser(keystone.User{Name: sys, Password: "pw-" + sys, SystemRoles: roles})
		out = append(out, account{user: sys, password: "pw-" + sys})
	}
	return out
}

// writeConfig writes tempest.conf and the accounts file into dir and
// returns the config's path. enforceScope is [enforce_scope] ironic: the
// plugin's RBAC tests run only with it.
func writeConfig(t *testing.T, dir, identity string, accounts []account, maxVersion string, enforceScope bool) string {
	t.Helper()
	var acc bytes.Buffer
	for _, a := range accounts {
		roles := a.roles
		if len(roles) == 0 {
			roles = []string{"admin"}
		}
		fmt.Fprintf(&acc, "- username: %s\n  password: %s\n  user_domain_name: Default\n  roles: [%s]\n", a.user, a.password, strings.Join(roles, ", "))
		if a.project != "" {
			fmt.Fprintf(&acc, "  project_name: %s\n  project_domain_name: Default\n", a.project)
		} else {
			acc.WriteString("  system: all\n")
		}
	}
	accPath := filepath.Join(dir, "accounts.yaml")
	conf := fmt.Sprintf(`[DEFAULT]
log_dir = %[1]s
log_file = tempest.log

[oslo_concurrency]
lock_path = %[1]s/lock

[auth]
use_dynamic_credentials = false
test_accounts_file = %[2]s
default_credentials_domain_name = Default
create_isolated_networks = false

[identity]
uri_v3 = %[3]s/v3
auth_version = v3
region = RegionOne

[identity-feature-enabled]
api_v2 = false

[service_available]
ironic = true
nova = false
glance = false
neutron = false
cinder = false
swift = false

[enforce_scope]
ironic = %[5]t

[baremetal]
driver = fake-hardware
min_microversion = 1.1
max_microversion = %[4]s
`, dir, accPath, identity, maxVersion, enforceScope)
	confPath := filepath.Join(dir, "tempest.conf")
	for path, body := range map[string][]byte{accPath: acc.Bytes(), confPath: []byte(conf)} {
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return confPath
}

// result is one tempest run as its output tells it.
type result struct {
	listed, passed, failed int
	skips                  []skip
	failures               []string
	output                 string
	took                   time.Duration
}

type skip struct{ name, reason string }

var (
	listedRE = regexp.MustCompile(`(?m)^ironic_tempest_plugin\.tests\.api\.\S+$`)
	skipRE   = regexp.MustCompile(`(?m)^\{\d+\} (.+?) \.\.\. SKIPPED: (.*)$`)
	failRE   = regexp.MustCompile(`(?m)^\{\d+\} (.+?) \[[0-9.]+s\] \.\.\. FAILED$`)
	passedRE = regexp.MustCompile(`(?m)^ - Passed: (\d+)$`)
	failedRE = regexp.MustCompile(`(?m)^ - Failed: (\d+)$`)
)

const regex = `^ironic_tempest_plugin.tests.api`

// runTempest runs the tests regex selects in dir (tempest writes its
// .stestr there) with the config and extraEnv, parses the output and, when
// list is set, counts the tests the regex selects.
func runTempest(t *testing.T, tempest, dir, conf, regex string, extraEnv []string, list bool) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "HOME="+dir), extraEnv...)
	var res result
	start := time.Now()
	cmd := exec.CommandContext(ctx, tempest, "run", "--config-file", conf, "--regex", regex, "--concurrency", strconv.Itoa(concurrency))
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	res.took = time.Since(start)
	res.output = string(out)
	for _, m := range skipRE.FindAllStringSubmatch(res.output, -1) {
		res.skips = append(res.skips, skip{m[1], m[2]})
	}
	for _, m := range failRE.FindAllStringSubmatch(res.output, -1) {
		res.failures = append(res.failures, m[1])
	}
	if m := passedRE.FindStringSubmatch(res.output); m != nil {
		res.passed, _ = strconv.Atoi(m[1])
	}
	if m := failedRE.FindStringSubmatch(res.output); m != nil {
		res.failed, _ = strconv.Atoi(m[1])
	}
	if err != nil && res.failed == 0 {
		t.Errorf("tempest run: %v (no failure counted)\n%s", err, tail(res.output, 20000))
	}
	if !list {
		return res
	}
	// The listing needs the stestr repository the run made.
	lister := exec.CommandContext(ctx, tempest, "run", "--config-file", conf, "--regex", regex, "--list-tests")
	lister.Dir, lister.Env = dir, env
	if out, err = lister.CombinedOutput(); err != nil {
		t.Errorf("tempest run --list-tests: %v\n%s", err, tail(string(out), 20000))
	}
	res.listed = len(listedRE.FindAllString(string(out), -1))
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
}
