package engine

import (
	"context"
	"testing"
	"time"

	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// BenchmarkAgentHeartbeat is the heartbeat of an agent running a long step
// (the storm's agents writing the image, bench/fleet): its report with
// progress recorded on the node, the answer "wait". Run it before and
// after a change to the heartbeat's path (allocations and ns per heartbeat;
// issue 28's storm profile).
func BenchmarkAgentHeartbeat(b *testing.B) {
	h := newHarness(b, func(c *Config) { c.AgentPowerOffWait = time.Millisecond })
	ctx := context.Background()
	n := h.nodeIn(b, Manageable, func(n *storage.Node) {
		n.DeployInterface = "direct"
		n.RAIDInterface = "agent"
		n.TargetRAIDConfig = storage.JSONObject(rootRAID1())
	})
	if err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "clean", CleanSteps: []map[string]any{
		{"interface": "raid", "step": "create_configuration"}}}); err != nil {
		b.Fatal(err)
	}
	h.waitState(b, n.UUID, CleanWait)
	_, token, err := h.c.AgentLookup(ctx, nil, n.UUID)
	if err != nil {
		b.Fatal(err)
	}
	instr, err := h.c.AgentHeartbeat(ctx, n.UUID, protocol.Heartbeat{AgentToken: token})
	if err != nil || instr.Step == nil {
		b.Fatalf("first heartbeat: %+v, %v", instr, err)
	}
	hb := protocol.Heartbeat{AgentToken: token, AgentVersion: "castiron-agent 1.0", Step: &protocol.StepReport{ID: instr.Step.ID,
		Status: protocol.StepRunning, Progress: &protocol.Progress{Total: 1 << 30, Unit: "bytes"}}}
	i := int64(0)
	for b.Loop() {
		i++
		hb.Step.Progress.Done = i << 20 % (1 << 30)
		instr, err := h.c.AgentHeartbeat(ctx, n.UUID, hb)
		if err != nil || instr.Command != protocol.CmdWait {
			b.Fatalf("heartbeat: %+v, %v", instr, err)
		}
	}
}
