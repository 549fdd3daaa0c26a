package storage

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkUpdateNodeHeartbeat is an agent heartbeat's write during a
// deploy (bench/fleet storm): a node whose documents hold what a deploy
// puts there (the step plan, the agent's URL and token, the image), one
// key of driver_internal_info and provision_updated_at changed. Run it
// before and after a change to UpdateNode's read and rewrite (allocations
// and ns per update).
func BenchmarkUpdateNodeHeartbeat(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	nodes := make([]*Node, 100)
	for i := range nodes {
		n := benchNode(i)
		steps := make([]any, 8)
		for j := range steps {
			steps[j] = map[string]any{"interface": "deploy", "step": fmt.Sprintf("step_%d", j), "priority": float64(100 - j),
				"argsinfo": map[string]any{"force": map[string]any{"description": "force it", "required": false}}, "args": map[string]any{}}
		}
		n.DriverInternalInfo = JSONObject{"deploy_steps": steps, "deploy_step_index": float64(3),
			"agent_url": fmt.Sprintf("http://10.1.%d.%d:9999", i/250, i%250), "agent_secret_token": "0123456789abcdef0123456789abcdef",
			"agent_version": "castiron-agent 1.0", "agent_last_heartbeat": time.Now().Format(time.RFC3339Nano),
			"is_whole_disk_image": true, "last_power_state_change": "2025-01-01T00:00:00.000000"}
		n.InstanceInfo = JSONObject{"image_source": "http://images/storm.img", "image_checksum": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			"image_disk_format": "raw", "root_gb": "10", "capabilities": map[string]any{"boot_mode": "uefi"}}
		n.Extra = JSONObject{"rack": fmt.Sprintf("r%02d", i%40), "slot": float64(i % 42)}
		nodes[i] = mustCreateNode(b, s, n)
	}
	i := 0
	for b.Loop() {
		n := nodes[i%len(nodes)]
		if _, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) {
			now := time.Now()
			n.DriverInternalInfo["agent_last_heartbeat"] = now.Format(time.RFC3339Nano)
			n.ProvisionUpdatedAt = &now
			return nil, nil
		}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
