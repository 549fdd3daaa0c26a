package main

// The storm (issue 28): N simulated machines (engine/driver/bmcsim/rack:
// every other one behind a Redfish BMC, the others IPMI, 20-50 ms BMCs,
// each IPMI BMC on its own 127.x address) taken enroll -> manage ->
// inspect -> provide -> deploy all at once against one castiron (boot phase
// off: no DHCP/TFTP, the machines ask for their iPXE script over HTTP,
// --netboot-http, and skip the kernel download). Measured: time to the last
// active node, failures, GET node and list (limit=100) latency sampled
// during the storm, castiron's CPU and RSS.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"castiron/bench/fleet/pxeboot"
	"castiron/engine/driver/bmcsim/rack"
)

type stormConfig struct {
	n              int
	latMin, latMax time.Duration
	failure        float64
	bootDelay      time.Duration
	imageMiB       int
	base           string
	port           int
	timeout        time.Duration
	fetchRamdisk   bool
	protocols      string
	// runs is how many storms per binary (before and after in turn when
	// -before is given, so both see the same machine and load).
	runs int
	// pprof, when set, is where castiron's profiles taken during the storm
	// go (it is started with --pprof-listen) and this process's own CPU
	// profile; cpuProfile is how long castiron's CPU profile runs from the
	// storm's start.
	pprof      string
	cpuProfile time.Duration
	// trace, when not 0, is the length of an execution trace of castiron
	// (scheduling latency: go tool trace -pprof=sched) taken traceAt after
	// the storm's start.
	trace, traceAt time.Duration
	// env is added to castiron's environment, per target ("before",
	// "after"): e.g. GOGC for the same binary run twice.
	env map[string][]string
	// boot is "http" (the machines ask castiron for their iPXE script over
	// HTTP, --netboot-http) or "pxe": castiron on a provisioning network
	// (--pxe-interface pxeIf, pxeAddr, in the namespace this process runs
	// in) and every machine's firmware doing DHCP, TFTP and iPXE's DHCP
	// from the namespace pxeNetns (interface pxeClientIf) before the
	// script, kernel and initramfs (kernelMiB, initrdMiB) over HTTP.
	boot, pxeIf, pxeAddr, pxeRange, pxeNetns, pxeClientIf string
	kernelMiB, initrdMiB                                  int
	// castironCPUs and benchCPUs pin castiron and this process (with the
	// sampler) to CPUs of their own (stormpin.go); pinTurns runs every
	// storm unpinned, then pinned. home is this process's CPUs at start.
	castironCPUs, benchCPUs string
	pinTurns                bool
	home                    unix.CPUSet
}

// stormFlags declares the storm's flags (-storm N turns it on).
func stormFlags() *stormConfig {
	s := &stormConfig{}
	flag.IntVar(&s.n, "storm", 0, "storm mode: N machines enroll -> manage -> inspect -> provide -> deploy at once (0: power sync mode)")
	flag.Float64Var(&s.failure, "storm-failure-rate", 0, "storm: probability a BMC request fails")
	flag.DurationVar(&s.bootDelay, "storm-boot-delay", time.Second, "storm: simulated firmware time of each power-on (the ramdisk takes half of it more)")
	flag.IntVar(&s.imageMiB, "storm-image-mib", 1, "storm: size of the image every node downloads from castiron")
	flag.DurationVar(&s.timeout, "storm-timeout", 30*time.Minute, "storm: give up after")
	flag.IntVar(&s.runs, "storm-runs", 1, "storm: storms per binary (-before and -after in turn)")
	flag.StringVar(&s.pprof, "storm-pprof", "", "storm: directory for castiron's CPU, heap, allocs, block, mutex and goroutine profiles taken during the storm (castiron runs with --pprof-listen) and this process's CPU profile")
	flag.DurationVar(&s.cpuProfile, "storm-cpu-profile", 15*time.Second, "storm: length of castiron's CPU profile from the storm's start (-storm-pprof)")
	s.env = map[string][]string{}
	for _, t := range []string{"before", "after"} {
		flag.Func("storm-env-"+t, "storm: NAME=value added to the environment of castiron "+t+" (repeatable)", func(v string) error {
			if !strings.Contains(v, "=") {
				return fmt.Errorf("want NAME=value, got %q", v)
			}
			s.env[t] = append(s.env[t], v)
			return nil
		})
	}
	flag.DurationVar(&s.trace, "storm-trace", 0, "storm: length of an execution trace of castiron (-storm-pprof; 0: none)")
	flag.DurationVar(&s.traceAt, "storm-trace-at", 5*time.Second, "storm: when the execution trace starts, from the storm's start")
	flag.StringVar(&s.boot, "storm-boot", "http", "storm: boot phase, http (iPXE script over HTTP only) or pxe (DHCP, TFTP, HTTP from -storm-pxe-netns)")
	flag.StringVar(&s.pxeIf, "storm-pxe-interface", "", "storm, -storm-boot pxe: castiron's --pxe-interface (in this process's namespace)")
	flag.StringVar(&s.pxeAddr, "storm-pxe-addr", "", "storm, -storm-boot pxe: castiron's address on that interface (its API listens there)")
	flag.StringVar(&s.pxeRange, "storm-dhcp-range", "", "storm, -storm-boot pxe: castiron's --dhcp-range")
	flag.StringVar(&s.pxeNetns, "storm-pxe-netns", "", "storm, -storm-boot pxe: network namespace of the machines' firmware")
	flag.StringVar(&s.pxeClientIf, "storm-pxe-client-interface", "", "storm, -storm-boot pxe: the firmware's interface in that namespace")
	flag.IntVar(&s.kernelMiB, "storm-kernel-mib", 4, "storm, -storm-boot pxe: size of the kernel every boot downloads")
	flag.IntVar(&s.initrdMiB, "storm-initrd-mib", 12, "storm, -storm-boot pxe: size of the initramfs every boot downloads")
	flag.StringVar(&s.castironCPUs, "storm-castiron-cpus", "", "storm: CPUs castiron runs on (taskset -c list; empty: any)")
	flag.StringVar(&s.benchCPUs, "storm-bench-cpus", "", "storm: CPUs this process (the rack, agents, the storm's client) and the API sampler run on (empty: any)")
	flag.BoolVar(&s.pinTurns, "storm-pin-turns", false, "storm: every storm unpinned, then pinned (-storm-castiron-cpus, -storm-bench-cpus), in turn")
	flag.StringVar(&s.protocols, "storm-protocols", "ipmi,redfish", "storm: BMC kinds given to machines in turn (a Redfish BMC costs this process a listener and castiron's connections: 10,000 with half Redfish need more than 20,000 descriptors)")
	return s
}

type stormResult struct {
	Target                           string             `json:"target"`
	Run                              int                `json:"run"`
	Pinning                          string             `json:"pinning"`
	N                                int                `json:"n"`
	EnrollS                          float64            `json:"enroll_s"`
	PhaseS                           map[string]float64 `json:"phase_s"` // storm start to the last node done with each verb
	LastActiveS                      float64            `json:"last_active_s"`
	Active                           int                `json:"active"`
	Failed                           int                `json:"failed"`
	FirstError                       string             `json:"first_error,omitempty"`
	GetP50, GetP99, ListP50, ListP99 float64
	GetN, ListN                      int
	GetP90, GetMax, ListP90, ListMax float64
	// Server-side: castiron's own request duration histogram (/metrics)
	// over the storm, GET node and GET list (the list route also counts the
	// storm's state poller's lists of 1,000), as bucket upper bounds: what
	// castiron took, without the sampler's own scheduling and decoding.
	SrvGetP50, SrvGetP99, SrvListP50, SrvListP99 float64
	SampleErrors                                 int     `json:"sample_errors"`
	Cores                                        float64 `json:"cpu_cores"`
	SimCPUSeconds                                float64 `json:"sim_cpu_s"` // this process: the rack and the clients
	CPUSeconds                                   float64 `json:"cpu_s"`
	RSSPeakMiB, RSSEndMiB                        float64
	Boot                                         string           `json:"boot"`
	PXE                                          *pxeboot.Summary `json:"pxe,omitempty"`
	// SamplerCPUSeconds is the API sampler process's CPU; CPUBusy is every
	// CPU's busy time over the storm in cores (all processes on the
	// machine: the rest is other work); RunqWaitS is the time castiron's
	// threads waited runnable for a CPU (the OS's run queue, not Go's).
	SamplerCPUSeconds float64   `json:"sampler_cpu_s"`
	CPUBusy           []float64 `json:"cpu_busy_cores"`
	RunqWaitS         float64   `json:"castiron_runq_wait_s"`
	StormS            float64   `json:"storm_s"`
}

// runStorm runs one storm against bin (castiron, target names it) and
// returns its figures.
func runStorm(c config, s *stormConfig, target string, run int, bin string, pin pinning) stormResult {
	s.latMin, s.latMax, s.base, s.port = c.latMin, c.latMax, c.base, c.port
	raiseNoFile(uint64(4*s.n + 8192))
	pinSelf(pin.bench, s.home)
	r := stormResult{Target: target, Run: run, N: s.n, PhaseS: map[string]float64{}, Pinning: pin.String()}
	// A storm of its own: its data directory and profiles apart from the
	// other pinning's of the same run.
	label := target
	if pin != (pinning{}) {
		label += "-pinned"
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("storm-%s-%d-%d", label, s.n, run))
	imgDir := filepath.Join(dir, "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		log.Fatal(err)
	}
	img := make([]byte, s.imageMiB<<20)
	for i := range img {
		img[i] = byte(i * 7)
	}
	sum := sha256.Sum256(img)
	if err := os.WriteFile(filepath.Join(imgDir, "storm.img"), img, 0o644); err != nil {
		log.Fatal(err)
	}
	r.Boot = s.boot
	addr := freeAddr()
	url := "http://" + addr
	args := []string{"--netboot-http", "--public-url", url, "--callback-timeout", "30m"}
	var pxe *pxeboot.Client
	if s.boot == "pxe" {
		addr = freeAddrOn(s.pxeAddr)
		url = "http://" + addr
		rd := filepath.Join(dir, "ramdisk")
		if err := os.MkdirAll(rd, 0o755); err != nil {
			log.Fatal(err)
		}
		for name, mib := range map[string]int{"vmlinuz": s.kernelMiB, "initramfs": s.initrdMiB} {
			if err := os.WriteFile(filepath.Join(rd, name), make([]byte, mib<<20), 0o644); err != nil {
				log.Fatal(err)
			}
		}
		// --insecure-noauth: the API listens on the provisioning network
		// of the namespaces storm.sh created, nobody else on it.
		args = []string{"--pxe-interface", s.pxeIf, "--public-url", url, "--ramdisk-dir", rd, "--callback-timeout", "30m", "--insecure-noauth"}
		if s.pxeRange != "" {
			args = append(args, "--dhcp-range", s.pxeRange)
		}
		var err error
		if pxe, err = pxeboot.New(pxeboot.Config{Netns: s.pxeNetns, Interface: s.pxeClientIf}); err != nil {
			log.Fatal(err)
		}
		defer pxe.Close()
	}
	pprofAddr := ""
	if s.pprof != "" {
		pprofAddr = freeAddr()
		args = append(args, "--pprof-listen", pprofAddr)
	}
	srv, err := startCastironEnv(bin, pin.castiron, dir, addr, s.env[target], args...)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	log.Printf("storm N=%d: starting the rack (boot %s)", s.n, s.boot)
	var netboot func(context.Context, *rack.Machine) (string, *http.Client, error)
	if pxe != nil {
		netboot = func(ctx context.Context, m *rack.Machine) (string, *http.Client, error) {
			mac, err := net.ParseMAC(m.MACs[0])
			if err != nil {
				return "", nil, err
			}
			u, err := pxe.Boot(ctx, pxeboot.Machine{MAC: mac, UEFI: m.Hardware.BootMode != "bios"})
			return u, pxe.HTTP, err
		}
	}
	rk, err := rack.Start(ctx, rack.Config{Netboot: netboot, N: s.n, Protocols: strings.Split(s.protocols, ","), BootURL: url, BootDelay: s.bootDelay, RamdiskDelay: s.bootDelay / 2,
		LatencyMin: s.latMin, LatencyMax: s.latMax, FailureRate: s.failure, FetchRamdisk: s.fetchRamdisk || pxe != nil,
		IPMIDistinct: true, IPMIBase: net.ParseIP(s.base), IPMIPort: s.port})
	if err != nil {
		log.Fatal(err)
	}
	defer rk.Close()
	// The storm's own client: one connection per node at once would take
	// 10,000 descriptors (a 10,000-node run ran out); requests queue for one
	// of 256 instead.
	cl := &rack.Client{URL: url, HTTP: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}}

	t0 := time.Now()
	ids := make([]string, s.n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < s.n; i = int(next.Add(1)) - 1 {
				id, err := cl.Enroll(ctx, rk.Machines[i], nil)
				if err != nil {
					log.Fatalf("enroll %s: %v", rk.Machines[i].Name, err)
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	r.EnrollS = time.Since(t0).Seconds()
	log.Printf("storm N=%d: enrolled in %.1f s; storm starts", s.n, r.EnrollS)

	pids := srv.pids()
	st := newStates()
	pollCtx, stopPoll := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { st.poll(pollCtx, cl) })
	lat := &latencies{}
	stopSampler := startSampler(dir, url, ids, lat, pin.bench)
	var rssMu sync.Mutex
	var rssPeak float64
	bg.Go(func() {
		for pollCtx.Err() == nil {
			v := rssMiB(pids)
			rssMu.Lock()
			rssPeak = max(rssPeak, v)
			rssMu.Unlock()
			time.Sleep(time.Second)
		}
	})

	ts := time.Now()
	if pxe != nil {
		pxe.Stats.Reset()
	}
	cpu0 := cpuTicks(pids)
	sim0 := selfCPU()
	busy0 := cpuBusy()
	runq0 := runqWaitNs(pids)
	hist0 := scrapeDurations(url)
	prof := newStormProfiles(s, label, run, pprofAddr)
	prof.start(pollCtx)
	verbs := []string{"manage", "inspect", "provide", "active"}
	var mu sync.Mutex
	done := map[string]time.Time{}
	var failed atomic.Int64
	var firstErr atomic.Value
	for _, id := range ids {
		wg.Go(func() {
			for _, v := range verbs {
				var err error
				if v == "active" {
					err = cl.Do(ctx, "PATCH", "/v1/nodes/"+id, []map[string]any{
						{"op": "add", "path": "/instance_info/image_source", "value": "storm.img"},
						{"op": "add", "path": "/instance_info/image_checksum", "value": hex.EncodeToString(sum[:])},
					}, nil, http.StatusOK)
				}
				if err == nil {
					err = cl.Do(ctx, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": v}, nil, http.StatusAccepted)
				}
				if err == nil {
					err = st.wait(ctx, id, rack.Stable[v], time.Now())
				}
				if err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(fmt.Sprintf("%s: %v", v, err))
					}
					return
				}
				mu.Lock()
				done[v] = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	end := time.Now()
	cpu1 := cpuTicks(pids)
	r.SimCPUSeconds = selfCPU() - sim0
	busy1 := cpuBusy()
	r.RunqWaitS = float64(runqWaitNs(pids)-runq0) / 1e9
	hist1 := scrapeDurations(url)
	prof.end() // heap and the others at the storm's end, before the pollers stop
	stopPoll()
	stopSampler()
	bg.Wait()
	prof.wait()
	r.SrvGetP50, r.SrvGetP99 = hist1.sub(hist0, "GET", "/nodes/{ident}").quantiles()
	r.SrvListP50, r.SrvListP99 = hist1.sub(hist0, "GET", "/nodes").quantiles()
	el := end.Sub(ts).Seconds()
	r.StormS = el
	for i := range min(len(busy0), len(busy1)) {
		r.CPUBusy = append(r.CPUBusy, float64(busy1[i]-busy0[i])/100/el)
	}
	r.SamplerCPUSeconds = lat.cpuS
	for _, v := range verbs {
		if t, ok := done[v]; ok {
			r.PhaseS[v] = t.Sub(ts).Seconds()
		}
	}
	r.LastActiveS = r.PhaseS["active"]
	r.Failed = int(failed.Load())
	r.Active = s.n - r.Failed
	if e, ok := firstErr.Load().(string); ok {
		r.FirstError = e
	}
	r.CPUSeconds = float64(cpu1-cpu0) / 100
	r.Cores = r.CPUSeconds / el
	r.RSSPeakMiB = rssPeak
	r.RSSEndMiB = rssMiB(pids)
	r.GetP50, r.GetP99, r.GetP90, r.GetMax, r.GetN = lat.pct(&lat.get)
	r.ListP50, r.ListP99, r.ListP90, r.ListMax, r.ListN = lat.pct(&lat.list)
	r.SampleErrors = int(lat.errs.Load())
	if pxe != nil {
		sum := pxe.Stats.Summary()
		r.PXE = &sum
	}
	return r
}

// states is every node's provision state, read by one poller (a list every
// half second) instead of N clients polling their node.
type states struct {
	mu sync.Mutex
	m  map[string]rack.Node
	// passStart is when the last complete pass over the fleet started: a
	// state it read may be older than that, never newer.
	passStart time.Time
}

func newStates() *states { return &states{m: map[string]rack.Node{}} }

func (s *states) poll(ctx context.Context, cl *rack.Client) {
	for ctx.Err() == nil {
		marker := ""
		start := time.Now()
		complete := false
		for {
			var page struct {
				Nodes []rack.Node `json:"nodes"`
			}
			path := "/v1/nodes?limit=1000&fields=uuid,name,provision_state,last_error"
			if marker != "" {
				path += "&marker=" + marker
			}
			if err := cl.Do(ctx, "GET", path, nil, &page, http.StatusOK); err != nil {
				break
			}
			s.mu.Lock()
			for _, n := range page.Nodes {
				s.m[n.UUID] = n
			}
			s.mu.Unlock()
			if len(page.Nodes) < 1000 {
				complete = true
				break
			}
			marker = page.Nodes[len(page.Nodes)-1].UUID
		}
		if complete {
			s.mu.Lock()
			s.passStart = start
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stableStates are where a verb starts from and, when it fails early,
// returns to.
var stableStates = map[string]bool{"enroll": true, "manageable": true, "available": true, "active": true}

// wait: the poller saw the node in want in a pass that started after
// the verb was accepted (at since), so an old state of the node does not
// count (a fixed wait for the next pass did not suffice: at 1,000 nodes a
// pass could take longer and a node still "manageable" from before its
// inspection was taken as inspected); a failure state is an error.
func (s *states) wait(ctx context.Context, id, want string, since time.Time) error {
	for {
		s.mu.Lock()
		n, current := s.m[id], s.passStart.After(since)
		s.mu.Unlock()
		switch {
		case !current:
		case n.ProvisionState == want:
			return nil
		case strings.HasSuffix(n.ProvisionState, "failed"):
			return fmt.Errorf("node %s is %s: %s", n.Name, n.ProvisionState, n.LastError)
		case n.LastError != "" && stableStates[n.ProvisionState]:
			// Back where it started, with the reason (a manage whose BMC
			// check failed returns to enroll): waiting would never end.
			return fmt.Errorf("node %s is %s, not %s: %s", n.Name, n.ProvisionState, want, n.LastError)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s is %s, not %s: %v", n.Name, n.ProvisionState, want, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// latencies samples GET /v1/nodes/{id} and GET /v1/nodes?limit=100, ten
// of each a second, through their own connection.
type latencies struct {
	mu        sync.Mutex
	get, list []time.Duration
	errs      atomic.Int64
	cpuS      float64 // the sampler process's CPU seconds
}

func (l *latencies) sample(ctx context.Context, url string, ids []string) {
	hc := &http.Client{Timeout: 30 * time.Second}
	one := func(path string, into *[]time.Duration) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+path, nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
		t := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				l.errs.Add(1)
			}
			return
		}
		var v map[string]any
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		d := time.Since(t)
		if err != nil || resp.StatusCode != 200 {
			l.errs.Add(1)
			return
		}
		l.mu.Lock()
		*into = append(*into, d)
		l.mu.Unlock()
	}
	for ctx.Err() == nil {
		one("/v1/nodes/"+ids[rand.N(len(ids))], &l.get)
		one("/v1/nodes?limit=100", &l.list)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *latencies) pct(ds *[]time.Duration) (p50, p99, p90, max float64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(*ds)
	if len(s) == 0 {
		return 0, 0, 0, 0, 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}
	return ms(0.50), ms(0.99), ms(0.90), ms(1), len(s)
}

// raiseNoFile lifts this process's descriptor limit (and so castiron's,
// started from it) to n when it is lower: the rack holds a listener or a
// socket per BMC, the connections castiron opens to them and the agents'
// connections (a 10,000-machine storm ran out at 20,000). Raising the hard
// limit needs CAP_SYS_RESOURCE; without it the limit stays and is logged.
func raiseNoFile(n uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= n {
		return
	}
	want := syscall.Rlimit{Cur: n, Max: max(n, rl.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		log.Printf("storm: open files limit stays %d (wanted %d): %v", rl.Cur, n, err)
		return
	}
	log.Printf("storm: open files limit %d -> %d", rl.Cur, n)
}

// selfCPU is this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func stormTable(rs []stormResult) string {
	var b strings.Builder
	b.WriteString("\n| castiron | run | N | enroll | manageable | inspected | available | last active | active / failed | GET node p50/p90/p99/max | list100 p50/p90/p99/max | castiron's own GET node / list p50, p99 (buckets) | samples | CPU cores (s) | RSS peak / end | simulator CPU |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f s | %.1f s | %.1f s | %.1f s | %.1f s | %d / %d | %.1f / %.1f / %.1f / %.0f ms | %.1f / %.1f / %.1f / %.0f ms | <=%g, <=%g / <=%g, <=%g ms | %d+%d (%d errors) | %.2f (%.0f s) | %.0f / %.0f MiB | %.0f s |\n",
			r.Target+" ("+r.Pinning+")", r.Run, r.N, r.EnrollS, r.PhaseS["manage"], r.PhaseS["inspect"], r.PhaseS["provide"], r.LastActiveS, r.Active, r.Failed,
			r.GetP50, r.GetP90, r.GetP99, r.GetMax, r.ListP50, r.ListP90, r.ListP99, r.ListMax,
			r.SrvGetP50, r.SrvGetP99, r.SrvListP50, r.SrvListP99,
			r.GetN, r.ListN, r.SampleErrors, r.Cores, r.CPUSeconds, r.RSSPeakMiB, r.RSSEndMiB, r.SimCPUSeconds)
		if r.FirstError != "" {
			fmt.Fprintf(&b, "\nfirst failure at N=%d: %s\n", r.N, r.FirstError)
		}
	}
	b.WriteString("\nWhere the CPU went during each storm (cores: CPU seconds over the storm's seconds): castiron's own, the time its threads waited runnable for a CPU (OS run queue), the bench (rack, agents, the storm's client), the API sampler, every CPU's busy time (all processes on the machine), and the rest of the machine's (other work: other helpers, the OS).\n\n")
	b.WriteString("| castiron | run | storm | castiron cores | castiron run-queue wait (s per s) | bench cores | sampler cores | busy per CPU (cores) | other work (cores) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		if r.StormS == 0 {
			continue
		}
		var busy, total float64
		var per []string
		for _, c := range r.CPUBusy {
			per = append(per, fmt.Sprintf("%.2f", c))
			total += c
		}
		busy = total - r.Cores - r.SimCPUSeconds/r.StormS - r.SamplerCPUSeconds/r.StormS
		fmt.Fprintf(&b, "| %s (%s) | %d | %.1f s | %.2f | %.2f | %.2f | %.2f | %s | %.2f |\n",
			r.Target, r.Pinning, r.Run, r.StormS, r.Cores, r.RunqWaitS/r.StormS, r.SimCPUSeconds/r.StormS, r.SamplerCPUSeconds/r.StormS,
			strings.Join(per, " / "), busy)
	}
	var pxe bool
	for _, r := range rs {
		pxe = pxe || r.PXE != nil
	}
	if !pxe {
		return b.String()
	}
	b.WriteString("\nBoot phase over castiron's provisioning network (DHCP, TFTP, HTTP from the machines' namespace); rates: mean over the seconds with that traffic / busiest second.\n\n")
	b.WriteString("| castiron | run | N | DORAs (errors) | DORA/s mean / peak | DORA p50 / p99 / max | TFTP transfers (errors) | TFTP/s mean / peak | TFTP MB (MB/s mean / peak) | HTTP requests (errors) | HTTP MB | HTTP MB/s mean / peak |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		p := r.PXE
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d (%d) | %.0f / %.0f | %.1f / %.1f / %.0f ms | %d (%d) | %.0f / %.0f | %.0f (%.1f / %.1f) | %d (%d) | %.0f | %.0f / %.0f |\n",
			r.Target, r.Run, r.N, p.DORAs, p.DORAErrors, p.DORAPerSMean, p.DORAPerSPeak, p.DORAP50, p.DORAP99, p.DORAMax,
			p.TFTPs, p.TFTPErrors, p.TFTPPerSMean, p.TFTPPerSPeak, p.TFTPMB, p.TFTPMBpsMean, p.TFTPMBpsPeak,
			p.HTTPRequests, p.HTTPErrors, p.HTTPMB, p.HTTPMBpsMean, p.HTTPMBpsPeak)
	}
	return b.String()
}
