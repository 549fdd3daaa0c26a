package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// swraidNode is a fake-hardware node with the agent deploy and raid
// interfaces, in manageable, with target_raid_config cfg.
func swraidNode(t *testing.T, h *harness, cfg map[string]any) *storage.Node {
	t.Helper()
	return h.nodeIn(t, Manageable, func(n *storage.Node) {
		n.DeployInterface = "direct"
		n.RAIDInterface = "agent"
		n.TargetRAIDConfig = storage.JSONObject(cfg)
	})
}

// agentClean starts a manual clean with steps and plays the agent: lookup,
// then heartbeats (with report, when given) until the conductor answers
// something other than wait. It returns that instruction and the token.
func agentClean(t *testing.T, h *harness, uuid string, steps ...map[string]any) (protocol.Instruction, string) {
	t.Helper()
	ctx := context.Background()
	if err := h.c.Provision(ctx, uuid, ProvisionRequest{Target: "clean", CleanSteps: steps}); err != nil {
		t.Fatalf("clean: %v", err)
	}
	h.waitState(t, uuid, CleanWait)
	_, token, err := h.c.AgentLookup(ctx, nil, uuid)
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	instr, err := h.c.AgentHeartbeat(ctx, uuid, protocol.Heartbeat{AgentToken: token})
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	return instr, token
}

func rootRAID1() map[string]any {
	return map[string]any{"logical_disks": []any{map[string]any{
		"size_gb": float64(10), "raid_level": "1", "controller": "software", "is_root_volume": true, "volume_name": "root",
	}}}
}

// TestAgentRAIDCreateAndDelete: create_configuration goes to the agent with
// the target config in its arguments; its result becomes raid_config, the
// root volume's hint properties.root_device, raid_level a capability;
// delete_configuration empties raid_config and drops root_device.
func TestAgentRAIDCreateAndDelete(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AgentPowerOffWait = time.Millisecond })
	ctx := context.Background()
	n := swraidNode(t, h, rootRAID1())
	instr, token := agentClean(t, h, n.UUID, map[string]any{"interface": "raid", "step": "create_configuration", "args": map[string]any{"create_nonroot_volumes": false}})
	if instr.Command != protocol.CmdRunStep || instr.Step == nil || instr.Step.Interface != "raid" || instr.Step.Name != "create_configuration" {
		t.Fatalf("instruction %+v, want run_step raid.create_configuration", instr)
	}
	cfg, _ := instr.Step.Args[protocol.ArgTargetRAIDConfig].(map[string]any)
	if lds, _ := cfg["logical_disks"].([]any); len(lds) != 1 || instr.Step.Args[protocol.ArgNodeUUID] != n.UUID {
		t.Fatalf("step arguments %v: want the target config and the node", instr.Step.Args)
	}
	result := map[string]any{"logical_disks": []any{map[string]any{
		"size_gb": float64(10), "raid_level": "1", "controller": "software", "is_root_volume": true, "volume_name": "root",
		"root_device_hint": map[string]any{"name": "/dev/md/root"},
	}}}
	if _, err := h.c.AgentHeartbeat(ctx, n.UUID, protocol.Heartbeat{AgentToken: token,
		Step: &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepSucceeded, Result: result}}); err != nil {
		t.Fatal(err)
	}
	n = h.waitState(t, n.UUID, Manageable)
	if lds, _ := n.RAIDConfig["logical_disks"].([]any); len(lds) != 1 || n.RAIDConfig["last_updated"] == nil {
		t.Errorf("raid_config %v", n.RAIDConfig)
	}
	if hint, _ := n.Properties["root_device"].(map[string]any); hint["name"] != "/dev/md/root" {
		t.Errorf("root_device %v", n.Properties["root_device"])
	}
	if n.Properties["local_gb"] != float64(10) && n.Properties["local_gb"] != 10 {
		t.Errorf("local_gb %v, want 10", n.Properties["local_gb"])
	}
	if caps, _ := n.Properties["capabilities"].(string); !strings.Contains(caps, "raid_level:1") {
		t.Errorf("capabilities %q", caps)
	}

	instr, token = agentClean(t, h, n.UUID, map[string]any{"interface": "raid", "step": "delete_configuration"})
	if instr.Command != protocol.CmdRunStep || instr.Step.Name != "delete_configuration" {
		t.Fatalf("instruction %+v", instr)
	}
	if _, err := h.c.AgentHeartbeat(ctx, n.UUID, protocol.Heartbeat{AgentToken: token,
		Step: &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepSucceeded, Result: map[string]any{"deleted": []any{"/dev/md/root"}}}}); err != nil {
		t.Fatal(err)
	}
	n = h.waitState(t, n.UUID, Manageable)
	if len(n.RAIDConfig) != 0 {
		t.Errorf("raid_config after delete: %v", n.RAIDConfig)
	}
	if _, ok := n.Properties["root_device"]; ok {
		t.Errorf("root_device after delete: %v", n.Properties["root_device"])
	}
}

// TestAgentRAIDBadConfigFailsClean: configurations IPA refuses fail the
// clean before the agent gets the step, with IPA's words in last_error,
// and leave no lock; so does an agent result without logical disks.
func TestAgentRAIDBadConfigFailsClean(t *testing.T) {
	software := func(lds ...map[string]any) map[string]any {
		var l []any
		for _, d := range lds {
			d["controller"] = "software"
			l = append(l, d)
		}
		return map[string]any{"logical_disks": l}
	}
	cases := []struct {
		name string
		cfg  map[string]any
		args map[string]any
		want string
	}{
		{"first not RAID-1", software(map[string]any{"size_gb": "MAX", "raid_level": "0"}), nil,
			"Software RAID Configuration requires RAID-1 for the first logical disk"},
		{"unsupported level", software(map[string]any{"size_gb": 10, "raid_level": "1"}, map[string]any{"size_gb": "MAX", "raid_level": "5+0"}), nil,
			"Software RAID configuration does not support RAID level 5+0"},
		{"two MAX", software(map[string]any{"size_gb": "MAX", "raid_level": "1"}, map[string]any{"size_gb": "MAX", "raid_level": "0"}), nil,
			"Software RAID can have only one RAID device with size 'MAX'"},
		{"one physical disk", software(map[string]any{"size_gb": 10, "raid_level": "1", "physical_disks": []any{map[string]any{"name": "/dev/vda"}}}), nil,
			"RAID config validation error: {'name': '/dev/vda'} is not of type 'string'"},
		{"hardware controller", map[string]any{"logical_disks": []any{map[string]any{"size_gb": 10, "raid_level": "1"}}}, nil,
			"builds software RAID only"},
		{"nothing left after filtering", software(map[string]any{"size_gb": 10, "raid_level": "1", "is_root_volume": true}), map[string]any{"create_root_volume": false},
			"has empty target RAID configuration after skipping root volume"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			n := swraidNode(t, h, tc.cfg)
			step := map[string]any{"interface": "raid", "step": "create_configuration"}
			if tc.args != nil {
				step["args"] = tc.args
			}
			instr, _ := agentClean(t, h, n.UUID, step)
			if instr.Command == protocol.CmdRunStep {
				t.Fatalf("the agent got the step: %+v", instr)
			}
			n = h.waitState(t, n.UUID, CleanFail)
			if msg := deref(n.LastError); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "raid") {
				t.Errorf("last_error %q, want %q", msg, tc.want)
			}
			if n.Reservation != nil {
				t.Errorf("node left locked by %s", *n.Reservation)
			}
		})
	}

	t.Run("empty agent result", func(t *testing.T) {
		h := newHarness(t)
		n := swraidNode(t, h, rootRAID1())
		instr, token := agentClean(t, h, n.UUID, map[string]any{"interface": "raid", "step": "create_configuration"})
		if _, err := h.c.AgentHeartbeat(context.Background(), n.UUID, protocol.Heartbeat{AgentToken: token,
			Step: &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepSucceeded, Result: map[string]any{}}}); err != nil {
			t.Fatal(err)
		}
		n = h.waitState(t, n.UUID, CleanFail)
		if msg := deref(n.LastError); !strings.Contains(msg, "Agent ramdisk didn't return a proper command result while building RAID") {
			t.Errorf("last_error %q", msg)
		}
	})
}

// TestAgentRAIDStepsOfferedPerInterface: the raid steps of a node with
// raid_interface agent are the agent's (run by the agent), and a no-raid
// node has none.
func TestAgentRAIDStepsOfferedPerInterface(t *testing.T) {
	h := newHarness(t)
	agent := swraidNode(t, h, rootRAID1())
	hw, _ := h.c.hardwareOf(agent)
	for _, name := range []string{"create_configuration", "delete_configuration"} {
		d, ok := lookupStepFor(hw, agent, "raid", name)
		if !ok || d.run != nil || !d.offers("clean", hw, agent) {
			t.Errorf("raid.%s on an agent raid node: found %v, conductor-run %v", name, ok, d.run != nil)
		}
	}
	if d, ok := lookupStepFor(hw, agent, "raid", "apply_configuration"); !ok || !d.offers("deploy", hw, agent) || d.offers("clean", hw, agent) {
		t.Errorf("raid.apply_configuration should be a deploy (not clean) step of the agent raid interface")
	}
	noRAID := h.nodeIn(t, Manageable, func(n *storage.Node) { n.DeployInterface = "direct"; n.RAIDInterface = "no-raid" })
	if _, err := validateUserSteps("clean", hw, noRAID, []map[string]any{{"interface": "raid", "step": "create_configuration"}}, false); err == nil {
		t.Error("a no-raid node accepted raid.create_configuration")
	}
}

// TestAgentRAIDApplyInDeploy: apply_configuration as a deploy step (before
// write_image by priority) gets raid_config in its arguments, and the
// write_image after it goes to the root array it built.
func TestAgentRAIDApplyInDeploy(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AgentPowerOffWait = time.Millisecond })
	ctx := context.Background()
	n := h.nodeIn(t, Available, func(n *storage.Node) {
		n.DeployInterface = "direct"
		n.RAIDInterface = "agent"
		n.Properties["root_device"] = map[string]any{"serial": "S1"}
	})
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "active", DeploySteps: []map[string]any{{
		"interface": "raid", "step": "apply_configuration", "priority": float64(90), "args": map[string]any{"raid_config": rootRAID1()},
	}}}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	h.waitState(t, n.UUID, DeployWait)
	_, token, err := h.c.AgentLookup(ctx, nil, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	instr, err := h.c.AgentHeartbeat(ctx, n.UUID, protocol.Heartbeat{AgentToken: token})
	if err != nil {
		t.Fatal(err)
	}
	if instr.Step == nil || instr.Step.Name != "apply_configuration" || instr.Step.Args[protocol.ArgDeleteExisting] != true || instr.Step.Args[protocol.ArgTargetRAIDConfig] == nil {
		t.Fatalf("instruction %+v, want apply_configuration with the config and delete_existing true", instr.Step)
	}
	result := rootRAID1()
	result["logical_disks"].([]any)[0].(map[string]any)["root_device_hint"] = map[string]any{"name": "/dev/md/root"}
	instr, err = h.c.AgentHeartbeat(ctx, n.UUID, protocol.Heartbeat{AgentToken: token,
		Step: &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepSucceeded, Result: result}})
	if err != nil {
		t.Fatal(err)
	}
	if instr.Step == nil || instr.Step.Name != protocol.StepWriteImage {
		t.Fatalf("instruction %+v, want write_image", instr)
	}
	if hint, _ := instr.Step.Args[protocol.ArgRootDevice].(map[string]any); hint["name"] != "/dev/md/root" {
		t.Errorf("write_image root_device %v, want the RAID root", instr.Step.Args[protocol.ArgRootDevice])
	}
}
