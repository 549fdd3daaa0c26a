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
	"database/sql"
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

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

const apiVersion = "1.89"

type server struct {
	name, base string
	cmd        *exec.Cmd
	pprof      string // base URL of its pprof server, "" without -profile
}

// profileDir, when set (-profile), receives a CPU profile of the first
// server of each setup for each phase, and pg_stat_statements' top
// statements of each PostgreSQL setup.
var profileDir string

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
	var pprofAddr string
	if profileDir != "" {
		pprofAddr = freeAddr()
		args = append(args, "--pprof-listen", pprofAddr)
	}
	os.MkdirAll(dir, 0o755)
	logf, _ := os.Create(filepath.Join(dir, name+".log"))
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dir, "--conductor-name", name, "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	s := &server{name: name, base: "http://" + addr, cmd: cmd}
	if pprofAddr != "" {
		s.pprof = "http://" + pprofAddr
	}
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

// profile starts a CPU profile of s for secs seconds, written to
// profileDir/label.pprof; wait for it with the returned func.
func (s *server) profile(label string, secs int) func() {
	if s.pprof == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.pprof, secs))
		if err != nil {
			log.Printf("profile %s: %v", label, err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(profileDir, label+".pprof"))
		if err != nil {
			log.Print(err)
			return
		}
		defer f.Close()
		io.Copy(f, resp.Body)
	}()
	return func() { <-done }
}

// measure enrolls nodes through servers (round robin) and measures.
func measure(label string, servers []*server, nodes int) (result, []string) {
	var r result
	prof := func(phase string) func() { return servers[0].profile(label+"-"+phase, 2) }
	defer prof("creates")()
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
	// list 100 from the middle (keyset marker), sequential, median of 50
	// (and then on for the profile's two seconds).
	wait := prof("list100")
	var lat []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		pick(i).do("GET", "/v1/nodes?limit=100&marker="+uuids[nodes/2+i], nil)
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	sort.Float64s(lat)
	r.list100MS = lat[len(lat)/2]
	if servers[0].pprof != "" {
		for t0 := time.Now(); time.Since(t0) < 2*time.Second; {
			pick(0).do("GET", "/v1/nodes?limit=100&marker="+uuids[nodes/4], nil)
		}
	}
	wait()
	defer prof("get")()
	r.getPerS = parallel(20000, 16, func(i int) bool {
		code, _ := pick(i).do("GET", "/v1/nodes/"+uuids[(i*7919)%nodes], nil)
		return code == 200
	})
	defer prof("verbs")()
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
	flag.StringVar(&profileDir, "profile", "", "directory for CPU profiles of each phase and PostgreSQL's top statements (pg_stat_statements)")
	flag.Parse()
	tmp, _ := os.MkdirTemp("", "castiron-scaleout-")
	defer os.RemoveAll(tmp)
	var settings []string
	if profileDir != "" {
		os.MkdirAll(profileDir, 0o755)
		settings = append(settings, "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all")
	}
	pg, err := pgtest.Start(settings...)
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Stop()
	rows := map[string]result{}

	s := start(*bin, filepath.Join(tmp, "sqlite"), "c1")
	rows["1 conductor, SQLite"], _ = measure("sqlite", []*server{s}, *nodes)
	s.stop()

	db := mustDB(pg)
	s = start(*bin, filepath.Join(tmp, "pg1"), "c1", "--database", db)
	rows["1 conductor, PostgreSQL"], _ = measure("pg1", []*server{s}, *nodes)
	s.stop()
	topStatements(db, "pg1")

	db = mustDB(pg)
	var three []*server
	for _, n := range []string{"c1", "c2", "c3"} {
		three = append(three, start(*bin, filepath.Join(tmp, "pg3-"+n), n, "--database", db))
	}
	rows["3 conductors, PostgreSQL"], _ = measure("pg3", three, *nodes)
	topStatements(db, "pg3")

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

// topStatements writes pg_stat_statements' 25 most expensive statements of
// database db to profileDir/label-statements.txt (with -profile).
func topStatements(db, label string) {
	if profileDir == "" {
		return
	}
	conn, err := sql.Open("pgx", db)
	if err != nil {
		log.Print(err)
		return
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		log.Print(err)
		return
	}
	rows, err := conn.QueryContext(ctx, `SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), rows, left(regexp_replace(query, '\s+', ' ', 'g'), 160)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 25`)
	if err != nil {
		log.Print(err)
		return
	}
	defer rows.Close()
	var b bytes.Buffer
	fmt.Fprintln(&b, "calls\ttotal_ms\tmean_ms\trows\tquery")
	for rows.Next() {
		var calls, nrows int64
		var total, mean, q string
		rows.Scan(&calls, &total, &mean, &nrows, &q)
		fmt.Fprintf(&b, "%d\t%s\t%s\t%d\t%s\n", calls, total, mean, nrows, q)
	}
	os.WriteFile(filepath.Join(profileDir, label+"-statements.txt"), b.Bytes(), 0o644)
}
