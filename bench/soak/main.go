// Command soak measures castiron's memory with a fleet under management
// and whether it stays flat under churn (issue 28): it enrolls -fleet
// fake-hardware nodes and manages them, then runs -rounds rounds that each
// take -cycle more nodes enroll -> manageable -> available -> deleted, with
// -readers clients reading GET node and list100 all along. After the fleet
// and after each round it prints the server's RSS (VmRSS) and Go heap
// (in use, from a pprof heap profile taken after a GC, kept in -profile).
//
//	go build -o /tmp/castiron . && go run ./bench/soak -bin /tmp/castiron [-- serve flags]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const apiVersion = "1.89"

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type server struct {
	base, pprof string
	cmd         *exec.Cmd
}

func (s *server) do(method, path string, body any) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("X-OpenStack-Ironic-API-Version", apiVersion)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// node takes a new node through enroll -> manageable (-> available ->
// deleted when cycle), returning its uuid ("" on failure).
func (s *server) node(name string, cycle bool) string {
	code, out := s.do("POST", "/v1/nodes", map[string]any{"name": name, "driver": "fake-hardware",
		"properties": map[string]any{"cpus": 32, "memory_mb": 131072, "local_gb": 400}, "resource_class": "baremetal"})
	if code != 201 {
		return ""
	}
	u, _ := out["uuid"].(string)
	if !s.move(u, "manage", "manageable") {
		return ""
	}
	if !cycle {
		return u
	}
	if !s.move(u, "provide", "available") {
		return ""
	}
	if code, _ := s.do("DELETE", "/v1/nodes/"+u, nil); code != 204 {
		return ""
	}
	return u
}

func (s *server) move(u, verb, want string) bool {
	if code, _ := s.do("PUT", "/v1/nodes/"+u+"/states/provision", map[string]any{"target": verb}); code != 202 {
		return false
	}
	for i := 0; i < 600; i++ {
		_, n := s.do("GET", "/v1/nodes/"+u+"?fields=provision_state", nil)
		if n["provision_state"] == want {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// parallel runs fn(i) for i < n over workers goroutines; returns failures.
func parallel(n, workers int, fn func(i int) bool) int64 {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if !fn(i) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return failed.Load()
}

// rssMiB is VmRSS of pid.
func rssMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// heap saves a heap profile (after a GC) as dir/label.pprof and returns
// the live heap it was taken with (HeapAlloc of debug=1's MemStats).
func (s *server) heap(dir, label string) float64 {
	resp, err := client.Get(s.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	os.WriteFile(filepath.Join(dir, label+".pprof"), b, 0o644)
	resp, err = client.Get(s.pprof + "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n / (1 << 20)
		}
	}
	return 0
}

func main() {
	bin := flag.String("bin", "./castiron", "castiron binary")
	fleet := flag.Int("fleet", 10000, "nodes enrolled and managed, kept all along")
	cycle := flag.Int("cycle", 2000, "nodes taken enroll -> available -> deleted per round")
	rounds := flag.Int("rounds", 5, "soak rounds")
	readers := flag.Int("readers", 4, "clients reading all along (GET node, list100)")
	withPprof := flag.Bool("pprof", true, "run castiron with --pprof-listen and take heap profiles (false for a binary without the flag)")
	profDir := flag.String("profile", "", "directory for the heap profiles (default: a temp dir, removed)")
	flag.Parse()
	tmp, _ := os.MkdirTemp("", "castiron-soak-")
	defer os.RemoveAll(tmp)
	if *profDir == "" {
		*profDir = filepath.Join(tmp, "profiles")
	}
	os.MkdirAll(*profDir, 0o755)
	addr, paddr := freeAddr(), freeAddr()
	args := append([]string{"serve", "--listen", addr, "--data-dir", filepath.Join(tmp, "data"), "--conductor-name", "soak",
		"--log-level", "warn", "--automated-clean=false"}, flag.Args()...)
	if *withPprof {
		args = append(args, "--pprof-listen", paddr)
	}
	cmd := exec.Command(*bin, args...)
	logf, _ := os.Create(filepath.Join(tmp, "castiron.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s := &server{base: "http://" + addr, pprof: "http://" + paddr, cmd: cmd}
	for i := 0; ; i++ {
		if code, _ := s.do("GET", "/v1", nil); code == 200 {
			break
		}
		if i > 600 {
			log.Fatal("castiron did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	fmt.Printf("castiron %s, serve flags %q; load %s\n", *bin, flag.Args(), loadavg())
	fmt.Printf("idle: RSS %.1f MiB\n", rssMiB(pid))

	uuids := make([]string, *fleet)
	t0 := time.Now()
	failed := parallel(*fleet, 16, func(i int) bool {
		uuids[i] = s.node(fmt.Sprintf("f%05d", i), false)
		return uuids[i] != ""
	})
	fmt.Printf("fleet: %d nodes managed in %.0f s (%d failed)\n", *fleet, time.Since(t0).Seconds(), failed)

	stop := make(chan struct{})
	var rwg sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < *readers; r++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := uuids[rand.IntN(len(uuids))]
				if i%4 == 0 {
					s.do("GET", "/v1/nodes?limit=100&marker="+u, nil)
				} else {
					s.do("GET", "/v1/nodes/"+u, nil)
				}
				reads.Add(1)
			}
		}()
	}
	time.Sleep(3 * time.Second)
	base := rssMiB(pid)
	heap0 := s.heap(*profDir, "round0")
	fmt.Printf("\n| round | nodes cycled (total) | RSS MiB | x round 0 | Go heap in use MiB | reads |\n|---|---|---|---|---|---|\n")
	fmt.Printf("| 0 (fleet of %d managed, reads running) | 0 | %.1f | 1.00 | %.1f | %d |\n", *fleet, base, heap0, reads.Load())
	total := 0
	for r := 1; r <= *rounds; r++ {
		f := parallel(*cycle, 16, func(i int) bool { return s.node(fmt.Sprintf("c%d-%05d", r, i), true) != "" })
		total += *cycle
		rss := rssMiB(pid)
		h := s.heap(*profDir, fmt.Sprintf("round%d", r))
		fmt.Printf("| %d | %d (%d) | %.1f | %.2f | %.1f | %d |", r, *cycle, total, rss, rss/base, h, reads.Load())
		if f > 0 {
			fmt.Printf(" %d cycles failed", f)
		}
		fmt.Println()
	}
	close(stop)
	rwg.Wait()
	fmt.Printf("\nload at end %s; heap profiles in %s\n", loadavg(), *profDir)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
