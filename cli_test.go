package main

// TestOpenstackCLI drives a real castiron process with the real OpenStack
// client (`openstack baremetal ...`, Debian python3-openstackclient and
// python3-ironicclient), the way an operator would: nodes, ports, the
// provision state machine with --wait, power, boot device, maintenance,
// traits, validate, conductors, drivers, abort, and Ironic's error messages.
//
// It is skipped only when the `openstack` binary is missing and CI is not
// "true"; in CI a missing client is a failure.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const cliConductor = "cli-test-conductor"

// cliServer is the castiron process the CLI talks to.
type cliServer struct {
	cmd      *exec.Cmd
	endpoint string
	logPath  string
	exited   chan struct{}
}

// cliClient runs `openstack baremetal` against one endpoint.
type cliClient struct {
	bin      string
	endpoint string
	env      []string
	auth     []string // --os-auth-type ... (default: none)
}

func TestOpenstackCLI(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("openstack CLI not found (CI=true, so this is a failure): install python3-openstackclient python3-ironicclient")
		}
		t.Skip("openstack CLI not found; apt-get install -y python3-openstackclient python3-ironicclient (or run `make test` as root)")
	}

	dir := t.TempDir()
	bin := cliBuild(t, dir)
	srv := cliStart(t, bin, filepath.Join(dir, "data"), filepath.Join(dir, "castiron.log"))
	c := &cliClient{bin: osc, endpoint: srv.endpoint, env: cliEnv(dir)}
	env := c.env

	// Groups share the server and run in parallel, each on its own nodes;
	// the server is stopped (t.Cleanup above) after all of them finish.
	t.Run("conductors and drivers", func(t *testing.T) {
		t.Parallel()
		cliConductorsAndDrivers(t, c)
	})
	t.Run("node lifecycle", func(t *testing.T) {
		t.Parallel()
		cliLifecycle(t, c)
	})
	t.Run("abort inspect wait", func(t *testing.T) {
		t.Parallel()
		cliAbortInspect(t, c)
	})
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		cliErrors(t, c)
	})
	t.Run("adopt rebuild rescue", func(t *testing.T) {
		t.Parallel()
		cliAdoptRescue(t, c)
	})
	t.Run("http_basic auth", func(t *testing.T) {
		t.Parallel()
		htpasswd := filepath.Join(dir, "htpasswd")
		hash, err := bcrypt.GenerateFromPassword([]byte("s3cret pass"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(htpasswd, []byte("# castiron users\noperator:"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		srv := cliStart(t, bin, filepath.Join(dir, "data-auth"), filepath.Join(dir, "castiron-auth.log"), "--htpasswd", htpasswd)
		basic := func(user, pass string) *cliClient {
			return &cliClient{bin: osc, endpoint: srv.endpoint, env: env,
				auth: []string{"--os-auth-type", "http_basic", "--os-username", user, "--os-password", pass}}
		}
		ok := basic("operator", "s3cret pass")
		var node map[string]any
		ok.json(t, &node, "node", "create", "--driver", "fake-hardware", "--name", "cli-auth")
		var list []map[string]any
		ok.json(t, &list, "node", "list")
		if len(list) != 1 || list[0]["Name"] != "cli-auth" {
			t.Errorf("node list with http_basic: %v", list)
		}
		const denied = "The request you have made requires authentication. (HTTP 401)"
		basic("operator", "wrong").fail(t, denied, "node", "list")
		basic("nobody", "s3cret pass").fail(t, denied, "node", "list")
		(&cliClient{bin: osc, endpoint: srv.endpoint, env: env}).fail(t, denied, "node", "show", "cli-auth")
	})
}

// cliAdoptRescue: adopt a running machine, rebuild it, rescue and unrescue
// it (fake interfaces complete at once), then tear it down.
func cliAdoptRescue(t *testing.T, c *cliClient) {
	var node map[string]any
	c.json(t, &node, "node", "create", "--driver", "fake-hardware", "--name", "cli-adopt")
	uuid, _ := node["uuid"].(string)
	c.run(t, "node", "manage", uuid, "--wait", "60")
	c.run(t, "node", "adopt", uuid, "--wait", "60")
	cliState(t, c, uuid, "active", "")
	c.run(t, "node", "rebuild", uuid, "--wait", "60")
	cliState(t, c, uuid, "active", "")
	c.run(t, "node", "rescue", uuid, "--rescue-password", "rescue-me", "--wait", "60")
	cliState(t, c, uuid, "rescue", "")
	c.fail(t, `can not be performed on node "`+uuid+`" while it is in state "rescue"`, "node", "provide", uuid)
	c.run(t, "node", "unrescue", uuid, "--wait", "60")
	cliState(t, c, uuid, "active", "")
	c.run(t, "node", "undeploy", uuid, "--wait", "120")
	cliState(t, c, uuid, "available", "")
	c.run(t, "node", "delete", uuid)
}

func cliConductorsAndDrivers(t *testing.T, c *cliClient) {
	var conductors []map[string]any
	c.json(t, &conductors, "conductor", "list")
	if row := cliFind(conductors, "Hostname", cliConductor); row == nil || row["Alive"] != true {
		t.Errorf("conductor list: want %s alive, got %v", cliConductor, conductors)
	}

	var cond map[string]any
	c.json(t, &cond, "conductor", "show", cliConductor)
	if cond["hostname"] != cliConductor || cond["alive"] != true {
		t.Errorf("conductor show: got %v", cond)
	}
	if !cliContains(cond["drivers"], "fake-hardware") || !cliContains(cond["drivers"], "ipmi") {
		t.Errorf("conductor show: drivers = %v, want fake-hardware and ipmi", cond["drivers"])
	}
	c.fail(t, "could not be found", "conductor", "show", "no-such-conductor")

	var drivers []map[string]any
	c.json(t, &drivers, "driver", "list")
	for _, name := range []string{"fake-hardware", "ipmi"} {
		row := cliFind(drivers, "Supported driver(s)", name)
		if row == nil || !strings.Contains(fmt.Sprint(row["Active host(s)"]), cliConductor) {
			t.Errorf("driver list: want %s on %s, got %v", name, cliConductor, drivers)
		}
	}

	var drv map[string]any
	c.json(t, &drv, "driver", "show", "fake-hardware")
	if drv["name"] != "fake-hardware" || !strings.Contains(fmt.Sprint(drv["hosts"]), cliConductor) {
		t.Errorf("driver show fake-hardware: got name=%v hosts=%v", drv["name"], drv["hosts"])
	}
	if drv["default_power_interface"] != "fake" {
		t.Errorf("driver show fake-hardware: default_power_interface = %v, want fake", drv["default_power_interface"])
	}
	c.json(t, &drv, "driver", "show", "ipmi")
	if drv["name"] != "ipmi" || drv["default_power_interface"] != "ipmitool" {
		t.Errorf("driver show ipmi: got name=%v default_power_interface=%v", drv["name"], drv["default_power_interface"])
	}
	c.fail(t, "Could not find the following driver(s) or hardware type(s): no-such-driver.", "driver", "show", "no-such-driver")
}

func cliLifecycle(t *testing.T, c *cliClient) {
	const mac = "52:54:00:c1:10:01"

	// Create.
	var node map[string]any
	c.json(t, &node, "node", "create", "--driver", "fake-hardware", "--name", "cli-node",
		"--property", "cpus=4", "--property", "memory_mb=4096", "--property", "local_gb=10",
		"--driver-info", "deploy_kernel=http://127.0.0.1/k", "--driver-info", "deploy_ramdisk=http://127.0.0.1/r")
	uuid, _ := node["uuid"].(string)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(uuid) {
		t.Fatalf("node create: uuid = %q", uuid)
	}
	cliWant(t, "node create", node, map[string]any{
		"name": "cli-node", "driver": "fake-hardware", "provision_state": "enroll",
		"power_interface": "fake", "maintenance": false,
	})
	cliWantMap(t, "node create properties", node["properties"], map[string]any{"cpus": "4", "memory_mb": "4096", "local_gb": "10"})
	cliWantMap(t, "node create driver_info", node["driver_info"], map[string]any{"deploy_kernel": "http://127.0.0.1/k"})

	// List and show (by name and by UUID).
	var list []map[string]any
	c.json(t, &list, "node", "list")
	if row := cliFind(list, "UUID", uuid); row == nil || row["Name"] != "cli-node" || row["Provisioning State"] != "enroll" {
		t.Errorf("node list: want %s (cli-node, enroll) in %v", uuid, list)
	}
	c.json(t, &list, "node", "list", "--long")
	if row := cliFind(list, "UUID", uuid); row == nil || row["Driver"] != "fake-hardware" {
		t.Errorf("node list --long: want %s with Driver fake-hardware in %v", uuid, list)
	}
	var byName, byUUID map[string]any
	c.json(t, &byName, "node", "show", "cli-node")
	c.json(t, &byUUID, "node", "show", uuid)
	if byName["uuid"] != uuid || byUUID["name"] != "cli-node" {
		t.Errorf("node show: by name uuid=%v, by uuid name=%v", byName["uuid"], byUUID["name"])
	}

	// Set and unset.
	c.run(t, "node", "set", "cli-node", "--property", "cpu_arch=x86_64", "--extra", "rack=r1",
		"--name", "cli-node-b", "--description", "first rack, slot 3", "--resource-class", "baremetal-gold")
	c.json(t, &node, "node", "show", uuid)
	cliWant(t, "node set", node, map[string]any{
		"name": "cli-node-b", "description": "first rack, slot 3", "resource_class": "baremetal-gold",
	})
	cliWantMap(t, "node set properties", node["properties"], map[string]any{"cpu_arch": "x86_64", "cpus": "4"})
	cliWantMap(t, "node set extra", node["extra"], map[string]any{"rack": "r1"})
	c.run(t, "node", "unset", "cli-node-b", "--property", "cpus", "--extra", "rack",
		"--description", "--resource-class")
	c.json(t, &node, "node", "show", "cli-node-b")
	cliWant(t, "node unset", node, map[string]any{"description": nil, "resource_class": nil})
	if props, _ := node["properties"].(map[string]any); props == nil || props["cpus"] != nil || props["cpu_arch"] != "x86_64" {
		t.Errorf("node unset --property cpus: properties = %v", node["properties"])
	}
	if extra, _ := node["extra"].(map[string]any); len(extra) != 0 {
		t.Errorf("node unset --extra rack: extra = %v", node["extra"])
	}
	c.fail(t, "could not be found", "node", "show", "cli-node")

	// Ports.
	var port map[string]any
	c.json(t, &port, "port", "create", "--node", uuid, "--extra", "switch=sw1", mac)
	portUUID, _ := port["uuid"].(string)
	cliWant(t, "port create", port, map[string]any{"address": mac, "node_uuid": uuid, "pxe_enabled": true})
	for _, ident := range []string{"cli-node-b", uuid} {
		var ports []map[string]any
		c.json(t, &ports, "port", "list", "--node", ident)
		if len(ports) != 1 || ports[0]["UUID"] != portUUID || ports[0]["Address"] != mac {
			t.Errorf("port list --node %s: want only %s (%s), got %v", ident, portUUID, mac, ports)
		}
	}
	var ports []map[string]any
	c.json(t, &ports, "port", "list", "--long")
	if row := cliFind(ports, "UUID", portUUID); row == nil || row["Node UUID"] != uuid {
		t.Errorf("port list --long: want %s on node %s, got %v", portUUID, uuid, ports)
	}
	c.json(t, &ports, "port", "list", "--address", mac)
	if len(ports) != 1 || ports[0]["UUID"] != portUUID {
		t.Errorf("port list --address %s: got %v", mac, ports)
	}
	c.json(t, &port, "port", "show", portUUID)
	cliWant(t, "port show", port, map[string]any{"uuid": portUUID, "address": mac, "node_uuid": uuid})
	cliWantMap(t, "port show extra", port["extra"], map[string]any{"switch": "sw1"})
	c.json(t, &port, "port", "show", "--address", mac)
	if port["uuid"] != portUUID {
		t.Errorf("port show --address: uuid = %v, want %s", port["uuid"], portUUID)
	}

	// enroll -> manageable, then the verbs that work there.
	c.run(t, "node", "manage", uuid, "--wait", "60")
	cliState(t, c, uuid, "manageable", "")

	var validate []map[string]any
	c.json(t, &validate, "node", "validate", uuid)
	for _, iface := range []string{"power", "management", "deploy", "boot"} {
		if row := cliFind(validate, "Interface", iface); row == nil || row["Result"] != true {
			t.Errorf("node validate: %s = %v, want Result true (all: %v)", iface, row, validate)
		}
	}

	c.run(t, "node", "maintenance", "set", uuid, "--reason", "replacing a fan")
	c.json(t, &node, "node", "show", uuid)
	cliWant(t, "maintenance set", node, map[string]any{"maintenance": true, "maintenance_reason": "replacing a fan"})
	c.run(t, "node", "maintenance", "unset", uuid)
	c.json(t, &node, "node", "show", uuid)
	cliWant(t, "maintenance unset", node, map[string]any{"maintenance": false, "maintenance_reason": nil})

	c.run(t, "node", "power", "on", uuid)
	c.json(t, &node, "node", "show", uuid)
	cliWant(t, "power on", node, map[string]any{"power_state": "power on", "target_power_state": nil})
	c.run(t, "node", "power", "off", uuid, "--power-timeout", "30")
	c.json(t, &node, "node", "show", uuid)
	cliWant(t, "power off", node, map[string]any{"power_state": "power off", "target_power_state": nil})

	c.run(t, "node", "boot", "device", "set", uuid, "pxe", "--persistent")
	var boot map[string]any
	c.json(t, &boot, "node", "boot", "device", "show", uuid)
	cliWant(t, "boot device show", boot, map[string]any{"boot_device": "pxe", "persistent": true})
	c.json(t, &boot, "node", "boot", "device", "show", uuid, "--supported")
	if s := fmt.Sprint(boot["supported_boot_devices"]); !strings.Contains(s, "pxe") || !strings.Contains(s, "disk") {
		t.Errorf("boot device show --supported: %v", boot)
	}
	c.run(t, "node", "boot", "device", "set", uuid, "disk")
	c.json(t, &boot, "node", "boot", "device", "show", uuid)
	cliWant(t, "boot device show after set disk", boot, map[string]any{"boot_device": "disk", "persistent": false})

	c.run(t, "node", "add", "trait", uuid, "CUSTOM_GPU", "HW_CPU_X86_VMX")
	var traits []map[string]any
	c.json(t, &traits, "node", "trait", "list", uuid)
	if got := cliColumn(traits, "Traits"); strings.Join(got, ",") != "CUSTOM_GPU,HW_CPU_X86_VMX" { // sorted
		t.Errorf("trait list: got %v, want [CUSTOM_GPU HW_CPU_X86_VMX]", got)
	}
	c.run(t, "node", "remove", "trait", uuid, "CUSTOM_GPU")
	c.json(t, &traits, "node", "trait", "list", uuid)
	if got := cliColumn(traits, "Traits"); strings.Join(got, ",") != "HW_CPU_X86_VMX" {
		t.Errorf("trait list after remove: got %v, want [HW_CPU_X86_VMX]", got)
	}
	c.json(t, &node, "node", "show", uuid)
	if !cliContains(node["traits"], "HW_CPU_X86_VMX") || cliContains(node["traits"], "CUSTOM_GPU") {
		t.Errorf("node show traits = %v, want [HW_CPU_X86_VMX]", node["traits"])
	}
	c.fail(t, "doesn't have a trait 'CUSTOM_NOT_THERE'", "node", "remove", "trait", uuid, "CUSTOM_NOT_THERE")

	// Inspection with the fake inspect interface finishes by itself.
	c.run(t, "node", "inspect", uuid, "--wait", "60")
	cliState(t, c, uuid, "manageable", "")

	// manageable -> (cleaning) -> available.
	c.run(t, "node", "provide", uuid, "--wait", "120")
	node = cliState(t, c, uuid, "available", "")
	if node["conductor"] != cliConductor {
		t.Errorf("node conductor = %v, want %s", node["conductor"], cliConductor)
	}
	c.json(t, &list, "node", "list", "--conductor", cliConductor)
	if cliFind(list, "UUID", uuid) == nil {
		t.Errorf("node list --conductor %s: %s missing from %v", cliConductor, uuid, list)
	}
	c.json(t, &list, "node", "list", "--conductor", "no-such-conductor")
	if len(list) != 0 {
		t.Errorf("node list --conductor no-such-conductor: want [], got %v", list)
	}
	c.json(t, &list, "node", "list", "--provision-state", "available")
	if cliFind(list, "UUID", uuid) == nil {
		t.Errorf("node list --provision-state available: %s missing from %v", uuid, list)
	}

	// Deploy (fake deploy interface) and undeploy.
	c.run(t, "node", "deploy", uuid, "--wait", "120")
	node = cliState(t, c, uuid, "active", "")
	if node["power_state"] != "power on" {
		t.Errorf("after deploy: power_state = %v, want power on", node["power_state"])
	}
	c.fail(t, `can not be performed on node "`+uuid+`" while it is in state "active"`, "node", "manage", uuid)
	c.run(t, "node", "undeploy", uuid, "--wait", "120")
	cliState(t, c, uuid, "available", "")

	// Port delete, node delete.
	c.run(t, "port", "delete", portUUID)
	c.json(t, &ports, "port", "list", "--node", uuid)
	if len(ports) != 0 {
		t.Errorf("port list after port delete: %v", ports)
	}
	c.fail(t, "could not be found", "port", "show", portUUID)
	c.run(t, "node", "delete", uuid)
	c.fail(t, "could not be found", "node", "show", uuid)
	c.json(t, &list, "node", "list")
	if cliFind(list, "UUID", uuid) != nil {
		t.Errorf("node list after delete still has %s", uuid)
	}
}

// cliAbortInspect: an agent-inspected node waits in "inspect wait" for a
// ramdisk that never calls back; abort moves it to "inspect failed".
func cliAbortInspect(t *testing.T, c *cliClient) {
	var node map[string]any
	c.json(t, &node, "node", "create", "--driver", "fake-hardware", "--name", "cli-abort",
		"--inspect-interface", "agent")
	uuid, _ := node["uuid"].(string)
	cliWant(t, "node create --inspect-interface agent", node, map[string]any{"inspect_interface": "agent"})
	c.run(t, "node", "manage", "cli-abort", "--wait", "60")
	cliState(t, c, uuid, "manageable", "")

	c.run(t, "node", "inspect", "cli-abort")
	node = cliWaitState(t, c, uuid, "inspect wait", 60*time.Second)
	cliWant(t, "inspect (agent, no callback)", node, map[string]any{"target_provision_state": "manageable"})
	// Still waiting a moment later: nothing completes it.
	time.Sleep(2 * time.Second)
	cliState(t, c, uuid, "inspect wait", "manageable")

	c.run(t, "node", "abort", "cli-abort")
	node = cliState(t, c, uuid, "inspect failed", "manageable")
	if s, _ := node["last_error"].(string); s == "" {
		t.Errorf("after abort: last_error is empty")
	}
	c.fail(t, `The requested action "abort" can not be performed on node "`+uuid+`" while it is in state "inspect failed"`,
		"node", "abort", "cli-abort")

	// inspect failed -> manageable, then delete.
	c.run(t, "node", "manage", "cli-abort", "--wait", "60")
	cliState(t, c, uuid, "manageable", "")
	c.run(t, "node", "delete", "cli-abort")
}

// cliErrors: verbs in the wrong state exit non-zero with Ironic's message.
func cliErrors(t *testing.T, c *cliClient) {
	var node map[string]any
	c.json(t, &node, "node", "create", "--driver", "fake-hardware", "--name", "cli-errors")
	uuid, _ := node["uuid"].(string)

	c.fail(t, `The requested action "provide" can not be performed on node "`+uuid+`" while it is in state "enroll"`,
		"node", "provide", "cli-errors")
	// The client sends target "active" for `node deploy`; Ironic names the target.
	c.fail(t, `The requested action "active" can not be performed on node "`+uuid+`" while it is in state "enroll"`,
		"node", "deploy", "cli-errors")
	cliState(t, c, uuid, "enroll", "")

	c.run(t, "node", "manage", "cli-errors", "--wait", "60")
	c.fail(t, `The requested action "manage" can not be performed on node "`+uuid+`" while it is in state "manageable"`,
		"node", "manage", "cli-errors")
	cliState(t, c, uuid, "manageable", "")

	c.fail(t, "could not be found", "node", "show", "no-such-node")
	c.fail(t, "could not be found", "node", "power", "on", "no-such-node")
	c.fail(t, "could not be found", "port", "show", "6f0c2e4c-4d3e-4a8e-9d7e-1b2c3d4e5f60")
	c.fail(t, "Expected a MAC address but received not-a-mac", "port", "create", "--node", uuid, "not-a-mac")

	c.run(t, "node", "delete", "cli-errors")
}

// --- helpers ---

// cliBuild compiles castiron the way `make build` does (static, CGO off).
func cliBuild(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "castiron")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cliStart runs `castiron serve` on 127.0.0.1:0, reads the bound address
// from its first log line, waits for GET /v1, and stops it by PID when the
// test ends.
func cliStart(t *testing.T, bin, dataDir, logPath string, extra ...string) *cliServer {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--conductor-name", cliConductor, "--log-level", "debug")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = cliServerEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start castiron: %v", err)
	}
	s := &cliServer{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.exited) }()
	t.Cleanup(func() {
		pid := cmd.Process.Pid
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("castiron (pid %d) did not stop on SIGTERM; killing it", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-s.exited
		}
		// The secrets the CLI tests send must be in no log line.
		if b, err := os.ReadFile(logPath); err == nil {
			for _, secret := range []string{"s3cret pass", "rescue-me"} {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("secret %q in the castiron log %s", secret, logPath)
				}
			}
		}
		if t.Failed() {
			s.dumpLog(t)
		}
	})

	// logfmt (default) or JSON (--log-format json)
	listenRE := regexp.MustCompile(`msg="castiron serving".* listen=(\S+)|"msg":"castiron serving".*"listen":"([^"]+)"`)
	deadline := time.Now().Add(60 * time.Second)
	for s.endpoint == "" {
		select {
		case <-s.exited:
			s.dumpLog(t)
			t.Fatalf("castiron exited before serving")
		default:
		}
		if time.Now().After(deadline) {
			s.dumpLog(t)
			t.Fatalf("castiron did not log its listen address within 60s")
		}
		if b, err := os.ReadFile(logPath); err == nil {
			if m := listenRE.FindSubmatch(b); m != nil {
				s.endpoint = "http://" + string(m[1]) + string(m[2])
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", s.endpoint+"/v1", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			// 401: up, with --htpasswd.
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return s
			}
		}
		if time.Now().After(deadline) {
			s.dumpLog(t)
			t.Fatalf("GET %s/v1 did not answer 200 (or 401) within 60s (last error %v)", s.endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *cliServer) dumpLog(t *testing.T) {
	b, _ := os.ReadFile(s.logPath)
	const max = 20000
	if len(b) > max {
		b = append([]byte("...\n"), b[len(b)-max:]...)
	}
	t.Logf("castiron log (%s):\n%s", s.logPath, b)
}

// cliServerEnv keeps CASTIRON_* settings of the caller out of the server.
func cliServerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CASTIRON_") {
			env = append(env, kv)
		}
	}
	return env
}

// cliEnv is the client's environment: no OS_* settings or clouds.yaml of
// the caller, a private HOME, no Python bytecode writes.
func cliEnv(dir string) []string {
	home := filepath.Join(dir, "home")
	_ = os.MkdirAll(home, 0o700)
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OS_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "PYTHONDONTWRITEBYTECODE=1")
}

type cliResult struct {
	args           []string
	stdout, stderr string
	err            error
}

// exec runs `openstack --debug ... baremetal ARGS`; --debug puts the HTTP
// exchange on stderr, which failures quote.
func (c *cliClient) exec(args ...string) cliResult {
	auth := c.auth
	if auth == nil {
		auth = []string{"--os-auth-type", "none"}
	}
	full := append(append(auth, "--os-endpoint", c.endpoint, "--debug", "baremetal"), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, full...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return cliResult{args: args, stdout: out.String(), stderr: errb.String(), err: err}
}

// http is the request/response part of the client's debug output plus its
// last lines (the error it printed).
func (r cliResult) http() string {
	var b strings.Builder
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		if strings.HasPrefix(l, "REQ: ") || strings.HasPrefix(l, "RESP: ") || strings.HasPrefix(l, "RESP BODY: ") {
			if len(l) > 1500 {
				l = l[:1500] + "..."
			}
			b.WriteString("    " + l + "\n")
		}
	}
	if n := len(lines); n > 0 {
		b.WriteString("  client's last lines:\n")
		for _, l := range lines[max(0, n-4):] {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

func (r cliResult) String() string { return "openstack baremetal " + strings.Join(r.args, " ") }

// run runs a command that must succeed and returns its stdout.
func (c *cliClient) run(t *testing.T, args ...string) string {
	t.Helper()
	r := c.exec(args...)
	if r.err != nil {
		t.Fatalf("%s: %v\n  stdout: %s\n  HTTP:\n%s", r, r.err, r.stdout, r.http())
	}
	t.Logf("ok: %s", r)
	return r.stdout
}

// json runs a command with -f json and decodes its output into v.
func (c *cliClient) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out := c.run(t, append(args, "-f", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("openstack baremetal %s -f json: bad JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fail runs a command that must exit non-zero with want in its stderr.
func (c *cliClient) fail(t *testing.T, want string, args ...string) {
	t.Helper()
	r := c.exec(args...)
	if r.err == nil {
		t.Errorf("%s: succeeded, want failure %q\n  stdout: %s\n  HTTP:\n%s", r, want, r.stdout, r.http())
		return
	}
	if _, ok := r.err.(*exec.ExitError); !ok {
		t.Errorf("%s: %v", r, r.err)
		return
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("%s: exit %v, want message %q\n  HTTP:\n%s", r, r.err, want, r.http())
		return
	}
	t.Logf("ok (fails as it should): %s", r)
}

// cliState checks provision_state and target_provision_state ("" = null).
func cliState(t *testing.T, c *cliClient, ident, state, target string) map[string]any {
	t.Helper()
	var node map[string]any
	c.json(t, &node, "node", "show", ident)
	want := map[string]any{"provision_state": state, "target_provision_state": nil}
	if target != "" {
		want["target_provision_state"] = target
	}
	cliWant(t, "node "+ident, node, want)
	return node
}

// cliWaitState polls `node show` until provision_state is state.
func cliWaitState(t *testing.T, c *cliClient, ident, state string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var node map[string]any
		c.json(t, &node, "node", "show", ident)
		if node["provision_state"] == state {
			return node
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: provision_state %v after %v, want %q (last_error %v)", ident, node["provision_state"], timeout, state, node["last_error"])
		}
		time.Sleep(time.Second)
	}
}

// cliWant compares top-level fields; nil means JSON null.
func cliWant(t *testing.T, what string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: field %q missing", what, k)
			continue
		}
		if w == nil {
			if g != nil {
				t.Errorf("%s: %s = %v, want null", what, k, g)
			}
			continue
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: %s = %v, want %v", what, k, g, w)
		}
	}
}

// cliWantMap compares entries of a JSON object field by their printed form
// (the client may send "4" or 4).
func cliWantMap(t *testing.T, what string, got any, want map[string]any) {
	t.Helper()
	m, ok := got.(map[string]any)
	if !ok {
		t.Errorf("%s: got %T %v, want an object", what, got, got)
		return
	}
	cliWant(t, what, m, want)
}

// cliFind returns the first row whose column col equals val.
func cliFind(rows []map[string]any, col, val string) map[string]any {
	for _, r := range rows {
		if fmt.Sprint(r[col]) == val {
			return r
		}
	}
	return nil
}

// cliColumn returns column col of rows, sorted.
func cliColumn(rows []map[string]any, col string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprint(r[col]))
	}
	sort.Strings(out)
	return out
}

// cliContains reports whether a JSON list (or the client's "a, b" string
// rendering of one) holds s.
func cliContains(v any, s string) bool {
	switch l := v.(type) {
	case []any:
		for _, e := range l {
			if fmt.Sprint(e) == s {
				return true
			}
		}
	case string:
		for _, e := range strings.Split(l, ",") {
			if strings.TrimSpace(e) == s {
				return true
			}
		}
	}
	return false
}
