// Command fleet measures power sync against a fleet of simulated IPMI BMCs
// (engine/driver/bmcsim/ipmisim: IPMI 2.0 lanplus, cipher suite 17, every
// answer 20-50 ms late, each BMC on its own 127.x.y.z address), side by side
// in one run: castiron before (main's sequential loop), castiron after, and
// OpenStack Ironic 21.4 with its ipmi driver (ipmitool) where it can run.
//
// For every N and target: a fresh fleet of N BMCs, a fresh server, N ipmi
// nodes created "available" (API 1.10, so no BMC is touched before the
// sync), power sync as fast as the target goes (interval 1 s). Counted at
// the BMCs, so every target is measured the same way:
//
//   - cold sweep: from the last node created until every BMC was read once
//     (session setup included), capped at -cold-cap;
//
//   - reads/min over a -window that starts once the cold sweep is done (or
//     capped), and the warm sweep: from the window's start until every BMC
//     was read again (extrapolated as N / rate when the window ends first,
//     marked ~);
//
//   - the server's CPU (cores, children included: Ironic's ipmitool
//     processes) over the window and its RSS at the end.
//
//     bench/fleet/run.sh   (builds main's and this tree's castiron)
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	before, after, ironicRef string
	targets                  []string
	ns                       []int
	ironicMaxN               int
	window, coldCap          time.Duration
	latMin, latMax           time.Duration
	base, rfBase             string
	bmc                      string
	port                     int
	// workers is --power-sync-workers of the pg1/pg3 targets: what bounds
	// one conductor's BMC reads with slow BMCs.
	workers int
	dir     string
	jsonl   string
	// verbs adds the power verbs phase (verbs.go) after the window.
	verbs        bool
	verbDeadline time.Duration
}

type result struct {
	Target      string       `json:"target"`
	N           int          `json:"n"`
	CreateS     float64      `json:"create_s"`
	ColdSweepS  float64      `json:"cold_sweep_s"`
	ColdDone    bool         `json:"cold_done"`
	ReadsPerMin float64      `json:"reads_per_min"`
	SweepS      float64      `json:"sweep_s"`
	SweepExact  bool         `json:"sweep_measured"`
	Cores       float64      `json:"cpu_cores"`
	RSSMiB      float64      `json:"rss_mib"`
	Packets     uint64       `json:"packets_per_read_x100"`
	Errors      string       `json:"errors,omitempty"`
	Verbs       []verbResult `json:"verbs,omitempty"`
}

func main() {
	var c config
	var targets, ns string
	flag.StringVar(&c.before, "before", "", "castiron binary built from main (sequential power sync)")
	flag.StringVar(&c.after, "after", "", "castiron binary built from this tree")
	flag.StringVar(&c.ironicRef, "ironic-ref", "", "shared/ironic-reference directory (start.sh, stop.sh, ironic.conf.template)")
	flag.StringVar(&targets, "targets", "before,after,ironic", "targets, in column order")
	flag.StringVar(&ns, "n", "100,1000,10000", "fleet sizes")
	flag.IntVar(&c.ironicMaxN, "ironic-max-n", 1000, "largest N Ironic is run at")
	flag.DurationVar(&c.window, "window", 60*time.Second, "measuring window")
	flag.DurationVar(&c.coldCap, "cold-cap", 90*time.Second, "longest wait for the first (cold) sweep")
	flag.DurationVar(&c.latMin, "latency-min", 20*time.Millisecond, "BMC answer delay, lower bound")
	flag.DurationVar(&c.latMax, "latency-max", 50*time.Millisecond, "BMC answer delay, upper bound")
	flag.StringVar(&c.bmc, "bmc", "ipmi", "BMC protocol of the fleet: ipmi or redfish")
	flag.StringVar(&c.base, "base", "127.30.0.1", "first IPMI BMC address")
	flag.StringVar(&c.rfBase, "redfish-base", "127.40.0.1", "first Redfish BMC address")
	flag.IntVar(&c.port, "port", 0, "BMC port (default: 623 + 6000 for IPMI over UDP, 8000 for Redfish over HTTP)")
	flag.IntVar(&c.workers, "pg-workers", 16, "--power-sync-workers of each conductor of the pg1 and pg3 targets (castiron after on PostgreSQL: one conductor, three)")
	flag.StringVar(&c.dir, "dir", "", "work directory (data dirs, logs); default a new temp dir")
	flag.StringVar(&c.jsonl, "jsonl", "", "append one JSON line per result here")
	flag.BoolVar(&c.verbs, "verbs", false, "after the window, power every node on and off through the API and time it (verbs.go)")
	flag.DurationVar(&c.verbDeadline, "verb-deadline", 10*time.Minute, "longest wait for one verb over the whole fleet")
	storm := stormFlags()
	sampleURL := flag.String("storm-sample", "", "internal: be the storm's API sampler process on castiron at this URL")
	sampleIDs := flag.String("storm-sample-ids", "", "internal: the sampler's node uuids, one a line")
	flag.Parse()
	if *sampleURL != "" {
		runSampler(*sampleURL, *sampleIDs)
		return
	}
	if c.port == 0 {
		c.port = map[string]int{"ipmi": 6623, "redfish": 8000}[c.bmc]
	}
	if storm.n > 0 {
		if c.dir == "" {
			c.dir, _ = os.MkdirTemp("", "castiron-storm.")
		}
		// Before and after (and unpinned and pinned) in turn, so that all
		// see the machine's load of the same minutes.
		storm.home = homeCPUs()
		pins := []pinning{{castiron: storm.castironCPUs, bench: storm.benchCPUs}}
		if storm.pinTurns {
			if pins[0] == (pinning{}) {
				log.Fatal("-storm-pin-turns needs -storm-castiron-cpus or -storm-bench-cpus")
			}
			pins = []pinning{{}, pins[0]}
		}
		var rs []stormResult
		for run := 1; run <= max(storm.runs, 1); run++ {
			for _, t := range []struct{ name, bin string }{{"before", c.before}, {"after", c.after}} {
				for _, pin := range pins {
					if t.bin == "" {
						continue
					}
					r := runStorm(c, storm, t.name, run, t.bin, pin)
					rs = append(rs, r)
					b, _ := json.Marshal(r)
					fmt.Fprintln(os.Stderr, string(b))
					if c.jsonl != "" {
						if f, err := os.OpenFile(c.jsonl, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
							f.Write(append(b, '\n'))
							f.Close()
						}
					}
				}
			}
		}
		fmt.Print(stormTable(rs))
		return
	}
	c.targets = strings.Split(targets, ",")
	for _, s := range strings.Split(ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			log.Fatalf("bad -n %q", s)
		}
		c.ns = append(c.ns, n)
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "castiron-fleet.")
		if err != nil {
			log.Fatal(err)
		}
		c.dir = d
	}
	var all []result
	for _, n := range c.ns {
		for _, t := range c.targets {
			if t == "ironic" && (c.ironicRef == "" || n > c.ironicMaxN) {
				continue
			}
			if (t == "before" && c.before == "") || ((t == "after" || t == "pg1" || t == "pg3") && c.after == "") {
				continue
			}
			r := run(c, t, n)
			all = append(all, r)
			b, _ := json.Marshal(r)
			fmt.Fprintln(os.Stderr, string(b))
			if c.jsonl != "" {
				f, err := os.OpenFile(c.jsonl, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err == nil {
					f.Write(append(b, '\n'))
					f.Close()
				}
			}
		}
	}
	if pgServer != nil {
		pgServer.Stop()
	}
	fmt.Print(table(c, all))
	fmt.Print(verbsTable(c, all))
}

// server is one running target.
type server struct {
	base  string
	bases []string // every API endpoint (each conductor's); nil: base only
	pids  func() []int
	stop  func()
}

func run(c config, target string, n int) result {
	r := result{Target: target, N: n}
	log.Printf("%s, N=%d: starting %d %s BMCs", target, n, n, c.bmc)
	start := startIPMI
	if c.bmc == "redfish" {
		start = startRedfish
	}
	fleet, err := start(c, n)
	if err != nil {
		r.Errors = err.Error()
		return r
	}
	defer fleet.Close()
	dir := filepath.Join(c.dir, fmt.Sprintf("%s-%d", target, n))
	var s *server
	switch target {
	case "before":
		s, err = startCastiron(c.before, dir)
	case "after":
		s, err = startCastiron(c.after, dir)
	case "ironic":
		s, err = startIronic(c.ironicRef, dir, c.bmc)
	case "pg1":
		s, err = startConductors(c, dir, 1)
	case "pg3":
		s, err = startConductors(c, dir, 3)
	default:
		err = fmt.Errorf("unknown target %q", target)
	}
	if err != nil {
		r.Errors = err.Error()
		return r
	}
	defer s.stop()

	t0 := time.Now()
	if failed := createNodes(s.base, fleet, 32); failed > 0 {
		r.Errors = fmt.Sprintf("%d node creates failed", failed)
	}
	r.CreateS = time.Since(t0).Seconds()
	log.Printf("%s, N=%d: %d nodes created in %.1f s", target, n, n, r.CreateS)

	// Cold sweep: every BMC read once.
	tc := time.Now()
	base := make([]uint64, n) // zeros: nothing was read before the nodes existed
	r.ColdDone = waitSwept(fleet, base, tc.Add(c.coldCap))
	r.ColdSweepS = time.Since(tc).Seconds()
	log.Printf("%s, N=%d: cold sweep %.1f s (done=%v)", target, n, r.ColdSweepS, r.ColdDone)

	// Window.
	snap := readsOf(fleet)
	reads0, traffic0 := fleet.TotalReads(), fleet.Traffic()
	cpu0 := cpuTicks(s.pids())
	tw := time.Now()
	end := tw.Add(c.window)
	r.SweepExact = waitSwept(fleet, snap, end)
	sweep := time.Since(tw)
	if rest := time.Until(end); rest > 0 {
		time.Sleep(rest)
	}
	el := time.Since(tw)
	reads1, traffic1 := fleet.TotalReads(), fleet.Traffic()
	cpu1 := cpuTicks(s.pids())
	reads := reads1 - reads0
	r.ReadsPerMin = float64(reads) / el.Minutes()
	if r.SweepExact {
		r.SweepS = sweep.Seconds()
	} else if r.ReadsPerMin > 0 {
		r.SweepS = float64(n) / r.ReadsPerMin * 60
	}
	if reads > 0 {
		r.Packets = (traffic1 - traffic0) * 100 / reads
	}
	r.Cores = float64(cpu1-cpu0) / 100 / el.Seconds() // USER_HZ 100
	r.RSSMiB = rssMiB(s.pids())
	log.Printf("%s, N=%d: %.0f reads/min, sweep %.1f s (measured=%v), %.2f cores, %.0f MiB", target, n, r.ReadsPerMin, r.SweepS, r.SweepExact, r.Cores, r.RSSMiB)
	if c.verbs {
		bases := s.bases
		if len(bases) == 0 {
			bases = []string{s.base}
		}
		r.Verbs = measureVerbs(bases, c.verbDeadline)
	}
	return r
}

func readsOf(f bmcs) []uint64 {
	out := make([]uint64, f.Len())
	for i := range out {
		out[i] = f.Reads(i)
	}
	return out
}

// waitSwept waits until every BMC has more reads than in base, or until
// deadline (false).
func waitSwept(f bmcs, base []uint64, deadline time.Time) bool {
	next := 0
	for {
		for next < f.Len() && f.Reads(next) > base[next] {
			next++
		}
		if next == f.Len() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// freeAddrOn is a free TCP port on host.
func freeAddrOn(host string) string {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startCastiron(bin, dir string, extra ...string) (*server, error) {
	return startCastironArgs(bin, dir, freeAddr(), append([]string{"--power-sync-interval", "1s"}, extra...)...)
}

// startCastironArgs runs castiron serve on addr with extra flags.
func startCastironArgs(bin, dir, addr string, extra ...string) (*server, error) {
	return startCastironEnv(bin, "", dir, addr, nil, extra...)
}

// startCastironEnv is startCastironArgs with env added to castiron's
// environment, on cpus (taskset -c; "": any).
func startCastironEnv(bin, cpus, dir, addr string, env []string, extra ...string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "castiron.log"))
	if err != nil {
		return nil, err
	}
	cmd := commandOn(cpus, bin, append([]string{"serve", "--listen", addr, "--data-dir", dir, "--log-level", "warn"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{
		base: "http://" + addr,
		pids: func() []int { return []int{cmd.Process.Pid} },
		stop: func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			logf.Close()
		},
	}
	if !waitUp(s.base, 30*time.Second) {
		s.stop()
		return nil, fmt.Errorf("castiron %s did not answer GET /v1 (log: %s)", bin, logf.Name())
	}
	return s, nil
}

// startIronic runs the reference Ironic (single process, SQLite) with power
// sync every second, sync_power_state_workers 8 (its default) and
// periodic_max_workers 100, as issue 28 sets a fair Ironic up.
func startIronic(ref, dir, bmc string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmpl, err := os.ReadFile(filepath.Join(ref, "ironic.conf.template"))
	if err != nil {
		return nil, err
	}
	conf := strings.Replace(string(tmpl), "[conductor]\n", "[conductor]\nsync_power_state_interval = 1\nsync_power_state_workers = 8\nperiodic_max_workers = 100\n", 1)
	if bmc == "redfish" {
		// The reference enables ipmi only; its redfish type (sushy, Debian's
		// python3-sushy) with the interfaces it needs.
		for _, kv := range [][2]string{{"enabled_hardware_types", "redfish"}, {"enabled_power_interfaces", "redfish"},
			{"enabled_management_interfaces", "redfish"}} {
			conf = strings.Replace(conf, kv[0]+" = ", kv[0]+" = "+kv[1]+",", 1)
		}
	}
	tp := filepath.Join(dir, "ironic.conf.template")
	if err := os.WriteFile(tp, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	port := strings.Split(freeAddr(), ":")[1]
	data := filepath.Join(dir, "data")
	cmd := exec.Command(filepath.Join(ref, "start.sh"), port, data)
	cmd.Env = append(os.Environ(), "TEMPLATE="+tp, "FRESH=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ironic start.sh: %v\n%s", err, out)
	}
	pids := func() []int { return descendants(readPids(filepath.Join(data, "ironic.pids"))) }
	return &server{
		base: "http://127.0.0.1:" + port,
		pids: pids,
		stop: func() {
			out, err := exec.Command(filepath.Join(ref, "stop.sh"), port, data).CombinedOutput()
			if err != nil {
				log.Printf("ironic stop.sh: %v\n%s", err, out)
			}
		},
	}, nil
}

func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// descendants is pids and every process below them.
func descendants(pids []int) []int {
	var out []int
	for q := pids; len(q) > 0; {
		p := q[0]
		q = q[1:]
		out = append(out, p)
		matches, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, m := range matches {
			b, _ := os.ReadFile(m)
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					q = append(q, c)
				}
			}
		}
	}
	return out
}

func waitUp(base string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/v1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
	}
	return false
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// createNodes enrolls one ipmi node per BMC with API 1.10: the node is
// "available" at once, as before enroll existed, so nothing but the power
// sync talks to the BMCs.
func createNodes(base string, f bmcs, workers int) int {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= f.Len() {
					return
				}
				body, _ := json.Marshal(f.Node(i))
				req, _ := http.NewRequest("POST", base+"/v1/nodes", bytes.NewReader(body))
				req.Header.Set("X-OpenStack-Ironic-API-Version", "1.10")
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					if failed.Add(1) == 1 {
						log.Printf("create: %d %s", resp.StatusCode, msg)
					}
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

// cpuTicks sums user+system time of pids and their reaped children.
func cpuTicks(pids []int) uint64 {
	var sum uint64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseUint(f[i], 10, 64)
			sum += v
		}
	}
	return sum
}

func rssMiB(pids []int) float64 {
	var kb float64
	for _, p := range pids {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				x, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				kb += x
			}
		}
		f.Close()
	}
	return kb / 1024
}
