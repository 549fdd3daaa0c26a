// Command scaleout measures castiron on SQLite against PostgreSQL on one
// conductor, and one against three conductors over PostgreSQL, side by side
// in one run (issue 14): creates/s, list 100 at 10k nodes, GET node, verbs/s
// across 10k nodes, and the takeover time after kill -9.
//
//	go build -o /tmp/castiron . && go run ./bench/scaleout -bin /tmp/castiron
//
// PostgreSQL is a throwaway server (storage/pgtest) with its default
// durability (fsync on, synchronous_commit on); everything listens on
// loopback only.
package main

import (
	"bytes"
	"context"
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
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"castiron/storage/pgtest"
)

const apiVersion = "1.89"

type server struct {
	name, base string
	cmd        *exec.Cmd
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func start(bin, dir, name string, args ...string) *server {
	addr := freeAddr()
	os.MkdirAll(dir, 0o755)
	logf, _ := os.Create(filepath.Join(dir, name+".log"))
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dir, "--conductor-name", name, "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	s := &server{name: name, base: "http://" + addr, cmd: cmd}
	for i := 0; i < 600; i++ {
		if code, _ := s.do("GET", "/v1", nil); code == 200 {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatalf("%s did not start", name)
	return nil
}

func (s *server) stop() { s.cmd.Process.Kill(); s.cmd.Wait() }

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

// parallel runs n calls of fn over workers goroutines; returns calls/s.
func parallel(n, workers int, fn func(i int) bool) float64 {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if !fn(i) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		log.Printf("%d of %d calls failed", failed.Load(), n)
	}
	return float64(n) / time.Since(t0).Seconds()
}

type result struct {
	createsPerS, list100MS, getPerS, verbsPerS float64
}

// measure enrolls nodes through servers (round robin) and measures.
func measure(servers []*server, nodes int) (result, []string) {
	var r result
	uuids := make([]string, nodes)
	pick := func(i int) *server { return servers[i%len(servers)] }
	r.createsPerS = parallel(nodes, 16, func(i int) bool {
		code, out := pick(i).do("POST", "/v1/nodes", map[string]any{"name": fmt.Sprintf("n%05d", i), "driver": "fake-hardware",
			"properties": map[string]any{"cpus": 32, "memory_mb": 131072}, "resource_class": "baremetal"})
		if code != 201 {
			return false
		}
		uuids[i], _ = out["uuid"].(string)
		return true
	})
	// list 100 from the middle (keyset marker), sequential, median of 50.
	var lat []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		pick(i).do("GET", "/v1/nodes?limit=100&marker="+uuids[nodes/2+i], nil)
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	sort.Float64s(lat)
	r.list100MS = lat[len(lat)/2]
	r.getPerS = parallel(20000, 16, func(i int) bool {
		code, _ := pick(i).do("GET", "/v1/nodes/"+uuids[(i*7919)%nodes], nil)
		return code == 200
	})
	// verbs: power on/off of fake-hardware nodes, each node once per round.
	r.verbsPerS = parallel(nodes, 16, func(i int) bool {
		code, _ := pick(i).do("PUT", "/v1/nodes/"+uuids[i]+"/states/power", map[string]any{"target": "power on"})
		return code == 202
	})
	return r, uuids
}

func main() {
	bin := flag.String("bin", "./castiron", "castiron binary")
	nodes := flag.Int("nodes", 10000, "nodes to enroll per setup")
	flag.Parse()
	tmp, _ := os.MkdirTemp("", "castiron-scaleout-")
	defer os.RemoveAll(tmp)
	pg, err := pgtest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Stop()
	rows := map[string]result{}

	s := start(*bin, filepath.Join(tmp, "sqlite"), "c1")
	rows["1 conductor, SQLite"], _ = measure([]*server{s}, *nodes)
	s.stop()

	s = start(*bin, filepath.Join(tmp, "pg1"), "c1", "--database", mustDB(pg))
	rows["1 conductor, PostgreSQL"], _ = measure([]*server{s}, *nodes)
	s.stop()

	db := mustDB(pg)
	var three []*server
	for _, n := range []string{"c1", "c2", "c3"} {
		three = append(three, start(*bin, filepath.Join(tmp, "pg3-"+n), n, "--database", db))
	}
	rows["3 conductors, PostgreSQL"], _ = measure(three, *nodes)

	// Takeover: kill -9 c2, time until /v1/conductors says it is dead and
	// until no node is owned by it.
	three[1].cmd.Process.Signal(syscall.SIGKILL)
	three[1].cmd.Wait()
	t0 := time.Now()
	var dead, moved time.Duration
	for time.Since(t0) < 2*time.Minute && moved == 0 {
		if dead == 0 {
			_, cs := three[0].do("GET", "/v1/conductors", nil)
			for _, v := range cs["conductors"].([]any) {
				if c := v.(map[string]any); c["hostname"] == "c2" && c["alive"] == false {
					dead = time.Since(t0)
				}
			}
		} else if _, l := three[2].do("GET", "/v1/nodes?conductor=c2&limit=1", nil); l != nil && len(l["nodes"].([]any)) == 0 {
			moved = time.Since(t0)
		}
		time.Sleep(100 * time.Millisecond)
	}
	three[0].stop()
	three[2].stop()

	fmt.Printf("\n%d nodes, fake-hardware, 16 concurrent clients, loopback\n\n", *nodes)
	fmt.Println("| setup | creates/s | list 100 at 10k (median ms) | GET node /s | power verbs/s |")
	fmt.Println("|---|---|---|---|---|")
	for _, k := range []string{"1 conductor, SQLite", "1 conductor, PostgreSQL", "3 conductors, PostgreSQL"} {
		r := rows[k]
		fmt.Printf("| %s | %.0f | %.1f | %.0f | %.0f |\n", k, r.createsPerS, r.list100MS, r.getPerS, r.verbsPerS)
	}
	fmt.Printf("\ntakeover after kill -9 (heartbeat 5 s, timeout 15 s): alive=false after %s, all nodes on alive owners after %s\n",
		dead.Round(100*time.Millisecond), moved.Round(100*time.Millisecond))
}

func mustDB(pg *pgtest.Server) string {
	u, err := pg.NewDatabase(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return u
}
