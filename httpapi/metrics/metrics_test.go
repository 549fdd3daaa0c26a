package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestExposition: scrape-time sources appear, a failing node count says so
// instead of failing the scrape, and the label sets stay bounded.
func TestExposition(t *testing.T) {
	fail := false
	m := New(Sources{Version: "v1.2.3", Nodes: func(context.Context) ([]NodeCount, error) {
		if fail {
			return nil, errors.New("database is locked")
		}
		return []NodeCount{{ProvisionState: "available", PowerState: "power off", Count: 7},
			{ProvisionState: "active", PowerState: "power on", Maintenance: true, Count: 2}}, nil
	}})
	m.WatchLeases(func() (int, int) { return 5, 95 })
	m.Request("/v1/nodes", "TRACE-ME", 200, time.Millisecond)
	m.DHCPPacket("discover", "offer")
	m.Transfer("tftp", "undionly.kpxe", 1000, "ok")
	m.Commit(3, time.Millisecond, nil)
	m.Commit(1, time.Millisecond, errors.New("disk full"))
	m.BMCCall("ipmi", "set_power_state", time.Second, errors.New("timeout"))
	get := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	out := get()
	for _, want := range []string{
		`castiron_nodes{maintenance="false",power_state="power off",provision_state="available"} 7`,
		`castiron_nodes{maintenance="true",power_state="power on",provision_state="active"} 2`,
		`castiron_nodes_scrape_ok 1`,
		`castiron_dhcp_leases{state="in_use"} 5`,
		`castiron_dhcp_leases{state="free"} 95`,
		`castiron_http_requests_total{code="200",method="OTHER",route="/v1/nodes"} 1`,
		`castiron_dhcp_packets_total{answer="offer",type="discover"} 1`,
		`castiron_boot_sent_bytes_total{file="undionly.kpxe",server="tftp"} 1000`,
		`castiron_storage_commit_batch_size_sum 3`,
		`castiron_storage_commit_errors_total 1`,
		`castiron_bmc_calls_total{driver="ipmi",op="set_power_state",result="error"} 1`,
		`castiron_build_info{version="v1.2.3"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
	fail = true
	out = get()
	if !strings.Contains(out, "castiron_nodes_scrape_ok 0\n") || strings.Contains(out, "castiron_nodes{") {
		t.Errorf("failed node count:\n%s", out)
	}
}

// BenchmarkRequest is the cost /metrics adds to each API request.
func BenchmarkRequest(b *testing.B) {
	m := New(Sources{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Request("/v1/nodes/{ident}", "GET", 200, 150*time.Microsecond)
		}
	})
}
