package scaleout

// TestPostgresRestart (issue 26, item 4): three castiron conductors on one
// PostgreSQL server (durable: fsync and synchronous_commit on, the
// defaults), a burst of node creates, provision and power verbs and reads
// from several clients, and the server stopped in the middle of it (pg_ctl
// -m fast: clients disconnected, checkpoint; -m immediate: the server quits
// at once and recovers from its WAL at the next start, as after a crash)
// and started again on its data: for 2 s each, then immediate for 8 s, longer
// than the conductors' heartbeat timeout, as a slow failover would be.
// Checked: every answer during the outage is a success or a 503 with
// Ironic's error body (never a 500 or a hang), clients that retry get
// through once the server is back, the conductors reconnect by themselves
// (same processes), every acknowledged create is there afterwards, no node
// stays reserved or with a pending power operation, and the hash ring
// recovers (all three alive in /v1/conductors, nodes spread over them).

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"castiron/storage/pgtest"
	"castiron/tests/crashtest"
)

func TestPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs PostgreSQL and three conductors")
	}
	// No settings: the server keeps fsync and synchronous_commit on, so
	// castiron opens it without --database-non-durable-test and a restart
	// (or an immediate shutdown) can lose nothing that was committed.
	pg := pgtest.New(t)
	db := pg.Database(t)
	tmp := t.TempDir()
	bin := crashtest.Build(t, tmp)
	names := []string{"c1", "c2", "c3"}
	srv := map[string]*crashtest.Server{}
	for _, n := range names {
		dir := filepath.Join(tmp, n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Heartbeats every second, dead after 5 s: the long outage below
		// outlasts the timeout within a short test.
		srv[n] = crashtest.Start(t, bin, dir, tmp, "--database", db, "--conductor-name", n,
			"--heartbeat-interval", "1s", "--heartbeat-timeout", "5s")
	}
	pids := map[string]int{}
	for _, n := range names {
		pids[n] = srv[n].PID
	}
	ringAgreed(t, srv, names, "before the burst")

	for _, round := range []struct {
		name, mode string
		down       time.Duration
	}{
		{"fast", "fast", 2 * time.Second},
		{"immediate", "immediate", 2 * time.Second},
		// As a failover that takes a while: the server gone at once for
		// longer than the heartbeat timeout, so that every conductor's
		// heartbeat is stale when it is back.
		{"failover", "immediate", 8 * time.Second},
	} {
		mode := round.name
		r := burst(t, srv, names, mode, func() error { return restart(pg, round.mode, round.down) })
		t.Logf("%s shutdown: PostgreSQL down %s; %s", mode, r.down.Round(time.Millisecond), r.summary())
		for _, p := range r.bad {
			t.Errorf("%s shutdown: unclean answer: %s", mode, p)
		}
		for _, n := range names {
			for _, l := range srv[n].LogLines(`msg="internal error"`) {
				t.Errorf("%s shutdown: %s logged: %s", mode, n, l)
			}
		}
		if t.Failed() {
			return
		}
		// The conductors reconnected by themselves: the same processes.
		for _, n := range names {
			if !srv[n].Alive() || srv[n].PID != pids[n] {
				t.Fatalf("%s shutdown: conductor %s exited (pid %d)", mode, n, pids[n])
			}
		}
		// Every instance sees the three conductors alive, and the same
		// owners, spread over them.
		owners := ringAgreed(t, srv, names, mode+" shutdown")
		spread := countOwners(owners)
		for _, n := range names {
			if spread[n] < len(owners)/3*6/10 {
				t.Errorf("%s shutdown: %s owns %d of %d nodes", mode, n, spread[n], len(owners))
			}
		}
		settled(t, srv["c1"], mode, r)
	}
}

// outcome is what the clients saw in one burst.
type outcome struct {
	down time.Duration

	mu      sync.Mutex
	counts  map[string]int     // "create 201", "read 503", ...
	bad     []string           // answers that are neither a success nor a clean refusal
	created map[string]string  // acknowledged creates: uuid -> tag
	managed map[string]bool    // nodes a manage verb was acknowledged for
	powered map[string]bool    // nodes a power verb was acknowledged for
	seen503 map[string]float64 // first and last 503, seconds after the stop
	// ambiguous: nodes whose verb answered 503 and then, retried, 409
	// (locked): the 503's reservation was committed though its
	// connection broke. See settled.
	ambiguous map[string]bool
}

func (o *outcome) add(what string, code int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[fmt.Sprintf("%s %d", what, code)]++
}

func (o *outcome) badf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) < 20 {
		o.bad = append(o.bad, fmt.Sprintf(format, args...))
	}
}

func (o *outcome) summary() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]string, 0, len(o.counts))
	for k := range o.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "acknowledged creates %d, manage %d, power %d; answers:", len(o.created), len(o.managed), len(o.powered))
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, o.counts[k])
	}
	return b.String()
}

// ironicBody reports whether a refusal carries Ironic's error body: a JSON
// document with faultcode and faultstring inside the error_message string.
func ironicBody(out map[string]any) bool {
	s, ok := out["error_message"].(string)
	if !ok {
		return false
	}
	var inner map[string]any
	if json.Unmarshal([]byte(s), &inner) != nil {
		return false
	}
	msg, _ := inner["faultstring"].(string)
	return inner["faultcode"] == "Server" && msg != ""
}

// restart stops PostgreSQL with pg_ctl's mode, waits down and starts it
// again on its data.
func restart(pg *pgtest.Server, mode string, down time.Duration) error {
	if err := pg.Shutdown(mode); err != nil {
		return err
	}
	time.Sleep(down)
	return pg.Restart()
}

// burst runs 6 clients against the three conductors, runs outage (the
// database going away and coming back) 1.5 s into it, then goes on for
// 4.5 s. Two clients
// only create nodes; each other one creates a node, asks for a verb on it (manage, or power on), and reads it and a
// page of the list through another conductor; a 503 (or a dropped
// connection) is retried until it succeeds, for up to a minute.
func burst(t *testing.T, srv map[string]*crashtest.Server, names []string, mode string, outage func() error) *outcome {
	t.Helper()
	o := &outcome{counts: map[string]int{}, created: map[string]string{}, managed: map[string]bool{},
		powered: map[string]bool{}, seen503: map[string]float64{}, ambiguous: map[string]bool{}}
	var stopped atomic.Int64 // unix nanos of the stop, 0 before it
	stop := make(chan struct{})
	var seq atomic.Int64
	via := func(i int64) *crashtest.Server { return srv[names[int(i)%len(names)]] }

	// call sends one request, retrying refusals for up to a minute; it
	// returns the final answer. ok lists the statuses that end the retries.
	call := func(what string, s *crashtest.Server, method, path string, body any, ok ...int) (int, map[string]any) {
		deadline := time.Now().Add(time.Minute)
		refused := false
		for {
			code, out, err := s.Do(method, path, body)
			switch {
			case err != nil:
				o.add(what+" transport-error", 0)
				o.badf("%s %s %s: %v", what, method, path, err)
			case code == http.StatusServiceUnavailable:
				refused = true
				o.add(what, code)
				if !ironicBody(out) {
					o.badf("%s %s %s: 503 without Ironic's error body: %v", what, method, path, out)
				}
				if at := stopped.Load(); at != 0 {
					since := time.Since(time.Unix(0, at)).Seconds()
					o.mu.Lock()
					if _, ok := o.seen503["first"]; !ok {
						o.seen503["first"] = since
					}
					o.seen503["last"] = since
					o.mu.Unlock()
				}
			default:
				o.add(what, code)
				if refused && code == http.StatusConflict && (what == "manage" || what == "power") {
					o.mu.Lock()
					o.ambiguous[strings.Split(path, "/")[3]] = true
					o.mu.Unlock()
				}
				for _, c := range ok {
					if code == c {
						return code, out
					}
				}
				o.badf("%s %s %s: %d %v", what, method, path, code, out)
				return code, out
			}
			if time.Now().After(deadline) {
				o.badf("%s %s %s: still refused after a minute of retries", what, method, path)
				return code, out
			}
			time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond)
		}
	}

	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		creator := w < 2 // two clients only create, so that creates are in flight at the stop
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := seq.Add(1)
				tag := fmt.Sprintf("%s-%05d", mode, i)
				s := via(i)
				code, out := call("create", s, "POST", "/v1/nodes", map[string]any{
					"name": tag, "driver": "fake-hardware", "extra": map[string]any{"tag": tag}},
					http.StatusCreated, http.StatusConflict)
				if code == http.StatusConflict {
					// A retry of a create whose first answer was lost
					// (503 at COMMIT): the first one was stored.
					code, out = call("get-by-name", s, "GET", "/v1/nodes/"+tag, nil, http.StatusOK)
				}
				if code != http.StatusCreated && code != http.StatusOK {
					continue
				}
				id := crashtest.Str(out["uuid"])
				if code == http.StatusCreated {
					o.mu.Lock()
					o.created[id] = tag
					o.mu.Unlock()
				}
				if creator {
					continue
				}
				other := via(i + 1)
				switch i % 3 {
				case 0:
					if c, _ := call("manage", other, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "manage"},
						http.StatusAccepted, http.StatusBadRequest, http.StatusConflict); c == http.StatusAccepted {
						o.mu.Lock()
						o.managed[id] = true
						o.mu.Unlock()
					}
				case 1:
					if c, _ := call("power", other, "PUT", "/v1/nodes/"+id+"/states/power", map[string]any{"target": "power on"},
						http.StatusAccepted, http.StatusBadRequest, http.StatusConflict); c == http.StatusAccepted {
						o.mu.Lock()
						o.powered[id] = true
						o.mu.Unlock()
					}
				}
				call("read", via(i+2), "GET", "/v1/nodes/"+id, nil, http.StatusOK)
				call("list", other, "GET", "/v1/nodes?limit=20&fields=uuid,provision_state", nil, http.StatusOK)
			}
		}()
	}

	time.Sleep(1500 * time.Millisecond)
	t0 := time.Now()
	stopped.Store(t0.UnixNano())
	if err := outage(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	o.down = time.Since(t0)
	time.Sleep(4500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if f, ok := o.seen503["first"]; ok {
		t.Logf("%s shutdown: 503s from %.2f s to %.2f s after the stop", mode, f, o.seen503["last"])
	}
	return o
}

// settled waits until no node is reserved or has a pending power
// operation, then checks that every acknowledged write is there.
func settled(t *testing.T, s *crashtest.Server, mode string, o *outcome) {
	t.Helper()
	t0 := time.Now()
	var nodes map[string]map[string]any
	for {
		nodes = listAll(t, s, "uuid,name,extra,reservation,provision_state,target_provision_state,power_state,target_power_state,last_error")
		busy := 0
		for _, n := range nodes {
			if n["reservation"] != nil || n["target_power_state"] != nil || n["target_provision_state"] != nil {
				busy++
			}
		}
		if busy == 0 {
			t.Logf("%s shutdown: no node reserved or in transition %s after the burst", mode, time.Since(t0).Round(time.Millisecond))
			break
		}
		if time.Since(t0) > 60*time.Second {
			for id, n := range nodes {
				if n["reservation"] != nil || n["target_power_state"] != nil || n["target_provision_state"] != nil {
					t.Errorf("%s shutdown: node %s still reserved by %v / %v -> %v / power target %v (last_error %v)", mode, id,
						n["reservation"], n["provision_state"], n["target_provision_state"], n["target_power_state"], n["last_error"])
				}
			}
			t.Fatalf("%s shutdown: %d nodes still busy 60 s after the burst", mode, busy)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// A verb whose reserving COMMIT reached the server while its
	// connection broke answered 503 and started no task: its conductor
	// released that reservation by itself (engine/orphans.go), which the
	// wait above checked with every other node. Such a node is in neither
	// outcome of its verb (it may be back where it was with a last_error).
	for id := range o.ambiguous {
		if n := nodes[id]; n != nil {
			t.Logf("%s shutdown: node %s, whose verb answered 503 then 409, ended in %v (last_error %v)", mode, id, n["provision_state"], n["last_error"])
		}
		delete(o.managed, id)
		delete(o.powered, id)
	}
	lost := 0
	for id, tag := range o.created {
		n, ok := nodes[id]
		ex, _ := n["extra"].(map[string]any)
		if !ok || crashtest.Str(ex["tag"]) != tag {
			lost++
			if lost <= 10 {
				t.Errorf("%s shutdown: acknowledged create %s (%s) lost: %v", mode, id, tag, n)
			}
		}
	}
	t.Logf("%s shutdown: %d acknowledged creates, %d lost", mode, len(o.created), lost)
	for id := range o.managed {
		n := nodes[id]
		if st := n["provision_state"]; st != "manageable" && !(st == "enroll" && n["last_error"] != nil) {
			t.Errorf("%s shutdown: node %s acknowledged manage, now %v (last_error %v)", mode, id, st, n["last_error"])
		}
	}
	for id := range o.powered {
		n := nodes[id]
		if n["power_state"] != "power on" && n["last_error"] == nil {
			t.Errorf("%s shutdown: node %s acknowledged power on, now %v with no last_error", mode, id, n["power_state"])
		}
	}
}

// listAll lists every node with fields, by uuid.
func listAll(t *testing.T, s *crashtest.Server, fields string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	marker := ""
	for {
		page := s.Must(http.StatusOK, "GET", "/v1/nodes?limit=500&fields="+fields+marker, nil)
		list, _ := page["nodes"].([]any)
		for _, v := range list {
			n := v.(map[string]any)
			out[crashtest.Str(n["uuid"])] = n
		}
		if len(list) < 500 {
			return out
		}
		marker = "&marker=" + crashtest.Str(list[len(list)-1].(map[string]any)["uuid"])
	}
}

func countOwners(m map[string]string) map[string]int {
	c := map[string]int{}
	for _, h := range m {
		c[h]++
	}
	return c
}

// ringAgreed waits until every instance lists the conductors alive and
// names the same owner for every node, owners being exactly the alive
// conductors (when there are nodes), and returns the owners.
func ringAgreed(t *testing.T, srv map[string]*crashtest.Server, names []string, what string) map[string]string {
	t.Helper()
	t0 := time.Now()
	for {
		var views []string
		var first map[string]string
		same := true
		for _, n := range names {
			alive := 0
			cs := srv[n].Must(http.StatusOK, "GET", "/v1/conductors", nil)
			for _, v := range cs["conductors"].([]any) {
				if c := v.(map[string]any); c["alive"] == true {
					alive++
				}
			}
			o := map[string]string{}
			for id, node := range listAll(t, srv[n], "uuid,conductor") {
				o[id] = crashtest.Str(node["conductor"])
			}
			views = append(views, fmt.Sprintf("%s: %d alive, owners %v", n, alive, countOwners(o)))
			if alive != len(names) {
				same = false
			}
			if first == nil {
				first = o
			} else if !maps.Equal(first, o) {
				same = false
			}
		}
		c := countOwners(first)
		if same && c[""] == 0 && (len(first) == 0 || len(c) == len(names)) {
			t.Logf("%s: %d conductors alive, owners %v (agreed after %s)", what, len(names), c, time.Since(t0).Round(time.Millisecond))
			return first
		}
		if time.Since(t0) > 60*time.Second {
			t.Fatalf("%s: conductors not recovered after 60 s: %v", what, views)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
