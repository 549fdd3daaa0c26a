package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/console"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/engine/enginetest"

	"github.com/coder/websocket"
)

// TestSerialConsoleAPI: the console API of ipmi nodes against ipmi_sim with
// SOL: 202 then console_enabled, Ironic's console_info for socat and
// shellinabox (the web console's URL on this API's address), a BMC without
// SOL ending in last_error, and the 400s of a bad request.
func TestSerialConsoleAPI(t *testing.T) {
	port := ipmisim.NewSerialPort(t)
	sim := ipmisim.StartSimSOL(t, port.Addr())
	plain := ipmisim.StartSim(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := ipmi.New(ipmi.Config{})
	t.Cleanup(func() { d.CloseSessions(t.Context()) })
	h := serveAPI(t, engine.Config{Hostname: "test-conductor", ConsoleHost: "192.0.2.7", ConsoleListen: "127.0.0.1",
		ConsolePorts: console.Ports{Min: p, Max: p}}, []*engine.HardwareType{engine.NewIPMIHardware(d, d, ipmi.Properties())})

	wait := func(id string, done func(n map[string]any) bool) map[string]any {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ; {
			n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)
			if n["reservation"] == nil && done(n) {
				return n
			}
			if time.Now().After(end) {
				t.Fatalf("node %s: %v", id, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The default stays no-console, as in Ironic.
	def := h.createNode(map[string]any{"driver": "ipmi", "driver_info": sim.DriverInfo()})
	if def["console_interface"] != "no-console" {
		t.Fatalf("default console interface %v", def["console_interface"])
	}

	id := h.createNode(map[string]any{"driver": "ipmi", "name": "sol", "driver_info": sim.DriverInfo(), "console_interface": "ipmitool-socat"})["uuid"].(string)
	path := "/v1/nodes/sol/states/console"
	h.expect(http.StatusAccepted, "PUT", path, latest, map[string]any{"enabled": true})
	wait(id, func(n map[string]any) bool { return n["console_enabled"] == true })
	c := h.expect(http.StatusOK, "GET", path, latest, nil).json(t)
	want := map[string]any{"type": "socat", "url": "tcp://192.0.2.7:" + strconv.Itoa(p)}
	if info, _ := c["console_info"].(map[string]any); c["console_enabled"] != true || info["type"] != want["type"] || info["url"] != want["url"] {
		t.Fatalf("GET console = %v, want info %v", c, want)
	}
	// The port is served (bound to ConsoleListen).
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()

	// The only port of the range is taken: a second console fails.
	other := h.createNode(map[string]any{"driver": "ipmi", "driver_info": sim.DriverInfo(), "console_interface": "ipmitool-shellinabox"})["uuid"].(string)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+other+"/states/console", latest, map[string]any{"enabled": true})
	n := wait(other, func(n map[string]any) bool { return n["last_error"] != nil })
	if n["console_enabled"] != false || !strings.Contains(n["last_error"].(string), "Console port "+strconv.Itoa(p)+" is in use: another node's console has it") {
		t.Fatalf("second console on a one-port range: %v %v", n["console_enabled"], n["last_error"])
	}

	// Disabled, the port goes to the shellinabox node: its info is the web
	// console on this API's address.
	h.expect(http.StatusAccepted, "PUT", path, latest, map[string]any{"enabled": false})
	wait(id, func(n map[string]any) bool { return n["console_enabled"] == false })
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+other+"/states/console", latest, map[string]any{"enabled": true})
	wait(other, func(n map[string]any) bool { return n["console_enabled"] == true })
	c = h.expect(http.StatusOK, "GET", "/v1/nodes/"+other+"/states/console", latest, nil).json(t)
	info, _ := c["console_info"].(map[string]any)
	if info["type"] != "shellinabox" || info["url"] != h.srv.URL+"/#/node/"+other+"?tab=console" {
		t.Fatalf("shellinabox console = %v", c)
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+other+"/states/console", latest, map[string]any{"enabled": false})
	wait(other, func(n map[string]any) bool { return n["console_enabled"] == false })

	// A BMC without SOL: 202, then console_enabled false and last_error.
	nosol := h.createNode(map[string]any{"driver": "ipmi", "driver_info": plain.DriverInfo(), "console_interface": "ipmitool-socat"})["uuid"].(string)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+nosol+"/states/console", latest, map[string]any{"enabled": true})
	n = wait(nosol, func(n map[string]any) bool { return n["last_error"] != nil })
	if n["console_enabled"] != false || !strings.HasPrefix(n["last_error"].(string), "Error enabling the console on node "+nosol+". Reason: IPMI Serial-over-LAN activation failed") {
		t.Fatalf("BMC without SOL: %v %v", n["console_enabled"], n["last_error"])
	}
	if c := h.expect(http.StatusOK, "GET", "/v1/nodes/"+nosol+"/states/console", latest, nil).json(t); c["console_enabled"] != false || c["console_info"] != nil {
		t.Fatalf("GET after failed enable = %v", c)
	}

	// Validation answers at once: IPMI 1.5, missing address.
	v15 := sim.DriverInfo()
	v15["ipmi_protocol_version"] = "1.5"
	old := h.createNode(map[string]any{"driver": "ipmi", "driver_info": v15, "console_interface": "ipmitool-socat"})["uuid"].(string)
	r := h.expect(http.StatusBadRequest, "PUT", "/v1/nodes/"+old+"/states/console", latest, map[string]any{"enabled": true})
	if got := r.faultstring(t); !strings.HasPrefix(got, "Serial over lan only works with IPMI protocol version 2.0") {
		t.Fatalf("IPMI 1.5: %q", got)
	}
	noaddr := h.createNode(map[string]any{"driver": "ipmi", "console_interface": "ipmitool-socat"})["uuid"].(string)
	r = h.expect(http.StatusBadRequest, "PUT", "/v1/nodes/"+noaddr+"/states/console", latest, map[string]any{"enabled": true})
	if got := r.faultstring(t); !strings.Contains(got, "ipmi_address") {
		t.Fatalf("no address: %q", got)
	}
}

// TestConsoleStreamOverSOL: the web console's WebSocket on the real
// conductor and a real BMC (ipmi_sim SOL): scrollback, live output, typing
// reaching the machine, and the socket closing with 1000 on disable.
func TestConsoleStreamOverSOL(t *testing.T) {
	port := ipmisim.NewSerialPort(t)
	sim := ipmisim.StartSimSOL(t, port.Addr())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := ipmi.New(ipmi.Config{})
	t.Cleanup(func() { d.CloseSessions(t.Context()) })
	cfg := engine.Config{Hostname: "test-conductor", ConsoleListen: "127.0.0.1", ConsolePorts: console.Ports{Min: p, Max: p}}
	hw := []*engine.HardwareType{engine.NewIPMIHardware(d, d, ipmi.Properties())}
	h := serveAPI(t, cfg, hw)
	// The same conductor behind a server whose console stream uses it, as
	// the appliance wires it.
	h.srv = httptest.NewServer(New(h.cond, Options{Logger: enginetest.Quiet(), LockRetry: 5 * time.Millisecond, Console: h.cond}))
	t.Cleanup(h.srv.Close)

	id := h.createNode(map[string]any{"driver": "ipmi", "driver_info": sim.DriverInfo(), "console_interface": "ipmitool-shellinabox"})["uuid"].(string)
	// Not enabled: the handshake is refused with Ironic's words.
	if _, status, body := dialConsole(t, h, id, "", nil); status != http.StatusBadRequest || !strings.Contains(body, "Console access is not enabled on node") {
		t.Fatalf("stream of a disabled console: %d %s", status, body)
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/console", latest, map[string]any{"enabled": true})
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t); n["console_enabled"] == true {
			break
		} else if time.Now().After(end) {
			t.Fatalf("console not enabled: %v", n["last_error"])
		}
	}
	serial := port.Accept(t)
	serial.Write([]byte("BIOS POST done\r\n"))
	var cc *consoleClient
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, status, body := dialConsole(t, h, id, "", nil)
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("dial: %d %s", status, body)
		}
		// The scrollback comes first; retry until the output reached it.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, b, err := c.c.Read(ctx)
		cancel()
		if err == nil && strings.Contains(string(b), "BIOS POST done") {
			cc = c
			break
		}
		c.c.CloseNow()
		if time.Now().After(end) {
			t.Fatal("scrollback never held the machine's output")
		}
	}
	if !cc.hello.Write {
		t.Fatalf("hello %+v", cc.hello)
	}
	serial.Write([]byte("login: "))
	cc.readUntil("login: ")
	if err := cc.send([]byte("root\r")); err != nil {
		t.Fatal(err)
	}
	serial.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(serial, got); err != nil || string(got) != "root\r" {
		t.Fatalf("machine got %q, %v", got, err)
	}
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/console", latest, map[string]any{"enabled": false})
	if code, reason := cc.closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("on disable: %v %q", code, reason)
	}
}
