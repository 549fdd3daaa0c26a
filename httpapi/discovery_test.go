package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"castiron/engine"
)

// newDiscoveryAPI is the agent API with discovery on (fake-hardware
// discovered nodes) and tweak's settings.
func newDiscoveryAPI(t *testing.T, tweak func(c *engine.Config), opts ...func(*Options)) *apiHarness {
	t.Helper()
	rec := &storeRecorder{}
	h := newAPIWith(t, func(c *engine.Config) {
		c.AgentPowerOffWait = 50 * time.Millisecond
		c.Discovery = true
		c.DiscoveryDriver = "fake-hardware"
		if tweak != nil {
			tweak(c)
		}
	}, append(opts, func(o *Options) { o.BootRecorder = rec })...)
	rec.st = h.store
	return h
}

// machine is an inventory body of an unknown machine: its MACs, BMC
// address read in-band, serial and system UUID.
func machine(bmc, serial, sysUUID string, macs ...string) map[string]any {
	b := inventoryBody(macs...)
	inv := b["inventory"].(map[string]any)
	inv["bmc_address"], inv["bmc_v6address"], inv["bmc_mac"] = bmc, "::/0", "02:00:00:00:00:09"
	inv["system_vendor"] = map[string]any{"manufacturer": "QEMU", "product_name": "Standard PC", "serial_number": serial, "system_uuid": sysUUID}
	inv["hostname"] = ""
	return b
}

func (h *apiHarness) nodeList(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, n := range h.expect(http.StatusOK, "GET", "/v1/nodes/detail", latest, nil).json(t)["nodes"].([]any) {
		out = append(out, n.(map[string]any))
	}
	return out
}

// waitIdle waits until the node has no reservation and returns it.
func (h *apiHarness) waitIdle(t *testing.T, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)
		if n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still reserved", id)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// An unknown machine becomes a node in enroll: driver, ports (boot NIC
// pxe_enabled), properties, inventory with plugin_data.auto_discovered,
// a name from its serial; booting again (by MAC, by BMC address, by
// serial) never makes a second node.
func TestDiscoveryEnrollsOnce(t *testing.T) {
	h := newDiscoveryAPI(t, nil)
	const mac0, mac1 = "52:54:00:d1:00:01", "52:54:00:d1:00:02"
	body := machine("10.205.9.2", "SRV-0001", "0a2d5bf2-0000-4d6a-9c11-5d0b2f2a0c01", mac0, mac1)

	// Discovery makes the boot gate answer unknown MACs.
	if _, ok := h.cond.BootTarget(context.Background(), mustMAC(t, "52:54:00:d1:ff:ff")); !ok {
		t.Fatal("boot gate refuses unknown MACs with discovery on")
	}
	r := h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", body).json(t)
	id := r["node"].(map[string]any)["uuid"].(string)
	if r["config"].(map[string]any)["agent_token"] == "" {
		t.Error("no agent token for the discovered node")
	}
	n := h.waitIdle(t, id)
	if n["provision_state"] != "enroll" || n["driver"] != "fake-hardware" || n["name"] != "SRV-0001" || n["inspect_interface"] != "agent" {
		t.Errorf("discovered node: %v %v %v %v", n["provision_state"], n["driver"], n["name"], n["inspect_interface"])
	}
	if n["driver_internal_info"].(map[string]any)["auto_discovered"] != true || n["properties"].(map[string]any)["cpus"] != float64(2) {
		t.Errorf("node: dii %v properties %v", n["driver_internal_info"], n["properties"])
	}
	if pxe := h.portsPXE(t, id); len(pxe) != 2 || !pxe[mac0] || pxe[mac1] {
		t.Errorf("ports %v", pxe)
	}
	inv := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/inventory", latest, nil).json(t)
	if inv["plugin_data"].(map[string]any)["auto_discovered"] != true {
		t.Errorf("plugin_data %v", inv["plugin_data"])
	}
	hist := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/history", latest, nil).json(t)["history"].([]any)
	if len(hist) == 0 || !strings.HasPrefix(hist[0].(map[string]any)["event"].(string), "Discovered: machine with MACs "+mac0) {
		t.Errorf("history %v", hist)
	}

	// The same machine again: by MAC (its ramdisk posting twice), from
	// another NIC with the same BMC, and with only its serial in common.
	again := []map[string]any{
		machine("10.205.9.2", "SRV-0001", "0a2d5bf2-0000-4d6a-9c11-5d0b2f2a0c01", mac0, mac1),
		machine("10.205.9.2", "", "", "52:54:00:d1:00:03"),
		machine("0.0.0.0", "", "0a2d5bf2-0000-4d6a-9c11-5d0b2f2a0c01", "52:54:00:d1:00:04"),
		machine("0.0.0.0", "SRV-0001", "", "52:54:00:d1:00:05"),
	}
	for i, b := range again {
		r := h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", b).json(t)
		if got := r["node"].(map[string]any)["uuid"]; got != id {
			t.Fatalf("boot %d: node %v, want the discovered %s", i+2, got, id)
		}
		h.waitIdle(t, id)
	}
	if nodes := h.nodeList(t); len(nodes) != 1 {
		t.Fatalf("%d nodes after the same machine booted 5 times", len(nodes))
	}
	// The gate lets the discovered machine boot again, by its MAC.
	if d, ok := h.cond.BootTarget(context.Background(), mustMAC(t, mac0)); !ok || d.NodeUUID != id {
		t.Errorf("gate for the discovered node's MAC: %+v %v", d, ok)
	}

	// Once managed, it is not discovered again whatever NIC it boots from.
	h.moveTo(id, "manage", "manageable")
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection", "1.84", machine("10.205.9.2", "", "", "52:54:00:d1:00:06"))
	if _, ok := h.cond.BootTarget(context.Background(), mustMAC(t, mac0)); ok {
		t.Error("gate boots a manageable node's MAC")
	}
	if nodes := h.nodeList(t); len(nodes) != 1 {
		t.Fatalf("%d nodes after a managed machine booted unknown NIC", len(nodes))
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Without discovery an unknown machine's data is refused, as before.
func TestDiscoveryOff(t *testing.T) {
	h := newAgentAPI(t)
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection", "1.84", machine("10.205.9.2", "S", "", "52:54:00:d2:00:01"))
	if len(h.nodeList(t)) != 0 {
		t.Error("a node was made without discovery")
	}
}

// A flood of unknown machines stops at the cap and at the rate: 503 (the
// agent retries later), no node beyond them.
func TestDiscoveryLimits(t *testing.T) {
	h := newDiscoveryAPI(t, func(c *engine.Config) { c.DiscoveryMaxEnroll = 2 })
	for i := 0; i < 2; i++ {
		h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", machine("", "", "", "52:54:00:d3:00:0"+string(rune('1'+i))))
	}
	r := h.expect(http.StatusServiceUnavailable, "POST", "/v1/continue_inspection", "1.84", machine("", "", "", "52:54:00:d3:00:09"))
	if fs := r.faultstring(t); !strings.Contains(fs, "2 nodes wait in enroll") {
		t.Errorf("cap: %s", fs)
	}
	if _, ok := h.cond.BootTarget(context.Background(), mustMAC(t, "52:54:00:d3:00:09")); ok {
		t.Error("gate boots unknown MACs at the cap")
	}
	if n := len(h.nodeList(t)); n != 2 {
		t.Errorf("%d nodes at a cap of 2", n)
	}

	h2 := newDiscoveryAPI(t, func(c *engine.Config) { c.DiscoveryRate = 1 })
	h2.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", machine("", "", "", "52:54:00:d4:00:01"))
	r = h2.expect(http.StatusServiceUnavailable, "POST", "/v1/continue_inspection", "1.84", machine("", "", "", "52:54:00:d4:00:02"))
	if fs := r.faultstring(t); !strings.Contains(fs, "more than 1 new nodes per minute") {
		t.Errorf("rate: %s", fs)
	}
}

// A rule that sets BMC credentials sends the discovered node on to
// manage by itself; without credentials it stays in enroll unless
// --discovery-manage.
func TestDiscoveryAutoManage(t *testing.T) {
	h := newDiscoveryAPI(t, nil, ceiling(96))
	h.expect(http.StatusCreated, "POST", "/v1/inspection_rules", v96, map[string]any{
		"description": "site BMC credentials", "sensitive": true,
		"conditions": []any{map[string]any{"op": "is-true", "args": map[string]any{"value": "{plugin_data[auto_discovered]}"}},
			map[string]any{"op": "eq", "args": map[string]any{"values": []any{"{inventory[system_vendor][serial_number]}", "MANAGE-ME"}}}},
		"actions": []any{map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_username", "value": "admin"}},
			map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_password", "value": "secret"}}},
	})
	r := h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", machine("", "MANAGE-ME", "", "52:54:00:d5:00:01")).json(t)
	id := r["node"].(map[string]any)["uuid"].(string)
	n := h.waitState(id, "manageable")
	if n["driver_info"].(map[string]any)["ipmi_password"] != "******" {
		t.Errorf("driver_info %v", n["driver_info"])
	}
	r = h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", machine("", "OTHER", "", "52:54:00:d5:00:02")).json(t)
	other := r["node"].(map[string]any)["uuid"].(string)
	if n := h.waitIdle(t, other); n["provision_state"] != "enroll" {
		t.Errorf("node without credentials went to %v", n["provision_state"])
	}

	hm := newDiscoveryAPI(t, func(c *engine.Config) { c.DiscoveryManage = true })
	r = hm.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", machine("", "X", "", "52:54:00:d5:00:03")).json(t)
	hm.waitState(r["node"].(map[string]any)["uuid"].(string), "manageable")
}

// The ramdisk of a discovered node is told to power off once the node is
// done with (castiron has no BMC credentials to do it).
func TestDiscoveredAgentPowersOff(t *testing.T) {
	h := newDiscoveryAPI(t, nil)
	r := h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "1.84", machine("", "S", "", "52:54:00:d6:00:01")).json(t)
	id := r["node"].(map[string]any)["uuid"].(string)
	token := r["config"].(map[string]any)["agent_token"].(string)
	h.waitIdle(t, id)
	instr := h.expect(http.StatusAccepted, "POST", "/v1/heartbeat/"+id, latest, map[string]any{"agent_token": token, "callback_url": ""}).json(t)
	if instr["command"] != "power_off" {
		t.Errorf("instruction %v", instr)
	}
}
