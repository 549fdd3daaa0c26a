package main

// What the storm's figures are explained with: castiron's profiles taken
// while the storm runs (-storm-pprof), this process's own CPU profile (it
// shares the cores with castiron), and castiron's own request duration
// histogram (/metrics) beside the sampler's client-side latencies.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stormProfiles takes castiron's profiles during one storm.
type stormProfiles struct {
	dir, prefix, addr string
	cpu               time.Duration
	trace, traceAt    time.Duration
	wg                sync.WaitGroup
	self              *os.File
}

func newStormProfiles(s *stormConfig, target string, run int, addr string) *stormProfiles {
	if s.pprof == "" || addr == "" {
		return nil
	}
	if err := os.MkdirAll(s.pprof, 0o755); err != nil {
		log.Fatal(err)
	}
	return &stormProfiles{dir: s.pprof, prefix: fmt.Sprintf("%s-n%d-%d-", target, s.n, run), addr: addr, cpu: s.cpuProfile,
		trace: s.trace, traceAt: s.traceAt}
}

// start begins castiron's CPU profile (it runs p.cpu, or until ctx ends)
// and this process's.
func (p *stormProfiles) start(ctx context.Context) {
	if p == nil {
		return
	}
	p.wg.Go(func() {
		p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", int(p.cpu.Seconds())), "cpu.pprof")
		if ctx.Err() != nil {
			return
		}
		// Mid-storm, where RSS peaks: the heap, and the runtime's own
		// account of its memory (stacks, heap spans, released; the text
		// form's MemStats at its end), and the goroutines.
		p.fetch(ctx, "heap", "heap-mid.pprof")
		p.fetch(ctx, "heap?debug=1", "heap-mid.txt")
		p.fetch(ctx, "goroutine", "goroutine-mid.pprof")
	})
	if p.trace > 0 {
		p.wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(p.traceAt):
			}
			p.fetch(ctx, fmt.Sprintf("trace?seconds=%g", p.trace.Seconds()), "trace.out")
		})
	}
	f, err := os.Create(filepath.Join(p.dir, p.prefix+"bench-cpu.pprof"))
	if err == nil && pprof.StartCPUProfile(f) == nil {
		p.self = f
	}
}

// end takes the profiles of what the storm left (heap, allocations since
// start, blocking, contended mutexes, goroutines) and stops this process's
// CPU profile.
func (p *stormProfiles) end() {
	if p == nil {
		return
	}
	if p.self != nil {
		pprof.StopCPUProfile()
		p.self.Close()
	}
	for _, k := range []string{"heap", "allocs", "block", "mutex", "goroutine"} {
		p.fetch(context.Background(), k, k+".pprof")
	}
}

func (p *stormProfiles) wait() {
	if p != nil {
		p.wg.Wait()
	}
}

func (p *stormProfiles) fetch(ctx context.Context, what, name string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.addr+"/debug/pprof/"+what, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Printf("storm: profile %s: %v", what, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(p.dir, p.prefix+name))
	if err != nil {
		log.Printf("storm: profile %s: %v", what, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		log.Printf("storm: profile %s: %v", what, err)
	}
}

// durations is castiron_http_request_duration_seconds's cumulative
// buckets: "method route" -> upper bound -> count.
type durations map[string]map[float64]float64

// scrapeDurations reads castiron's request duration histogram (nil when
// /metrics does not answer).
func scrapeDurations(url string) durations {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	d := durations{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const name = "castiron_http_request_duration_seconds_bucket{"
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		labels, val, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		le, err1 := strconv.ParseFloat(l["le"], 64)
		if l["le"] == "+Inf" {
			le, err1 = math.Inf(1), nil
		}
		n, err2 := strconv.ParseFloat(val, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		k := l["method"] + " " + strings.TrimPrefix(l["route"], "/v1")
		if d[k] == nil {
			d[k] = map[float64]float64{}
		}
		d[k][le] = n
	}
	return d
}

// bucketCounts is one route's cumulative buckets over an interval.
type bucketCounts map[float64]float64

func (d durations) sub(before durations, method, route string) bucketCounts {
	k := method + " " + route
	out := bucketCounts{}
	for le, n := range d[k] {
		out[le] = n - before[k][le]
	}
	return out
}

// quantiles is the upper bound (ms) of the buckets holding the median and
// the 99th percentile (0 when nothing was counted).
func (b bucketCounts) quantiles() (p50, p99 float64) {
	les := make([]float64, 0, len(b))
	for le := range b {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 || b[les[len(les)-1]] == 0 {
		return 0, 0
	}
	total := b[les[len(les)-1]]
	at := func(q float64) float64 {
		for _, le := range les {
			if b[le] >= q*total {
				return le * 1000
			}
		}
		return math.Inf(1)
	}
	return at(0.5), at(0.99)
}

// The API sampler runs in a process of its own, as an operator's client
// does: inside this one its goroutine queued behind the simulated rack's
// thousands (Go's scheduler has no priorities), which added the rack's
// scheduling delays to castiron's latencies.

// samplerOut is what the sampler process reports on its stdout.
type samplerOut struct {
	Get, List []time.Duration
	Errors    int64
}

// runSampler is the sampler process (-storm-sample URL): it samples until
// its stdin closes, then reports.
func runSampler(url, idsFile string) {
	b, err := os.ReadFile(idsFile)
	if err != nil {
		log.Fatal(err)
	}
	ids := strings.Fields(string(b))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	l := &latencies{}
	l.sample(ctx, url, ids)
	out := samplerOut{Get: l.get, List: l.list, Errors: l.errs.Load()}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		log.Fatal(err)
	}
}

// startSampler starts the sampler process on castiron at url; stop ends
// it and fills l.
func startSampler(dir, url string, ids []string, l *latencies, cpus string) (stop func()) {
	idsFile := filepath.Join(dir, "sample-ids")
	if err := os.WriteFile(idsFile, []byte(strings.Join(ids, "\n")), 0o644); err != nil {
		log.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := commandOn(cpus, self, "-storm-sample", url, "-storm-sample-ids", idsFile)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	return func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			log.Printf("storm: sampler: %v", err)
			return
		}
		var o samplerOut
		if err := json.Unmarshal(out.Bytes(), &o); err != nil {
			log.Printf("storm: sampler: %v", err)
			return
		}
		l.get, l.list = o.Get, o.List
		l.errs.Store(o.Errors)
		l.cpuS = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
}
