package ops

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// opsDo sends one API request with a JSON body and the newest microversion.
func opsDo(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// scrape parses /metrics the way Prometheus does.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body, hdr := opsGet(t, url)
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want Prometheus text format 0.0.4", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// sample finds the sample of family name whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's, gauge's or untyped sample's value, or a histogram's
// count.
func value(m *dto.Metric) float64 {
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}

// TestMetricsScrape drives a running castiron (a node through manage and
// provide, an agent lookup) and checks what /metrics says about it, parsed
// with Prometheus' own parser.
func TestMetricsScrape(t *testing.T) {
	dir := t.TempDir()
	srv := opsStart(t, opsBinary(t), filepath.Join(dir, "data"), filepath.Join(dir, "castiron.log"))
	api := srv.Endpoint + "/v1"

	code, b := opsDo(t, "POST", api+"/nodes", map[string]any{"driver": "fake-hardware", "name": "metrics-1"})
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	for _, verb := range []string{"manage", "provide"} {
		if code, b := opsDo(t, "PUT", api+"/nodes/metrics-1/states/provision", map[string]any{"target": verb}); code != 202 {
			t.Fatalf("%s: %d %s", verb, code, b)
		}
		want := map[string]string{"manage": "manageable", "provide": "available"}[verb]
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, b := opsDo(t, "GET", api+"/nodes/metrics-1", nil)
			var n struct {
				ProvisionState string `json:"provision_state"`
			}
			_ = json.Unmarshal(b, &n)
			if n.ProvisionState == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: node still %q", verb, n.ProvisionState)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if code, _ := opsDo(t, "GET", api+"/lookup?addresses=52:54:00:00:00:99", nil); code != 404 {
		t.Errorf("lookup of an unknown MAC: %d, want 404", code)
	}
	opsDo(t, "GET", api+"/nodes/metrics-1", nil)
	opsDo(t, "BREW", api+"/nodes", nil) // an odd method keeps the label set bounded

	fams := scrape(t, srv.Endpoint+"/metrics")
	checks := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"castiron_nodes", map[string]string{"provision_state": "available", "maintenance": "false"}, 1},
		{"castiron_nodes_scrape_ok", nil, 1},
		{"castiron_http_requests_total", map[string]string{"route": "/v1/nodes", "method": "POST", "code": "201"}, 1},
		{"castiron_http_requests_total", map[string]string{"route": "/v1/nodes/{ident}", "method": "GET", "code": "200"}, 1},
		{"castiron_http_requests_total", map[string]string{"route": "/v1/lookup", "method": "GET", "code": "404"}, 1},
		{"castiron_http_requests_total", map[string]string{"method": "OTHER"}, 1},
		{"castiron_http_request_duration_seconds", map[string]string{"route": "/v1/nodes/{ident}/states/provision", "method": "PUT"}, 2},
		{"castiron_provision_transitions_total", map[string]string{"verb": "manage", "from": "enroll", "to": "verifying"}, 1},
		{"castiron_provision_transitions_total", map[string]string{"verb": "provide", "from": "manageable"}, 1},
		{"castiron_provision_verb_duration_seconds", map[string]string{"verb": "manage", "state": "manageable"}, 1},
		{"castiron_provision_verb_duration_seconds", map[string]string{"verb": "provide", "state": "available"}, 1},
		{"castiron_bmc_calls_total", map[string]string{"driver": "fake-hardware", "result": "ok"}, 1},
		{"castiron_bmc_call_duration_seconds", map[string]string{"driver": "fake-hardware"}, 1},
		{"castiron_agent_requests_total", map[string]string{"call": "lookup", "result": "not_found"}, 1},
		{"castiron_storage_commit_duration_seconds", nil, 1},
		{"castiron_storage_commit_batch_size", nil, 1},
		{"castiron_build_info", nil, 1},
		{"go_goroutines", nil, 1},
		{"process_resident_memory_bytes", nil, 1},
	}
	for _, c := range checks {
		if v := value(sample(fams, c.name, c.labels)); v < c.min {
			t.Errorf("%s%v = %v, want >= %v", c.name, c.labels, v, c.min)
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "castiron_") {
			continue
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
		if strings.Contains(name, "duration") && !strings.HasSuffix(name, "_seconds") {
			t.Errorf("%s: durations are in seconds, named so", name)
		}
	}
	if fams["castiron_dhcp_leases"] != nil {
		t.Error("castiron_dhcp_leases without DHCP")
	}
}
