package httpapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/pxe/boot"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// storeRecorder writes timeline events straight to the store, so tests can
// read them back at once (st is set once the harness exists).
type storeRecorder struct{ st *storage.SQLite }

func (r *storeRecorder) Record(ctx context.Context, ev boot.Event) {
	_ = r.st.AddBootEvents(ctx, []storage.BootEvent{{At: ev.At, MAC: ev.MAC, NodeUUID: ev.NodeUUID, Kind: ev.Kind, Detail: ev.Detail}})
}

// newAgentAPI is the API with the agent-facing parts wired: a timeline
// recorder and a short power-off grace.
func newAgentAPI(t *testing.T) *apiHarness {
	t.Helper()
	rec := &storeRecorder{}
	h := newAPIWith(t, func(c *engine.Config) {
		c.AgentPowerOffWait = 50 * time.Millisecond
		c.ImageBaseURL = "http://10.0.0.1:6385/images"
	}, func(o *Options) { o.BootRecorder = rec })
	rec.st = h.store
	return h
}

func inventoryBody(macs ...string) map[string]any {
	var ifaces []any
	for i, m := range macs {
		ifaces = append(ifaces, map[string]any{"name": "eth" + string(rune('0'+i)), "mac_address": m, "has_carrier": true})
	}
	return map[string]any{
		"inventory": map[string]any{
			"interfaces": ifaces,
			"cpu":        map[string]any{"count": 2, "architecture": "x86_64", "model_name": "QEMU", "frequency": "2400", "flags": []any{}},
			"memory":     map[string]any{"total": 490000000, "physical_mb": 512},
			"disks": []any{
				map[string]any{"name": "/dev/vda", "size": 5 << 30, "rotational": false, "model": ""},
				map[string]any{"name": "/dev/vdb", "size": 1 << 30, "rotational": true, "model": ""},
				map[string]any{"name": "/dev/vdc", "size": 20 << 30, "rotational": true, "model": ""},
			},
			"system_vendor": map[string]any{"manufacturer": "QEMU", "product_name": "Standard PC", "serial_number": "S1"},
			"boot":          map[string]any{"current_boot_mode": "bios", "pxe_interface": macs[0]},
			"hostname":      "localhost",
			"bmc_address":   nil,
		},
		"boot_interface": "01-" + strings.ReplaceAll(macs[0], ":", "-"),
		"root_disk":      map[string]any{"name": "/dev/vda"},
	}
}

// agentNode makes a fake-hardware node with agent inspection and direct
// deploy, with one port, in manageable.
func agentNode(h *apiHarness, mac string) string {
	n := h.createNode(map[string]any{"inspect_interface": "agent", "deploy_interface": "direct"})
	id := n["uuid"].(string)
	if mac != "" {
		h.expect(http.StatusCreated, "POST", "/v1/ports", latest, map[string]any{"node_uuid": id, "address": mac})
	}
	h.moveTo(id, "manage", "manageable")
	return id
}

// portsPXE is the node's ports: MAC -> pxe_enabled.
func (h *apiHarness) portsPXE(t *testing.T, id string) map[string]bool {
	t.Helper()
	pxe := map[string]bool{}
	for _, p := range h.expect(http.StatusOK, "GET", "/v1/ports/detail?node="+id, latest, nil).json(t)["ports"].([]any) {
		pm := p.(map[string]any)
		pxe[pm["address"].(string)] = pm["pxe_enabled"].(bool)
	}
	return pxe
}

func TestContinueInspectionAppliesInventory(t *testing.T) {
	h := newAgentAPI(t)
	const bootMAC, otherMAC = "52:54:00:aa:00:01", "52:54:00:aa:00:02"
	id := agentNode(h, bootMAC)
	// An operator value is kept.
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "add", "path": "/properties/cpus", "value": 64}})
	h.moveTo(id, "inspect", "inspect wait")

	gate := func(mac string) bool {
		hw, _ := net.ParseMAC(mac)
		_, ok := h.cond.BootTarget(context.Background(), hw)
		return ok
	}
	if !gate(bootMAC) || gate("52:54:00:ff:ff:ff") {
		t.Fatalf("boot gate: node MAC allowed %v, unknown MAC allowed %v", gate(bootMAC), gate("52:54:00:ff:ff:ff"))
	}

	// No version header: ironic-inspector's contract, {"uuid": ...}.
	r := h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "", inventoryBody(bootMAC, otherMAC)).json(t)
	if r["uuid"] != id {
		t.Fatalf("answer %v", r)
	}
	n := h.waitState(id, "manageable")
	props := n["properties"].(map[string]any)
	want := map[string]any{"cpus": float64(64), "memory_mb": float64(512), "local_gb": float64(4), "cpu_arch": "x86_64", "capabilities": "boot_mode:bios"}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("properties[%s] = %v, want %v", k, props[k], v)
		}
	}
	if n["power_state"] != "power off" || n["inspection_finished_at"] == nil {
		t.Errorf("power %v finished %v", n["power_state"], n["inspection_finished_at"])
	}
	if _, ok := n["driver_internal_info"].(map[string]any)["agent_secret_token"]; ok {
		t.Error("agent token left on the node")
	}
	if pxe := h.portsPXE(t, id); len(pxe) != 2 || !pxe[bootMAC] || pxe[otherMAC] {
		t.Errorf("ports %v", pxe)
	}
	inv := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/inventory", latest, nil).json(t)
	if len(inv["inventory"].(map[string]any)["disks"].([]any)) != 3 || inv["plugin_data"].(map[string]any)["boot_interface"] == nil {
		t.Errorf("inventory %v", inv)
	}
	if gate(bootMAC) {
		t.Error("boot gate still allows a manageable node")
	}
	tl := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/boot_timeline", latest, nil).json(t)["events"].([]any)
	if len(tl) == 0 || tl[len(tl)-1].(map[string]any)["event"] != boot.AgentInspect {
		t.Errorf("timeline %v", tl)
	}
	// The fleet's view: this node's newest event, once.
	var mine []any
	for _, e := range h.expect(http.StatusOK, "GET", "/v1/boot_timeline/latest", latest, nil).json(t)["nodes"].([]any) {
		if e.(map[string]any)["node_uuid"] == id {
			mine = append(mine, e)
		}
	}
	if len(mine) != 1 || mine[0].(map[string]any)["event"] != boot.AgentInspect {
		t.Errorf("latest %v", mine)
	}
	h.expect(http.StatusBadRequest, "GET", "/v1/boot_timeline/latest?since=yesterday", latest, nil)
	// A late callback changes nothing.
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection", "", inventoryBody(bootMAC))
}

func TestContinueInspectionVersionsAndToken(t *testing.T) {
	h := newAgentAPI(t)
	id := agentNode(h, "52:54:00:aa:01:01")
	h.moveTo(id, "inspect", "inspect wait")
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection", "1.50", inventoryBody("52:54:00:aa:01:01"))
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection?node_uuid="+id, "1.1", inventoryBody("52:54:00:aa:01:01"))
	r := h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection?node_uuid="+id, "1.84", inventoryBody("52:54:00:aa:01:01")).json(t)
	cfg := r["config"].(map[string]any)
	if r["node"].(map[string]any)["uuid"] != id || len(cfg["agent_token"].(string)) < 32 || cfg["agent_token_required"] != true {
		t.Fatalf("1.84 answer %v", r)
	}
	h.waitState(id, "manageable")
}

func TestContinueInspectionBadInput(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:02:01"
	id := agentNode(h, mac)
	h.moveTo(id, "inspect", "inspect wait")
	bad := []any{
		"{not json", "[]", `"x"`, "null", `{}`, `{"inventory": []}`,
		`{"inventory": {}}`, `{"inventory": {"interfaces": []}}`,
		`{"inventory": {"interfaces": [{"name": "eth0"}]}}`,
		`{"inventory": {"interfaces": [{"mac_address": 5}]}}`,
		`{"inventory": {"interfaces": [{"mac_address": "` + mac + `"}], "bmc_address": 7}}`,
		`{"inventory": {"interfaces": [{"mac_address": "` + mac + `"}], "cpu": {"count": "two"}}}`,
		`{"inventory": {"interfaces": [{"mac_address": "` + mac + `"}], "disks": [{"name": "/dev/sda", "size": -1}]}}`,
		`{"inventory": {"interfaces": [{"mac_address": "` + mac + `"}], "memory": {"total": -5}}}`,
		`{"inventory": {"interfaces": [{"mac_address": "not-a-mac"}]}}`,
		`{"inventory": {"interfaces": [{"mac_address": "` + mac + `"}]}} trailing`,
		`{"inventory": {"interfaces": [{"mac_address": "` + mac + `", "name": "` + strings.Repeat("x", 5000) + `"}]}}`,
	}
	for _, b := range bad {
		r := h.do("POST", "/v1/continue_inspection", "", b)
		if r.status != http.StatusBadRequest {
			t.Errorf("%.80v: status %d: %s", b, r.status, r.body)
		}
	}
	// Too large.
	big := `{"inventory": {"interfaces": [{"mac_address": "` + mac + `"}], "x": "` + strings.Repeat("a", MaxBodyBytes) + `"}}`
	if r := h.do("POST", "/v1/continue_inspection", "", big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", r.status)
	}
	n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)
	if n["provision_state"] != "inspect wait" || len(n["properties"].(map[string]any)) != 0 {
		t.Fatalf("bad input changed the node: %v %v", n["provision_state"], n["properties"])
	}
	// Unknown MAC with no portless inspection running: 404.
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection", "", inventoryBody("52:54:00:ee:ee:ee"))
	// The agent reporting an error fails inspection.
	body := inventoryBody(mac)
	body["error"] = "collecting disks failed"
	h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "", body)
	h.failedWith(id, "inspect failed", "collecting disks failed")
}

func TestInspectionAbortRefusesLateCallback(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:03:01"
	id := agentNode(h, mac)
	h.moveTo(id, "inspect", "inspect wait")
	start := time.Now()
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "abort"})
	n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)
	if n["provision_state"] != "inspect failed" {
		t.Fatalf("right after the abort's 202 the node is %v (%v)", n["provision_state"], time.Since(start))
	}
	hw, _ := net.ParseMAC(mac)
	if _, ok := h.cond.BootTarget(context.Background(), hw); ok {
		t.Error("boot gate still answers an aborted node")
	}
	h.expect(http.StatusNotFound, "POST", "/v1/continue_inspection", "", inventoryBody(mac))
	n = h.waitState(id, "inspect failed")
	if n["power_state"] != "power off" || len(n["properties"].(map[string]any)) != 0 {
		t.Errorf("after abort: power %v properties %v", n["power_state"], n["properties"])
	}
}

func TestPortlessInspection(t *testing.T) {
	h := newAgentAPI(t)
	id := agentNode(h, "")
	h.moveTo(id, "inspect", "inspect wait")
	hw, _ := net.ParseMAC("52:54:00:aa:04:01")
	if d, ok := h.cond.BootTarget(context.Background(), hw); !ok || d.NodeUUID != "" {
		t.Fatalf("unknown MAC during a portless inspection: %v %v", d, ok)
	}
	h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "", inventoryBody("52:54:00:aa:04:01"))
	h.waitState(id, "manageable")
	if _, ok := h.cond.BootTarget(context.Background(), net.HardwareAddr{0x52, 0x54, 0, 0xaa, 9, 9}); ok {
		t.Error("unknown MACs still allowed after the inspection ended")
	}
}

// agent plays the ramdisk against the API.
type agent struct {
	h     *apiHarness
	node  string
	token string
}

func (a *agent) lookup(mac string) {
	a.h.t.Helper()
	r := a.h.expect(http.StatusOK, "GET", "/v1/lookup?addresses="+mac, "1.84", nil).json(a.h.t)
	a.node = r["node"].(map[string]any)["uuid"].(string)
	a.token = r["config"].(map[string]any)["agent_token"].(string)
}

func (a *agent) beat(rep *protocol.StepReport) protocol.Instruction {
	a.h.t.Helper()
	r := a.h.expect(http.StatusAccepted, "POST", "/v1/heartbeat/"+a.node, "1.84", protocol.Heartbeat{AgentToken: a.token, AgentVersion: "test", Step: rep})
	var in protocol.Instruction
	if err := json.Unmarshal(r.body, &in); err != nil {
		a.h.t.Fatal(err)
	}
	return in
}

func TestAgentCleaningThroughHeartbeats(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:05:01"
	id := agentNode(h, mac)
	h.moveTo(id, "provide", "clean wait")
	h.expect(http.StatusNotFound, "GET", "/v1/lookup?addresses=52:54:00:00:00:99", "1.84", nil)
	h.expect(http.StatusBadRequest, "GET", "/v1/lookup", "1.84", nil)
	h.expect(http.StatusNotFound, "GET", "/v1/lookup?addresses="+mac, "1.21", nil)
	a := &agent{h: h}
	a.lookup(mac)
	// The token is issued once per boot: a second lookup gets the node with
	// the token withheld, as Ironic's get_node_with_token answers.
	again := h.expect(http.StatusOK, "GET", "/v1/lookup?addresses="+mac, "1.84", nil).json(t)
	cfg := again["config"].(map[string]any)
	if cfg["agent_token"] != "******" || again["node"].(map[string]any)["uuid"] != id {
		t.Errorf("second lookup: %v", again)
	}
	if dii := again["node"].(map[string]any)["driver_internal_info"].(map[string]any); dii["agent_secret_token"] != nil {
		t.Errorf("lookup driver_internal_info carries the token: %v", dii)
	}
	// Every key Ironic's lookup config has, so agents need no defaults.
	for _, k := range []string{"metrics", "metrics_statsd", "heartbeat_timeout", "agent_containers", "agent_token", "agent_token_required",
		"agent_md5_checksum_enable", "disable_deep_image_inspection", "permitted_image_formats", "agent_skip_bmc_detect",
		"enable_bios_bootloader_install", "tls_min_version", "tls_cipher_suites"} {
		if _, ok := cfg[k]; !ok {
			t.Errorf("lookup config lacks %s: %v", k, cfg)
		}
	}
	if n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t); n["driver_internal_info"].(map[string]any)["agent_secret_token"] != "******" {
		t.Errorf("node view shows the agent token: %v", n["driver_internal_info"])
	}
	h.expect(http.StatusBadRequest, "POST", "/v1/heartbeat/"+id, "1.84", protocol.Heartbeat{AgentToken: "wrong"})
	h.expect(http.StatusBadRequest, "POST", "/v1/heartbeat/"+id, "1.84", protocol.Heartbeat{})
	h.expect(http.StatusBadRequest, "POST", "/v1/heartbeat/"+id, "1.30", protocol.Heartbeat{AgentToken: a.token, AgentVersion: "x"})

	in := a.beat(nil)
	if in.Command != protocol.CmdRunStep || in.Step.Name != protocol.StepEraseDevicesMetadata || in.Step.ID == "" {
		t.Fatalf("first instruction %+v", in)
	}
	step := in.Step
	in = a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepRunning, Progress: &protocol.Progress{Done: 1, Total: 3, Unit: "disks", Percent: 33.3}})
	if in.Command != protocol.CmdWait {
		t.Fatalf("while running: %+v", in)
	}
	n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)
	cs := n["clean_step"].(map[string]any)
	if cs["step"] != protocol.StepEraseDevicesMetadata || cs["progress"].(map[string]any)["percent"] != 33.3 {
		t.Fatalf("clean_step %v", cs)
	}
	in = a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepSucceeded, Result: map[string]any{"disks": 3}})
	if in.Command != protocol.CmdPowerOff {
		t.Fatalf("after the last step: %+v", in)
	}
	n = h.waitState(id, "available")
	if len(n["clean_step"].(map[string]any)) != 0 || n["power_state"] != "power off" {
		t.Errorf("after cleaning: clean_step %v power %v", n["clean_step"], n["power_state"])
	}
	// The old token is gone with the ramdisk.
	h.expect(http.StatusBadRequest, "POST", "/v1/heartbeat/"+id, "1.84", protocol.Heartbeat{AgentToken: a.token})
}

func TestAgentCleanStepFailure(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:06:01"
	id := agentNode(h, mac)
	h.moveTo(id, "provide", "clean wait")
	a := &agent{h: h}
	a.lookup(mac)
	step := a.beat(nil).Step
	if in := a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepFailed, Error: "disk /dev/vda is read-only"}); in.Command != protocol.CmdPowerOff {
		t.Fatalf("after failure: %+v", in)
	}
	h.failedWith(id, "clean failed", "read-only")
}

func TestAgentDeployAndAbort(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:07:01"
	id := agentNode(h, mac)
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "add", "path": "/instance_info/image_source", "value": "focal.qcow2"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		map[string]any{"op": "add", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("ab", 32)},
		map[string]any{"op": "add", "path": "/properties/root_device", "value": map[string]any{"serial": "DISK2"}},
	})
	h.db(id, func(n *storage.Node) { n.AutomatedClean = boolPtr(false) })
	h.moveTo(id, "provide", "available")
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active", "configdrive": "H4sIAAAAAAAA/wMAAAAAAAAAAAA="})
	h.waitState(id, "wait call-back")
	a := &agent{h: h}
	a.lookup(mac)
	in := a.beat(nil)
	if in.Command != protocol.CmdRunStep || in.Step.Name != protocol.StepWriteImage {
		t.Fatalf("deploy instruction %+v", in)
	}
	args := in.Step.Args
	if args[protocol.ArgImageURL] != "http://10.0.0.1:6385/images/focal.qcow2" || args[protocol.ArgImageHashAlgo] != "sha256" ||
		args[protocol.ArgConfigDrive] != "H4sIAAAAAAAA/wMAAAAAAAAAAAA=" || args[protocol.ArgRootDevice].(map[string]any)["serial"] != "DISK2" {
		t.Fatalf("write_image args %v", args)
	}
	a.beat(&protocol.StepReport{ID: in.Step.ID, Status: protocol.StepRunning, Progress: &protocol.Progress{Done: 50, Total: 100, Unit: "bytes", Percent: 50}})
	if ds := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)["deploy_step"].(map[string]any); ds["step"] != protocol.StepWriteImage {
		t.Fatalf("deploy_step %v", ds)
	}
	if in := a.beat(&protocol.StepReport{ID: in.Step.ID, Status: protocol.StepSucceeded}); in.Command != protocol.CmdPowerOff {
		t.Fatalf("after write: %+v", in)
	}
	n := h.waitState(id, "active")
	if n["power_state"] != "power on" {
		t.Errorf("deployed node power %v", n["power_state"])
	}
	bd := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/management/boot_device", latest, nil).json(t)
	if bd["boot_device"] != "disk" {
		t.Errorf("boot device %v", bd)
	}

	// Rebuild, then abort in wait call-back: deploy failed; the agent is told to abort.
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "rebuild"})
	h.waitState(id, "wait call-back")
	a.lookup(mac)
	step := a.beat(nil).Step
	a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepRunning})
	h.moveTo(id, "abort", "deploy failed")
	if in := a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepRunning}); in.Command != protocol.CmdAbort {
		t.Fatalf("heartbeat after abort: %+v", in)
	}
}

func TestAbortAfterNonInterruptibleStep(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:08:01"
	id := agentNode(h, mac)
	h.moveTo(id, "provide", "clean wait")
	// Make the planned step non-interruptible, as a firmware step would be.
	h.db(id, func(n *storage.Node) {
		steps := n.DriverInternalInfo["agent_steps"].([]any)
		steps[0].(map[string]any)["abortable"] = false
	})
	a := &agent{h: h}
	a.lookup(mac)
	step := a.beat(nil).Step
	if step.Abortable {
		t.Fatal("step still abortable")
	}
	h.expect(http.StatusForbidden, "DELETE", "/v1/nodes/"+id+"/states/provision", latest, nil)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "abort"})
	if n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t); n["provision_state"] != "clean wait" {
		t.Fatalf("abort of a non-interruptible step changed the state at once: %v", n["provision_state"])
	}
	if in := a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepSucceeded}); in.Command != protocol.CmdAbort {
		t.Fatalf("after the step: %+v", in)
	}
	h.failedWith(id, "clean failed", "aborted")
}

func boolPtr(b bool) *bool { return &b }

// TestAgentCleaningDisablePowerOff is 1.95 through the agent: a node with
// disable_power_off is never told to power off (nor to abort, which powers
// off): after its last step, or a failed one, the agent waits, and the
// conductor reboots the node in place; it ends on, not off.
func TestAgentCleaningDisablePowerOff(t *testing.T) {
	h := newAgentAPI(t)
	const mac = "52:54:00:aa:05:09"
	id := agentNode(h, mac)
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "add", "path": "/disable_power_off", "value": true}})
	h.moveTo(id, "provide", "clean wait")
	a := &agent{h: h}
	a.lookup(mac)
	step := a.beat(nil).Step
	in := a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepSucceeded})
	if in.Command != protocol.CmdWait || !strings.Contains(in.Reason, "disable_power_off") {
		t.Fatalf("after the last step: %+v", in)
	}
	n := h.waitState(id, "available")
	if n["power_state"] != "power on" {
		t.Errorf("after cleaning: power %v, want power on", n["power_state"])
	}

	// A failed step: the agent waits, the node stays on in clean failed.
	h.moveTo(id, "manage", "manageable")
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean",
		"clean_steps": []any{map[string]any{"interface": "deploy", "step": protocol.StepEraseDevicesMetadata}}})
	h.waitState(id, "clean wait")
	a = &agent{h: h}
	a.lookup(mac)
	step = a.beat(nil).Step
	if in := a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepFailed, Error: "disk gone"}); in.Command != protocol.CmdWait {
		t.Fatalf("after a failed step: %+v", in)
	}
	n = h.waitState(id, "clean failed")
	if n["power_state"] != "power on" {
		t.Errorf("after the failure: power %v, want power on", n["power_state"])
	}
	if in := a.beat(nil); in.Command != protocol.CmdWait {
		t.Errorf("heartbeat in clean failed: %+v (an abort would power off)", in)
	}
}
