package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"castiron/ramdisk/protocol"
)

// The end-to-end test runs main() in a child process (this test binary,
// re-executed), as an agent run under an OS: no PID 1 duties, no DHCP.
const mainEnv = "AGENT_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		cmdline string
		want    params
	}{
		{
			cmdline: "BOOT_IMAGE=/vmlinuz console=ttyS0,115200 ipa-api-url=http://10.203.0.1:6385 " +
				"ipa-inspection-callback-url=http://10.203.0.1:6385/v1/continue_inspection BOOTIF=01-52-54-00-AB-cd-0E " +
				"ipa-node-uuid=1be26c0b-03f2-4d2e-ae87-c02d7f33c123 ipa-debug=1 quiet\n",
			want: params{
				APIURL: "http://10.203.0.1:6385", InspectionURL: "http://10.203.0.1:6385/v1/continue_inspection",
				BootIF: "01-52-54-00-AB-cd-0E", BootMAC: net.HardwareAddr{0x52, 0x54, 0, 0xab, 0xcd, 0x0e},
				NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Debug: true,
			},
		},
		{
			cmdline: `ipa-api-url="http://h:1/a b" BOOTIF=52:54:00:00:00:01 ipa-debug=0`,
			want:    params{APIURL: "http://h:1/a b", BootIF: "52:54:00:00:00:01", BootMAC: net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}},
		},
		{
			cmdline: "BOOTIF=06-52-54-00-00-00-01 ipa-debug", // not Ethernet; bare debug flag
			want:    params{BootIF: "06-52-54-00-00-00-01", Debug: true},
		},
		{cmdline: "", want: params{}},
	}
	for _, tt := range tests {
		if got := parseCmdline(tt.cmdline); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseCmdline(%q)\n got %+v\nwant %+v", tt.cmdline, got, tt.want)
		}
	}
}

// TestServerAddr: the agent picks DHCPv6 exactly when the API URL names an
// IPv6 address.
func TestServerAddr(t *testing.T) {
	for raw, want := range map[string]string{
		"ipa-api-url=http://[fd51::1]:6385":                  "fd51::1",
		"ipa-api-url=https://10.0.0.1:6385":                  "10.0.0.1",
		"ipa-inspection-callback-url=http://[fd51::2]/v1/x":  "fd51::2",
		"ipa-api-url=http://castiron.example:6385":           "invalid IP",
		"ipa-api-url=http://[::ffff:10.0.0.9]:6385 BOOTIF=x": "10.0.0.9",
	} {
		if got := parseCmdline(raw).serverAddr().String(); got != want {
			t.Errorf("%s: server %s, want %s", raw, got, want)
		}
	}
}

func TestConsoleHandler(t *testing.T) {
	var buf bytes.Buffer
	h := newConsoleHandler(&buf, slog.LevelInfo, "castiron-agent")
	h.uptime = func() time.Duration { return 3210 * time.Millisecond }
	log := slog.New(h)
	log.Info("inventory posted", "node", "1234")
	log.With("step", "s-1").WithGroup("dhcp").Warn("lookup failed", "err", "HTTP 404: no", "in", 1200*time.Millisecond, "empty", "")
	log.Debug("hidden")
	want := "castiron-agent[3.21]: inventory posted node=1234\n" +
		`castiron-agent[3.21]: WARN lookup failed step=s-1 dhcp.err="HTTP 404: no" dhcp.in=1.2s dhcp.empty=""` + "\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestLoadModulesReportsFailures(t *testing.T) {
	dir := t.TempDir()
	order := filepath.Join(dir, "modules.order")
	os.WriteFile(order, []byte("# comment\n\nkernel/drivers/net/missing.ko\n"), 0o644)
	var buf bytes.Buffer
	hotplug := loadModules(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), dir, order, dir)
	if hotplug != nil {
		hotplug(context.Background()) // an old ramdisk has no aliases: returns at once
	}
	if !strings.Contains(buf.String(), "module=missing") || !strings.Contains(buf.String(), "failed=1") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// A ramdisk whose kernel has its drivers built in has an empty module
// list: no coldplug scan, no hotplug listener.
func TestLoadModulesEmptyList(t *testing.T) {
	dir := t.TempDir()
	order := filepath.Join(dir, "modules.order")
	os.WriteFile(order, nil, 0o644)
	for _, f := range []string{"modules.alias", "modules.dep"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	var buf bytes.Buffer
	// sys does not exist: a scan of it would log a failure.
	if hotplug := loadModules(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), filepath.Join(dir, "nosys"), order, dir); hotplug != nil {
		t.Error("a hotplug listener for an empty module list")
	}
	if !strings.Contains(buf.String(), `msg="kernel modules loaded" loaded=0 of=0`) || strings.Contains(buf.String(), "WARN") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// A zombie re-parented to us is reaped after the grace period, while a
// child os/exec waits for is left to it.
func TestReapOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "PR_SET_CHILD_SUBREAPER test runs as root only")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		skipOrFail(t, "cannot become a subreaper: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { reapOrphans(ctx, "/proc", 100*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()

	// sh exits at once; its background sleep becomes our orphan.
	out, err := exec.Command("sh", "-c", "sleep 0.05 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan := strings.TrimSpace(string(out))
	for range 20 { // os/exec children keep working meanwhile
		if err := exec.Command("true").Run(); err != nil {
			t.Fatalf("os/exec child stolen: %v", err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat("/proc/" + orphan); os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("orphan %s not reaped", orphan)
}

// skipOrFail skips a test that lacks privileges, except under CI=true.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func TestMachineNotPID1DoesNothing(t *testing.T) {
	m := machine{pid1: false, log: slog.New(slog.DiscardHandler)}
	if err := m.PowerOff(); err != nil {
		t.Fatal(err)
	}
	if err := m.Reboot(); err != nil {
		t.Fatal(err)
	}
}

// The whole program, wired as in the ramdisk: kernel command line ->
// inventory of a fake tree -> inspection post -> heartbeat -> power off.
func TestAgentEndToEnd(t *testing.T) {
	var inspected protocol.InspectionData
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/continue_inspection", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &inspected)
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(protocol.LookupResponse{
			Node: protocol.LookupNode{UUID: "n-1"}, Config: protocol.LookupConfig{AgentToken: "tok"},
		})
	})
	mux.HandleFunc("POST /v1/heartbeat/n-1", func(w http.ResponseWriter, r *http.Request) {
		var hb protocol.Heartbeat
		json.NewDecoder(r.Body).Decode(&hb)
		if hb.AgentToken != "tok" || !strings.HasPrefix(hb.AgentVersion, "castiron-agent/") {
			t.Errorf("heartbeat %+v", hb)
		}
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(protocol.Instruction{Command: protocol.CmdPowerOff, Reason: "inspection finished"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cmdline := filepath.Join(t.TempDir(), "cmdline")
	os.WriteFile(cmdline, []byte("ipa-api-url="+srv.URL+" ipa-inspection-callback-url="+srv.URL+
		"/v1/continue_inspection BOOTIF=01-52-54-00-12-34-56\n"), 0o644)
	tree := "inventory/testdata/full"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-cmdline", cmdline,
		"-sys", tree+"/sys", "-proc", tree+"/proc", "-dev", tree+"/dev")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	t.Logf("console:\n%s", out)
	for _, line := range []string{"inventory posted node=n-1", `powering off reason="inspection finished"`, "not PID 1: not doing it"} {
		if !bytes.Contains(out, []byte(line)) {
			t.Errorf("console lacks %q:\n%s", line, out)
		}
	}
	if inspected.BootInterface != "01-52-54-00-12-34-56" || inspected.Inventory.Boot.PXEInterface != "52:54:00:12:34:56" ||
		len(inspected.Inventory.Disks) != 2 || inspected.Inventory.Memory.PhysicalMB != 512 {
		t.Errorf("inspection data %+v", inspected)
	}
}
