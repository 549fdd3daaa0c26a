package storage

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// filterNode is benchNode with the filtered columns spread as a site has
// them: most nodes at the default, a few percent with an owner, a lessee,
// maintenance, a fault, another driver or conductor group.
func filterNode(i int) *Node {
	n := benchNode(i)
	n.Maintenance = i%100 == 0
	n.Retired = i%100 == 1
	switch i % 10 {
	case 0:
		n.Owner = ptr("project-a")
	case 1:
		n.Owner = ptr("project-b")
	}
	if i%20 == 0 {
		n.Lessee = ptr("tenant-x")
	}
	if i%50 == 0 {
		n.ResourceClass = ptr("gpu")
	}
	if i%10 == 0 {
		n.ConductorGroup = "rack1"
	}
	if i%25 == 0 {
		n.Driver = "redfish"
	}
	if i%200 == 0 {
		n.Fault = ptr("power failure")
	}
	if n.ProvisionState == "active" {
		n.InstanceUUID = ptr(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	}
	return n
}

// BenchmarkListNodesFilteredAt10k is the storage part of a filtered
// GET /v1/nodes?limit=100 on 10,000 nodes, for every filter an index may
// serve: a rare value (1-10 % of the nodes), the common one (the first page
// comes at once whatever the plan) and a value no node has (the worst case
// for a plan without an index: every row is read).
func BenchmarkListNodesFilteredAt10k(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	for i := range 10000 {
		mustCreateNode(b, s, filterNode(i))
	}
	t, f := ptr(true), ptr(false)
	cases := []struct {
		name string
		q    NodeQuery
		want int // nodes on the page
	}{
		{"provision_state=available", NodeQuery{ProvisionState: ptr("available")}, 100},
		{"provision_state=none", NodeQuery{ProvisionState: ptr("deploying")}, 0},
		{"maintenance=true", NodeQuery{Maintenance: t}, 100},
		{"maintenance=false", NodeQuery{Maintenance: f}, 100},
		{"retired=true", NodeQuery{Retired: t}, 100},
		{"retired=false", NodeQuery{Retired: f}, 100},
		{"owner=project-a", NodeQuery{Owner: ptr("project-a")}, 100},
		{"owner=none", NodeQuery{Owner: ptr("project-z")}, 0},
		{"lessee=tenant-x", NodeQuery{Lessee: ptr("tenant-x")}, 100},
		{"lessee=none", NodeQuery{Lessee: ptr("tenant-z")}, 0},
		{"resource_class=gpu", NodeQuery{ResourceClass: ptr("gpu")}, 100},
		{"resource_class=baremetal", NodeQuery{ResourceClass: ptr("baremetal")}, 100},
		{"resource_class=none", NodeQuery{ResourceClass: ptr("fpga")}, 0},
		{"conductor_group=rack1", NodeQuery{ConductorGroups: []string{"rack1"}}, 100},
		{"conductor_group=none", NodeQuery{ConductorGroups: []string{"rack9"}}, 0},
		{"conductor_group=default", NodeQuery{ConductorGroups: []string{""}}, 100},
		{"driver=redfish", NodeQuery{Driver: ptr("redfish")}, 100},
		{"driver=none", NodeQuery{Driver: ptr("idrac")}, 0},
		{"fault=power_failure", NodeQuery{Fault: ptr("power failure")}, 50},
		{"associated=true", NodeQuery{Associated: t}, 100},
		{"associated=false", NodeQuery{Associated: f}, 100},
		{"maintenance=true,provision_state=available", NodeQuery{Maintenance: t, ProvisionState: ptr("available")}, 34},
		{"owner=project-a,resource_class=gpu", NodeQuery{Owner: ptr("project-a"), ResourceClass: ptr("gpu")}, 100},
		{"sort_key=created_at", NodeQuery{Page: Page{SortKey: "created_at"}}, 100},
		// No index serves it: what a filter costs that reads every row
		// (the bound for a common value that is rare on some site).
		{"description_contains=none", NodeQuery{DescriptionContains: ptr("no such text")}, 0},
	}
	for _, c := range cases {
		c.q.Limit = 100
		b.Run(c.name, func(b *testing.B) {
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for b.Loop() {
				got, err := s.ListNodes(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != c.want {
					b.Fatalf("got %d nodes, want %d", len(got), c.want)
				}
			}
			// CPU time per list: on a shared machine it moves far less
			// with the load than ns/op does.
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
