package storage

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// benchNode is a node shaped like an enrolled, inspected machine, so JSON
// decoding costs what it will cost in production.
func benchNode(i int) *Node {
	n := newNode(fmt.Sprintf("node-%05d", i))
	n.Driver = "ipmi"
	n.BootInterface, n.DeployInterface, n.ManagementInterface, n.PowerInterface = "ipxe", "direct", "ipmitool", "ipmitool"
	n.ProvisionState = []string{"available", "active", "manageable"}[i%3]
	n.PowerState = ptr("power off")
	n.ResourceClass = ptr("baremetal")
	n.Properties = JSONObject{"cpus": float64(32), "memory_mb": float64(131072), "local_gb": float64(930),
		"cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"}
	n.DriverInfo = JSONObject{"ipmi_address": fmt.Sprintf("10.0.%d.%d", i/250, i%250), "ipmi_username": "admin",
		"ipmi_password": "******", "deploy_kernel": "http://pxe/ipa.kernel", "deploy_ramdisk": "http://pxe/ipa.initramfs"}
	n.DriverInternalInfo = JSONObject{"last_power_state_change": "2025-01-01T00:00:00.000000"}
	n.Traits = []string{"CUSTOM_GPU", "CUSTOM_RACK_A"}
	return n
}

func seedNodes(b *testing.B, s *SQLite, count int) []*Node {
	b.Helper()
	nodes := make([]*Node, count)
	for i := range nodes {
		nodes[i] = mustCreateNode(b, s, benchNode(i))
	}
	return nodes
}

func BenchmarkCreateNode(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	i := 0
	for b.Loop() {
		if err := s.CreateNode(ctx, benchNode(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkGetNode(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	nodes := seedNodes(b, s, 10000)
	i := 0
	for b.Loop() {
		if _, err := s.GetNode(ctx, nodes[i%len(nodes)].UUID); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

// BenchmarkListNodes100At10k is the storage part of GET /v1/nodes?limit=100
// on 10,000 nodes, asking for a page in the middle: keyset pagination must
// make it cost what the first page costs.
func BenchmarkListNodes100At10k(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	nodes := seedNodes(b, s, 10000)
	cases := []struct {
		name string
		q    NodeQuery
	}{
		{"first", NodeQuery{Page: Page{Limit: 100}}},
		{"middle", NodeQuery{Page: Page{Limit: 100, Marker: nodes[5000].UUID}}},
		{"middle_by_name_desc", NodeQuery{Page: Page{Limit: 100, Marker: nodes[5000].UUID, SortKey: "name", SortDir: Desc}}},
		{"middle_filtered", NodeQuery{ProvisionState: ptr("available"), Page: Page{Limit: 100, Marker: nodes[5001].UUID}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				got, err := s.ListNodes(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != 100 {
					b.Fatalf("got %d nodes", len(got))
				}
			}
		})
	}
}

func BenchmarkUpdateNode(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	nodes := seedNodes(b, s, 1000)
	i := 0
	for b.Loop() {
		n := nodes[i%len(nodes)]
		_, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) {
			n.PowerState = ptr([]string{"power on", "power off"}[i%2])
			n.ProvisionUpdatedAt = ptr(time.Now())
			return &Event{EventType: "power", Severity: "INFO", Event: "power changed", Conductor: "c1",
				User: "admin", Verb: "power"}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCreateNodeConcurrent is bench/run.sh's create phase in process:
// 8 writers, closed loop, on a store that already holds prefill nodes (the
// B-trees' size changes what one commit writes). Its figures are creates/s
// and writes per commit (the group commit's batch).
func BenchmarkCreateNodeConcurrent(b *testing.B) {
	for _, prefill := range []int{0, 9000} {
		b.Run(fmt.Sprintf("prefill=%d", prefill), func(b *testing.B) {
			ctx := context.Background()
			s := openTest(b)
			for i := 0; i < prefill; i++ {
				mustCreateNode(b, s, newNode(""))
			}
			var commits atomic.Int64
			s.ObserveCommits(commitCounter{&commits})
			b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.CreateNode(ctx, newNode("")); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
			if c := commits.Load(); c > 0 {
				b.ReportMetric(float64(b.N)/float64(c), "writes/commit")
			}
		})
	}
}

type commitCounter struct{ n *atomic.Int64 }

func (c commitCounter) Commit(int, time.Duration, error) { c.n.Add(1) }
