package appliance

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestConfigPrecedence: flag > environment > file > default, for strings,
// booleans, durations and choices, with the file named by --config or by
// CASTIRON_CONFIG.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "castiron.yaml", `
# comment
listen: 127.0.0.1:7001
data-dir: /from/file
automated-clean: false
callback-timeout: 5m
dhcp-mode: proxy
log-level: warn
`)
	type want struct {
		listen, dataDir, dhcpMode, logLevel string
		automatedClean                      bool
		callbackTimeout                     time.Duration
	}
	defaults := want{"127.0.0.1:6385", "./castiron-data", "full", "info", true, 30 * time.Minute}
	fromFile := want{"127.0.0.1:7001", "/from/file", "proxy", "warn", false, 5 * time.Minute}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want want
	}{
		{"defaults", nil, nil, defaults},
		{"file by flag", []string{"--config", file}, nil, fromFile},
		{"file by environment", nil, map[string]string{"CASTIRON_CONFIG": file}, fromFile},
		{"--config beats CASTIRON_CONFIG", []string{"--config", file},
			map[string]string{"CASTIRON_CONFIG": "/nonexistent.yaml"}, fromFile},
		{"environment beats file", []string{"--config", file}, map[string]string{
			"CASTIRON_LISTEN": "127.0.0.1:7002", "CASTIRON_AUTOMATED_CLEAN": "true",
			"CASTIRON_CALLBACK_TIMEOUT": "1h", "CASTIRON_DHCP_MODE": "full",
		}, want{"127.0.0.1:7002", "/from/file", "full", "warn", true, time.Hour}},
		{"flag beats environment and file", []string{"--config", file, "--listen", "127.0.0.1:7003",
			"--automated-clean=false", "--callback-timeout", "2s", "--log-level", "debug"},
			map[string]string{"CASTIRON_LISTEN": "127.0.0.1:7002", "CASTIRON_AUTOMATED_CLEAN": "true",
				"CASTIRON_CALLBACK_TIMEOUT": "1h", "CASTIRON_LOG_LEVEL": "error"},
			want{"127.0.0.1:7003", "/from/file", "proxy", "debug", false, 2 * time.Second}},
		{"environment without file", nil, map[string]string{"CASTIRON_DATA_DIR": "/from/env"},
			want{"127.0.0.1:6385", "/from/env", "full", "info", true, 30 * time.Minute}},
		{"empty environment value is a value", nil, map[string]string{"CASTIRON_LISTEN": ""},
			want{"", "./castiron-data", "full", "info", true, 30 * time.Minute}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseServeFlags(tc.args, envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got := want{c.listen, c.dataDir, c.pxe.dhcpMode, c.logLevel, c.automatedClean, c.callbackTimeout}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if c.pxe.ramdiskDir != filepath.Join(tc.want.dataDir, "ramdisk") {
				t.Errorf("ramdisk dir %q does not follow data dir %q", c.pxe.ramdiskDir, tc.want.dataDir)
			}
			if c.conductorName == "" {
				t.Error("conductor name empty: want the hostname by default")
			}
		})
	}
}

// TestConfigErrors: every wrong setting stops start-up with a message that
// names it (and, for the file, its line).
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		file string // "" = no --config
		args []string
		env  map[string]string
		want []string
	}{
		{"unknown key", "listen: 127.0.0.1:1\nlistn: x\n", nil, nil,
			[]string{":2: unknown key \"listn\""}},
		{"underscore key", "data_dir: /x\n", nil, nil,
			[]string{":1: unknown key \"data_dir\"", `did you mean "data-dir"?`}},
		{"config key in file", "config: other.yaml\n", nil, nil, []string{`unknown key "config"`}},
		{"bad bool in file", "automated-clean: maybe\n", nil, nil,
			[]string{":1: automated-clean: \"maybe\": want true or false"}},
		{"bad duration in file", "\ncallback-timeout: 1800\n", nil, nil,
			[]string{":2: callback-timeout: \"1800\": want a duration"}},
		{"bad choice in file", "dhcp-mode: half\n", nil, nil,
			[]string{"dhcp-mode: \"half\": want one of full, proxy"}},
		{"list value", "listen: [a, b]\n", nil, nil, []string{":1: listen: want a single value"}},
		{"no value", "listen:\n", nil, nil, []string{":1: listen: no value"}},
		{"repeated key", "listen: a\nlisten: b\n", nil, nil, []string{"listen"}},
		{"not a mapping", "- listen\n", nil, nil, []string{"want a mapping"}},
		{"two documents", "listen: a\n---\nlisten: b\n", nil, nil, []string{"one YAML document only"}},
		{"missing file", "", []string{"--config", "/nonexistent/castiron.yaml"}, nil,
			[]string{"--config", "/nonexistent/castiron.yaml"}},
		{"bad bool in environment", "", nil, map[string]string{"CASTIRON_INSECURE_NOAUTH": "yes please"},
			[]string{`environment CASTIRON_INSECURE_NOAUTH="yes please": want true or false`}},
		{"bad duration in environment", "", nil, map[string]string{"CASTIRON_POWER_SYNC_INTERVAL": "60"},
			[]string{`CASTIRON_POWER_SYNC_INTERVAL="60": want a duration`}},
		{"bad level in environment", "", nil, map[string]string{"CASTIRON_LOG_LEVEL": "loud"},
			[]string{`CASTIRON_LOG_LEVEL="loud": want one of debug, info, warn, error`}},
		{"stray argument", "", []string{"extra"}, nil, []string{`unexpected argument "extra"`}},
		{"bad flag", "", []string{"--automated-clean=maybe"}, nil, []string{"automated-clean"}},
		{"api version above the newest", "", []string{"--max-api-version", "1.999"}, nil, []string{"--max-api-version: API version 1.999 is above the maximum"}},
		{"api version not 1.N", "", nil, map[string]string{"CASTIRON_MAX_API_VERSION": "v2"}, []string{`--max-api-version: API version "v2": want 1.N`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, "c.yaml", tc.file)}, args...)
			}
			_, err := parseServeFlags(args, envMap(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestServeStopsOnBadEnvironment: serve itself refuses before opening
// anything (a bad value used to be ignored silently).
func TestServeStopsOnBadEnvironment(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	t.Setenv("CASTIRON_DATA_DIR", data)
	t.Setenv("CASTIRON_AUTOMATED_CLEAN", "sometimes")
	err := Serve([]string{"--listen", "127.0.0.1:0"}, "dev")
	if err == nil || !strings.Contains(err.Error(), "CASTIRON_AUTOMATED_CLEAN") {
		t.Fatalf("serve: %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("data dir created before the settings were checked: %v", err)
	}
}

// TestConfigRoundTrip: what `castiron config` prints is a file serve
// accepts, with the same settings, and every flag (also those added later)
// is in it.
func TestConfigRoundTrip(t *testing.T) {
	fs, _ := serveFlags()
	args := []string{"--data-dir", "/var/lib/castiron", "--automated-clean=false", "--callback-timeout", "10m",
		"--dhcp-range", "10.0.0.100,10.0.0.200", "--listen", "0.0.0.0:6385"}
	if err := resolveFlags(fs, args, envMap(nil)); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var out bytes.Buffer
	if err := writeConfig(&out, fs, set); err != nil {
		t.Fatal(err)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag {
			return
		}
		prefix := "\n#" + f.Name + ": "
		if set[f.Name] {
			prefix = "\n" + f.Name + ": "
		}
		if !strings.Contains(out.String(), prefix) {
			t.Errorf("key %s missing from:\n%s", f.Name, out.String())
		}
	})
	c, err := parseServeFlags([]string{"--config", writeFile(t, "c.yaml", out.String())}, envMap(nil))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if c.dataDir != "/var/lib/castiron" || c.automatedClean || c.callbackTimeout != 10*time.Minute ||
		c.pxe.dhcpRange != "10.0.0.100,10.0.0.200" || c.listen != "0.0.0.0:6385" || c.pxe.dhcpMode != "full" {
		t.Errorf("round trip: %+v", c)
	}
	// Every key active at its default is accepted and changes nothing.
	fs, defaults := serveFlags()
	all := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { all[f.Name] = true })
	out.Reset()
	if err := writeConfig(&out, fs, all); err != nil {
		t.Fatal(err)
	}
	c, err = parseServeFlags([]string{"--config", writeFile(t, "all.yaml", out.String())}, envMap(nil))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if c.listen != defaults.listen || c.automatedClean != defaults.automatedClean || c.callbackTimeout != defaults.callbackTimeout {
		t.Errorf("all defaults: %+v", c)
	}
}

// TestMaxAPIVersionFlag: --max-api-version (or CASTIRON_MAX_API_VERSION)
// pins the API's ceiling; unset, the newest is served.
func TestMaxAPIVersionFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{nil, nil, 0},
		{[]string{"--max-api-version", "1.89"}, nil, 89},
		{nil, map[string]string{"CASTIRON_MAX_API_VERSION": "1.96"}, 96},
		{[]string{"--max-api-version=latest"}, nil, 0},
	} {
		c, err := parseServeFlags(tc.args, envMap(tc.env))
		if err != nil || c.maxMinor != tc.want {
			t.Errorf("%v %v: maxMinor %v, %v; want %d", tc.args, tc.env, c, err, tc.want)
		}
	}
}

// TestStepFlags: --step-poll-interval and --step-timeout (flag, file or
// environment) reach the conductor's step engine; unset, Ironic's 10 s and
// 30 min.
func TestStepFlags(t *testing.T) {
	c, err := parseServeFlags([]string{"--step-poll-interval", "2s"}, envMap(map[string]string{"CASTIRON_STEP_TIMEOUT": "45m"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := conductorConfig(c, provisioningSite{}, nil, slog.New(slog.DiscardHandler))
	if cfg.StepPollInterval != 2*time.Second || cfg.StepTimeout != 45*time.Minute {
		t.Errorf("engine config: poll %s, timeout %s; want 2s and 45m", cfg.StepPollInterval, cfg.StepTimeout)
	}
	c, err = parseServeFlags(nil, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.stepPollInterval != 10*time.Second || c.stepTimeout != 30*time.Minute {
		t.Errorf("defaults: poll %s, timeout %s", c.stepPollInterval, c.stepTimeout)
	}
}
