//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
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
		Console []string `json:"enabled_console_interfaces"`
	}
	if err := json.Unmarshal([]byte(cli("driver", "show", "redfish", "-f", "json")), &drv); err != nil || !slices.Contains(drv.Console, "redfish-ssh") {
		t.Fatalf("driver show redfish: enabled_console_interfaces %v (%v)", drv.Console, err)
	}
	cli("node", "manage", "sshvm", "--wait", "60")
	show, enabled := enableConsoleCLI(t, cli, "sshvm", func() string {
		if n, _ := r.c.GetNode(ctx, node.UUID); n != nil {
			return n.LastErr()
		}
		return ""
	})
	url, _ := show.Info["url"].(string)
	if show.Info["type"] != "socat" || !strings.HasPrefix(url, "tcp://127.0.0.1:100") {
		t.Fatalf("console show: %+v", show)
	}
	t.Logf("console show: %v (enabled in %v)", show.Info, enabled.Round(time.Millisecond))
	if n, err := r.c.GetNode(ctx, node.UUID); err != nil || !strings.HasPrefix(fmt.Sprint(n.DriverInternalInfo["redfish_console_host_key"]), "ssh-ed25519 ") {
		t.Fatalf("the BMC's host key is not recorded: %v %v", err, n.DriverInternalInfo)
	}

	stdin, out, socatDone := socatConsole(ctx, t, ns, url)

	// Power on from the network: iPXE's banner and its Ctrl-B prompt.
	cli("node", "boot", "device", "set", "sshvm", "pxe")
	powerOn := time.Now()
	cli("node", "power", "on", "sshvm")
	firstByte := waitOutput(t, out, "iPXE", 1, 90*time.Second)
	waitOutput(t, out, "Ctrl-B", 1, 60*time.Second)
	if _, err := stdin.Write([]byte{0x02}); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, "iPXE>", 1, 30*time.Second)
	typed := time.Now()
	word := "castiron-ssh-" + randHex(3)
	if _, err := io.WriteString(stdin, "echo "+word+"\r"); err != nil {
		t.Fatal(err)
	}
	// Once echoed as typed, once printed by the command.
	waitOutput(t, out, word, 2, 30*time.Second)
	echo := time.Since(typed)
	if log := tailFile(r.console, 200); !strings.Contains(log, word) {
		t.Errorf("the VM's own console log lacks the typed command:\n%s", log)
	}

	disable := time.Now()
	cli("node", "console", "disable", "sshvm")
	waitSocatClosed(t, socatDone, 20*time.Second)
	closed := time.Since(disable)
	if show = consoleShowCLI(t, cli, "sshvm"); show.Enabled || show.Info != nil {
		t.Fatalf("after disable: %+v", show)
	}
	cli("node", "power", "off", "sshvm")
	t.Logf("E2E-TIMING redfish-ssh enable=%.2fs power_on_to_first_ipxe_byte=%.2fs typed_line_echoed=%.2fs disable_to_socat_closed=%.2fs",
		enabled.Seconds(), firstByte.Sub(powerOn).Seconds(), echo.Seconds(), closed.Seconds())
}
