package ipmi

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/console"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/fault"
	"castiron/storage"
)

// freePortRange and readFor are enginetest's (shared with the redfish-ssh
// console's tests).
func freePortRange(t *testing.T) console.Ports { return enginetest.FreePortRange(t) }

func consoleConductor(t *testing.T, db string, ports console.Ports) (*engine.Conductor, *storage.SQLite) {
	t.Helper()
	d := newTestDriver(t, Config{Timeout: 300 * time.Millisecond, Retries: 2})
	return enginetest.StartAt(t, db, engine.Config{
		Hostname: "console-test", ConsoleHost: "127.0.0.1", ConsoleListen: "127.0.0.1", ConsolePorts: ports,
		Console: console.Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
	}, engine.NewFakeHardware(fake.New()), engine.NewIPMIHardware(d, d, Properties()))
}

func waitNode(t *testing.T, st storage.Store, uuid string, ok func(n *storage.Node) bool) *storage.Node {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := st.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.Reservation == nil && ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: console_enabled %v last_error %v", uuid, n.ConsoleEnabled, n.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFor(t *testing.T, r io.Reader, want string) { t.Helper(); enginetest.ReadFor(t, r, want) }

// TestConductorSerialConsole drives ipmitool-socat through the conductor
// against ipmi_sim: enable, console info, TCP and attached viewers, a
// conductor restart that restores the console on the same port, disable,
// and the errors of a node that cannot have one.
func TestConductorSerialConsole(t *testing.T) {
	ctx := context.Background()
	port := ipmisim.NewSerialPort(t)
	sim := ipmisim.StartSimSOL(t, port.Addr())
	ports := freePortRange(t)
	db := filepath.Join(t.TempDir(), "castiron.db")
	c, st := consoleConductor(t, db, ports)

	n := &storage.Node{Name: func() *string { s := "sol0"; return &s }(), Driver: "ipmi", DriverInfo: sim.DriverInfo(), ConsoleInterface: engine.ConsoleSocat}
	if err := c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	// Not enabled yet: Ironic-ish errors for a viewer.
	if _, _, err := c.AttachConsole(ctx, "sol0", true); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "Console access is not enabled on node") {
		t.Fatalf("attach to a disabled console: %v", err)
	}
	if _, _, err := c.AttachConsole(ctx, "nosuch", true); !fault.Is(err, fault.NotFound) {
		t.Fatalf("attach to an unknown node: %v", err)
	}

	if err := c.SetConsole(ctx, "sol0", true); err != nil {
		t.Fatal(err)
	}
	got := waitNode(t, st, n.UUID, func(n *storage.Node) bool { return n.ConsoleEnabled })
	serial := port.Accept(t)
	on, info, err := c.ConsoleInfo(ctx, n.UUID)
	if err != nil || !on || info["type"] != "socat" {
		t.Fatalf("console info: %v %v %v", on, info, err)
	}
	url := info["url"].(string)
	host := strings.TrimPrefix(url, "tcp://")
	if _, p, _ := net.SplitHostPort(host); p != strconv.Itoa(ports.Min) && p != strconv.Itoa(ports.Max) {
		t.Fatalf("console url %s not in the range %v", url, ports)
	}
	if got.DriverInternalInfo["allocated_ipmi_terminal_port"] == nil {
		t.Fatalf("allocated port not recorded: %v", got.DriverInternalInfo)
	}

	serial.Write([]byte("Debian GNU/Linux 12 sol0 ttyS0\r\n"))
	tc, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	readFor(t, tc, "sol0 ttyS0")
	sb, ro, err := c.AttachConsole(ctx, n.UUID, false)
	if err != nil || !bytes.Contains(sb, []byte("sol0 ttyS0")) {
		t.Fatalf("attach: scrollback %q, %v", sb, err)
	}
	if _, err := ro.Write([]byte("x")); !fault.Is(err, fault.Forbidden) {
		t.Fatalf("read-only write: %v", err)
	}

	// Restart: the console comes back on the same port; the old viewers
	// ended with the old conductor.
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(ro); err != nil {
		t.Fatal(err)
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(tc); err != nil {
		t.Fatalf("TCP client after conductor stop: %v", err)
	}
	c, st = consoleConductor(t, db, ports)
	// ipmi_sim keeps its serial line connected across deactivate and
	// activate: the machine's side stays the same connection.
	waitForT(t, "console restored", func() bool {
		_, v, err := c.AttachConsole(ctx, n.UUID, false)
		if err == nil {
			v.Close()
		}
		return err == nil
	})
	_, info2, err := c.ConsoleInfo(ctx, n.UUID)
	if err != nil || info2["url"] != url {
		t.Fatalf("after restart: %v %v, want url %s", info2, err, url)
	}
	var tc2 net.Conn
	waitForT(t, "restored console port", func() bool {
		tc2, err = net.Dial("tcp", host)
		return err == nil
	})
	defer tc2.Close()
	serial.Write([]byte("after restart\r\n"))
	readFor(t, tc2, "after restart")
	// Typing goes through after the restart too.
	tc2.Write([]byte("uname\r"))
	serial.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 6)
	if _, err := io.ReadFull(serial, buf); err != nil || string(buf) != "uname\r" {
		t.Fatalf("machine got %q, %v", buf, err)
	}

	// Disable: viewers end, the port closes, console_enabled false.
	_, rw, err := c.AttachConsole(ctx, "sol0", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, n.UUID, false); err != nil {
		t.Fatal(err)
	}
	got = waitNode(t, st, n.UUID, func(n *storage.Node) bool { return !n.ConsoleEnabled })
	if _, err := io.ReadAll(rw); err != nil {
		t.Fatal(err)
	}
	tc2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(tc2); err != nil {
		t.Fatal(err)
	}
	if got.DriverInternalInfo["allocated_ipmi_terminal_port"] != nil || got.LastError != nil {
		t.Fatalf("after disable: %v, last_error %v", got.DriverInternalInfo, got.LastError)
	}
	if on, _, _ := c.ConsoleInfo(ctx, n.UUID); on {
		t.Fatal("console info says enabled after disable")
	}

	// Enabled again, then the console interface changes: the console ends.
	if err := c.SetConsole(ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	waitNode(t, st, n.UUID, func(n *storage.Node) bool { return n.ConsoleEnabled })
	_, v, err := c.AttachConsole(ctx, n.UUID, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateNode(ctx, n.UUID, func(n *storage.Node) error { n.ConsoleInterface = "no-console"; return nil }, false); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(v); err != nil {
		t.Fatal(err)
	}
	if g, _ := st.GetNode(ctx, n.UUID); g.ConsoleEnabled {
		t.Fatal("console_enabled still true after the console interface changed")
	}
	// A no-console node: Ironic's unsupported error.
	if err := c.SetConsole(ctx, n.UUID, true); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "does not support console") {
		t.Fatalf("enable on no-console: %v", err)
	}

	// Enabled, then the node is deleted: viewers end.
	if _, err := c.UpdateNode(ctx, n.UUID, func(n *storage.Node) error { n.ConsoleInterface = engine.ConsoleSocat; return nil }, false); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	waitNode(t, st, n.UUID, func(n *storage.Node) bool { return n.ConsoleEnabled })
	_, v, err = c.AttachConsole(ctx, n.UUID, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(v); err != nil {
		t.Fatal(err)
	}
}

// TestConductorConsoleRefused: a BMC without SOL: enabling ends with
// console_enabled false and last_error set (Ironic's _set_console_mode);
// without a port range or ipmi_terminal_port, and with IPMI 1.5, the
// request itself is refused.
func TestConductorConsoleRefused(t *testing.T) {
	ctx := context.Background()
	sim := ipmisim.StartSim(t)
	c, st := consoleConductor(t, filepath.Join(t.TempDir(), "castiron.db"), freePortRange(t))
	n := &storage.Node{Driver: "ipmi", DriverInfo: sim.DriverInfo(), ConsoleInterface: engine.ConsoleSocat}
	if err := c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	got := waitNode(t, st, n.UUID, func(n *storage.Node) bool { return n.LastError != nil })
	if got.ConsoleEnabled || !strings.HasPrefix(*got.LastError, "Error enabling the console on node "+n.UUID+". Reason: ") {
		t.Fatalf("console_enabled %v last_error %q", got.ConsoleEnabled, *got.LastError)
	}
	if _, _, err := c.AttachConsole(ctx, n.UUID, false); !fault.Is(err, fault.Invalid) {
		t.Fatalf("attach after a failed enable: %v", err)
	}

	v15 := sim.DriverInfo()
	v15["ipmi_protocol_version"] = "1.5"
	old := &storage.Node{Driver: "ipmi", DriverInfo: v15, ConsoleInterface: engine.ConsoleShellinabox}
	if err := c.CreateNode(ctx, old, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, old.UUID, true); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "IPMI protocol version 2.0") {
		t.Fatalf("enable on IPMI 1.5: %v", err)
	}

	c2, _ := consoleConductor(t, filepath.Join(t.TempDir(), "castiron.db"), console.Ports{})
	m := &storage.Node{Driver: "ipmi", DriverInfo: sim.DriverInfo(), ConsoleInterface: engine.ConsoleSocat}
	if err := c2.CreateNode(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	if err := c2.SetConsole(ctx, m.UUID, true); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "ipmi_terminal_port") {
		t.Fatalf("enable without a port range: %v", err)
	}
}

func waitForT(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConductorRedfishSerialConsole: a redfish node's ipmitool-socat
// console is IPMI SOL at its BMC's host when driver_info has IPMI
// credentials; without them enabling is refused.
func TestConductorRedfishSerialConsole(t *testing.T) {
	ctx := context.Background()
	port := ipmisim.NewSerialPort(t)
	sim := ipmisim.StartSimSOL(t, port.Addr())
	d := newTestDriver(t, Config{})
	rf := engine.NewRedfishHardware(redfish.New(redfish.Config{}), redfish.Properties())
	rf.Serial = RedfishSerial(d)
	c, st := enginetest.Start(t, engine.Config{Hostname: "console-test", ConsolePorts: freePortRange(t)}, rf)

	di := map[string]any{"redfish_address": "https://127.0.0.1:1", "redfish_username": "u", "redfish_password": "p"}
	bare := &storage.Node{Driver: "redfish", DriverInfo: di, ConsoleInterface: engine.ConsoleSocat}
	if err := c.CreateNode(ctx, bare, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, bare.UUID, true); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "ipmi_username") {
		t.Fatalf("redfish node without IPMI credentials: %v", err)
	}

	withIPMI := map[string]any{"redfish_address": "https://127.0.0.1:1", "redfish_username": "u", "redfish_password": "p",
		"ipmi_username": ipmisim.User, "ipmi_password": ipmisim.Password, "ipmi_port": sim.Port}
	n := &storage.Node{Driver: "redfish", DriverInfo: withIPMI, ConsoleInterface: engine.ConsoleSocat}
	if err := c.CreateNode(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConsole(ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	waitNode(t, st, n.UUID, func(n *storage.Node) bool { return n.ConsoleEnabled })
	serial := port.Accept(t)
	_, v, err := c.AttachConsole(ctx, n.UUID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	serial.Write([]byte("redfish node over SOL\r\n"))
	readFor(t, v, "redfish node over SOL")
}
