//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSerialConsoleRedfishSSH: a qemu VM behind castiron's Redfish
// emulator, whose SSH serial console (cmd/redfishsim -ssh) is wired to the
// VM's serial port; the node's console interface is redfish-ssh. The stock
// openstack CLI enables the console (castiron finds the SSH console in the
// BMC's Redfish SerialConsole, logs in with the Redfish credentials and
// records the BMC's host key) and shows its socat URL; socat reads the
// VM's firmware (iPXE) through it and types into iPXE's shell; disabling
// the console closes socat's connection.
func TestSerialConsoleRedfishSSH(t *testing.T) {
	requireSimRig(t, "bios")
	for _, c := range []string{"socat", "openstack"} {
		if _, err := exec.LookPath(c); err != nil {
			unavailable(t, "%s not installed (tests/deps.sh)", c)
		}
	}
	b, ns, vmDir := startSimBMC(t, "bios", "-ssh", "127.0.0.1:2200")
	r := &vmediaRig{bmc: b, system: simSystem, console: filepath.Join(vmDir, "console.log")}
	r.start(t, castironBinary(t), "", "--console-port-range", "10000:10010", "--console-address", "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node, err := r.c.CreateNode(ctx, map[string]any{
		"name": "sshvm", "driver": "redfish", "console_interface": "redfish-ssh",
		"driver_info": map[string]any{
			"redfish_address": fmt.Sprintf("http://127.0.0.1:%d", b.port), "redfish_system_id": simSystem,
			"redfish_username": b.user, "redfish_password": b.pass,
		},
	})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}

	cli := baremetalCLI(ctx, t, ns, r.c.URL, t.TempDir())
	var drv struct {
		Console any `json:"enabled_console_interfaces"` // the CLI prints the list as a string
	}
	if err := json.Unmarshal([]byte(cli("driver", "show", "redfish", "-f", "json")), &drv); err != nil || !strings.Contains(fmt.Sprint(drv.Console), "redfish-ssh") {
		t.Fatalf("driver show redfish: enabled_console_interfaces %v (%v)", drv.Console, err)
	}
	cli("node", "manage", "sshvm", "--wait", "60")
	url, enabled := enableConsoleCLI(ctx, t, cli, r.c, "sshvm", node.UUID)
	if n, err := r.c.GetNode(ctx, node.UUID); err != nil || !strings.HasPrefix(fmt.Sprint(n.DriverInternalInfo["redfish_console_host_key"]), "ssh-ed25519 ") {
		t.Fatalf("the BMC's host key is not recorded: %v %v", err, n.DriverInternalInfo)
	}

	stdin, out, socatDone := socatConsole(ctx, t, ns, url)

	// Power on from the network: iPXE's banner and its Ctrl-B prompt.
	cli("node", "boot", "device", "set", "sshvm", "pxe")
	powerOn := time.Now()
	cli("node", "power", "on", "sshvm")
	firstByte, word, echo := typeIntoIPXE(t, stdin, out, "castiron-ssh-")
	if log := tailFile(r.console, 200); !strings.Contains(log, word) {
		t.Errorf("the VM's own console log lacks the typed command:\n%s", log)
	}

	disable := time.Now()
	cli("node", "console", "disable", "sshvm")
	waitSocatClosed(t, socatDone, 20*time.Second)
	closed := time.Since(disable)
	if show := consoleShowCLI(t, cli, "sshvm"); show.Enabled || show.Info != nil {
		t.Fatalf("after disable: %+v", show)
	}
	cli("node", "power", "off", "sshvm")
	t.Logf("E2E-TIMING redfish-ssh enable=%.2fs power_on_to_first_ipxe_byte=%.2fs typed_line_echoed=%.2fs disable_to_socat_closed=%.2fs",
		enabled.Seconds(), firstByte.Sub(powerOn).Seconds(), echo.Seconds(), closed.Seconds())
}
