// Package metrics is castiron's /metrics (Prometheus text format, through
// prometheus/client_golang). It implements the small observer interfaces
// the other layers call (httpapi's requests, engine's transitions, BMC and
// agent calls, storage's commits, pxe's packets and transfers) with plain
// method calls, so only this package and main import prometheus. main wires
// one Metrics into each layer.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NodeCount is how many nodes share a provision state, power state and
// maintenance flag (read from the store at each scrape).
type NodeCount struct {
	ProvisionState string
	PowerState     string // "" when unknown
	Maintenance    bool
	Count          int
}

// Sources are the values read at scrape time rather than counted as they
// happen. Any may be nil.
type Sources struct {
	// Nodes counts nodes by state (a GROUP BY in the store).
	Nodes func(ctx context.Context) ([]NodeCount, error)
	// Version labels castiron_build_info.
	Version string
}

// Metrics holds castiron's collectors on a registry of its own.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	transitions  *prometheus.CounterVec
	verbDuration *prometheus.HistogramVec
	bmcCalls     *prometheus.CounterVec
	bmcDuration  *prometheus.HistogramVec
	agentCalls   *prometheus.CounterVec

	commitDuration prometheus.Histogram
	commitBatch    prometheus.Histogram
	commitErrors   prometheus.Counter

	dhcpPackets   *prometheus.CounterVec
	transfers     *prometheus.CounterVec
	transferBytes *prometheus.CounterVec
}

// New registers every castiron metric, plus Go runtime and process metrics.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	// Each metric is made and registered by one call.
	counters := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		f(c)
		return c
	}
	histograms := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		f(h)
		return h
	}

	m.httpRequests = counters("castiron_http_requests_total",
		"HTTP requests answered, by route pattern, method and status code.", "route", "method", "code")
	m.httpDuration = histograms("castiron_http_request_duration_seconds",
		"Time from request to the end of the answer, by route pattern and method.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "route", "method")
	m.transitions = counters("castiron_provision_transitions_total",
		"Committed provision state changes, by verb (state machine event) and states.", "verb", "from", "to")
	m.verbDuration = histograms("castiron_provision_verb_duration_seconds",
		"Time from a verb leaving a stable state to the node's next stable state, by verb and that state "+
			"(e.g. deploy ending in active or deploy failed). Verbs under way at a restart are not counted.",
		[]float64{.1, .5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400}, "verb", "state")
	m.bmcCalls = counters("castiron_bmc_calls_total",
		"Calls to nodes' power and management drivers, by hardware type, operation and result (ok or error).", "driver", "op", "result")
	m.bmcDuration = histograms("castiron_bmc_call_duration_seconds",
		"Duration of calls to nodes' power and management drivers, by hardware type and operation.",
		[]float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}, "driver", "op")
	m.agentCalls = counters("castiron_agent_requests_total",
		"Calls from the ramdisk agent (lookup, heartbeat, inspection), by result.", "call", "result")
	m.commitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "castiron_storage_commit_duration_seconds",
		Help:    "Duration of one group commit of write transactions (begin to durable commit).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5},
	})
	m.commitBatch = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "castiron_storage_commit_batch_size",
		Help:    "Write transactions that shared one group commit.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})
	m.commitErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "castiron_storage_commit_errors_total",
		Help: "Group commits that failed as a whole (begin or commit error).",
	})
	f(m.commitDuration)
	f(m.commitBatch)
	f(m.commitErrors)
	m.dhcpPackets = counters("castiron_dhcp_packets_total",
		"DHCP packets received, by message type and castiron's answer (offer, ack, nak, none, error).", "type", "answer")
	m.transfers = counters("castiron_boot_transfers_total",
		"Boot file transfers, by server (tftp, http), file and result (ok, incomplete, refused).", "server", "file", "result")
	m.transferBytes = counters("castiron_boot_sent_bytes_total",
		"Bytes of boot files sent, by server (tftp, http) and file.", "server", "file")
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "castiron_build_info",
		Help:        "Always 1; the version label is castiron's.",
		ConstLabels: prometheus.Labels{"version": src.Version},
	}, func() float64 { return 1 }))
	if src.Nodes != nil {
		f(&nodeCollector{count: src.Nodes})
	}
	return m
}

// WatchLeases adds castiron_dhcp_leases, read from usage at each scrape:
// the DHCP pool's addresses in use (a live lease or an offer's
// reservation) and free to hand out. Only a castiron that runs DHCP has it.
func (m *Metrics) WatchLeases(usage func() (inUse, free int)) {
	m.reg.MustRegister(&leaseCollector{usage: usage})
}

// Handler serves the registry in Prometheus' text format (or OpenMetrics
// when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// knownMethods keeps the method label bounded whatever clients send.
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true,
	"PATCH": true, "DELETE": true, "OPTIONS": true}

// codes are the status labels, made once (not per request).
var codes = func() []string {
	c := make([]string, 600)
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

// Request implements httpapi's RequestObserver.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	if !knownMethods[method] {
		method = "OTHER"
	}
	code := ""
	if status >= 0 && status < len(codes) {
		code = codes[status]
	} else {
		code = strconv.Itoa(status)
	}
	m.httpRequests.WithLabelValues(route, method, code).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// Transition implements engine.Observer.
func (m *Metrics) Transition(verb, from, to string) {
	m.transitions.WithLabelValues(verb, from, to).Inc()
}

// VerbDone implements engine.Observer.
func (m *Metrics) VerbDone(verb, state string, d time.Duration) {
	m.verbDuration.WithLabelValues(verb, state).Observe(d.Seconds())
}

// BMCCall implements engine.Observer.
func (m *Metrics) BMCCall(driver, op string, d time.Duration, err error) {
	m.bmcCalls.WithLabelValues(driver, op, okOrError(err)).Inc()
	m.bmcDuration.WithLabelValues(driver, op).Observe(d.Seconds())
}

// AgentCall implements engine.Observer.
func (m *Metrics) AgentCall(call, result string) {
	m.agentCalls.WithLabelValues(call, result).Inc()
}

// Commit implements storage's CommitObserver.
func (m *Metrics) Commit(batch int, d time.Duration, err error) {
	if err != nil {
		m.commitErrors.Inc()
		return
	}
	m.commitDuration.Observe(d.Seconds())
	m.commitBatch.Observe(float64(batch))
}

// DHCPPacket implements pxe/boot's Meter.
func (m *Metrics) DHCPPacket(msgType, answer string) {
	m.dhcpPackets.WithLabelValues(msgType, answer).Inc()
}

// Transfer implements pxe/boot's Meter.
func (m *Metrics) Transfer(server, file string, bytes int64, result string) {
	m.transfers.WithLabelValues(server, file, result).Inc()
	if bytes > 0 {
		m.transferBytes.WithLabelValues(server, file).Add(float64(bytes))
	}
}

func okOrError(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}
