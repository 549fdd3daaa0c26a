package cli

// TestOpenstackCLI drives a real castiron process with the real OpenStack
// client (`openstack baremetal ...`, Debian python3-openstackclient and
// python3-ironicclient), the way an operator would: nodes, ports, the
// provision state machine with --wait, power, boot device, maintenance,
// traits, validate, conductors, drivers, abort, and Ironic's error messages.
//
// It is skipped only when the `openstack` binary is missing and CI is not
// "true"; in CI a missing client is a failure.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

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
	t.Run("every create set unset delete", func(t *testing.T) {
		t.Parallel()
		cliEveryResource(t, c, t.TempDir())
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
