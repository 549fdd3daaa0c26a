package httpapi

import (
	"testing"

	"castiron/engine"
	"castiron/httpapi/metrics"
)

// BenchmarkMetricsCost measures what /metrics costs the API: the same
// requests with every observer wired as castiron serve wires them (requests,
// engine, group commits) and with none, side by side:
// go test -run - -bench MetricsCost -count 8 ./httpapi/
func BenchmarkMetricsCost(b *testing.B) {
	// Off and on alternate per kind of request, so drift in the machine's
	// load hits both alike.
	for _, kind := range []string{"get", "list", "create"} {
		for _, on := range []string{"off", "on"} {
			b.Run(kind+"/metrics="+on, func(b *testing.B) {
				h := metricsHarness(b, on == "on")
				switch kind {
				case "get":
					ids := seedNodes(b, h, 1000)
					benchGet(b, h, func(i int) string { return "/v1/nodes/" + ids[(i*7919)%len(ids)] })
				case "list":
					ids := seedNodes(b, h, 1000)
					benchGet(b, h, func(i int) string { return "/v1/nodes?limit=100&marker=" + ids[(i*97)%900] })
				case "create":
					benchCreate(b, h)
				}
			})
		}
	}
}

func metricsHarness(b *testing.B, on bool) *apiHarness {
	if !on {
		return newAPI(b)
	}
	m := metrics.New(metrics.Sources{Version: "bench"})
	h := newAPIWith(b, func(c *engine.Config) { c.Observer = m }, func(o *Options) { o.Observer = m })
	h.store.ObserveCommits(m)
	return h
}
