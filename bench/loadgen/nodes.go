package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// nodeView is the part of a node this program looks at.
type nodeView struct {
	UUID                 string  `json:"uuid"`
	Name                 *string `json:"name"`
	ProvisionState       string  `json:"provision_state"`
	TargetProvisionState *string `json:"target_provision_state"`
	LastError            *string `json:"last_error"`
}

type nodeList struct {
	Nodes []nodeView `json:"nodes"`
	Next  string     `json:"next"`
}

func randomPrefix() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return "bench-" + hex.EncodeToString(b[:])
}

// createNodes POSTs n nodes named prefix-i on workers goroutines and returns
// the UUIDs created (in index order, "" where the create failed) and the
// per-request latencies of the successful ones.
func createNodes(ctx context.Context, cl *client, n, workers int, prefix, driver string) ([]string, []time.Duration, time.Duration) {
	uuids := make([]string, n)
	lat := make([]time.Duration, n)
	wall := forEach(ctx, workers, n, func(ctx context.Context, i int) {
		body, _ := json.Marshal(map[string]string{"driver": driver, "name": fmt.Sprintf("%s-%d", prefix, i)})
		r, err := cl.expect(ctx, "POST /v1/nodes", "POST", "/v1/nodes", body, 201)
		if err != nil {
			return
		}
		var nv nodeView
		if err := json.Unmarshal(r.body, &nv); err != nil || nv.UUID == "" {
			cl.errs.add("POST /v1/nodes -> 201 without a uuid", fmt.Sprintf("POST /v1/nodes: body %s", snippet(r.body)))
			return
		}
		uuids[i] = nv.UUID
		lat[i] = r.dur
	})
	var good []time.Duration
	for i, u := range uuids {
		if u != "" {
			good = append(good, lat[i])
		}
	}
	return uuids, good, wall
}

func runCreate(ctx context.Context, c *common, args []string) error {
	fs := newFlags("create", c)
	n := fs.Int("n", 1000, "number of nodes to create")
	workers := fs.Int("workers", 8, "concurrent requests")
	prefix := fs.String("prefix", "", "node name prefix (default bench-<random>)")
	driver := fs.String("driver", "fake-hardware", "driver of the new nodes")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 1 || *workers < 1 {
		return errors.New("-n and -workers must be positive")
	}
	if *prefix == "" {
		*prefix = randomPrefix()
	}
	cl, err := newClient(c, *workers)
	if err != nil {
		return err
	}
	uuids, lat, wall := createNodes(ctx, cl, *n, *workers, *prefix, *driver)
	okN := len(lat)
	rec := newRecord(c, "create")
	rec.Params["n"] = *n
	rec.Params["workers"] = *workers
	rec.Params["driver"] = *driver
	rec.Params["api_version"] = c.apiVersion
	rec.Figures["created"] = float64(okN)
	rec.Figures["failed"] = float64(*n - okN)
	rec.Figures["wall_s"] = round3(wall.Seconds())
	rec.Figures["per_s"] = round3(float64(okN) / wall.Seconds())
	summarize(lat, rec.Figures)
	rec.attach(cl.errs)
	_ = uuids
	emit(rec, fmt.Sprintf("create%s: %d/%d nodes in %.2fs = %.1f creates/s (workers %d), p50 %.1fms p99 %.1fms",
		labelSuffix(c), okN, *n, wall.Seconds(), rec.Figures["per_s"], *workers, rec.Figures["p50_ms"], rec.Figures["p99_ms"]))
	if okN != *n {
		return fmt.Errorf("%d of %d creates failed", *n-okN, *n)
	}
	return ctx.Err()
}

func labelSuffix(c *common) string {
	if c.label == "" {
		return ""
	}
	return " [" + c.label + "]"
}

// allNodes pages through GET /v1/nodes and returns every UUID in the
// server's default order.
func allNodes(ctx context.Context, cl *client, page int) ([]string, error) {
	var uuids []string
	marker := ""
	for range 100000 { // bounded: 100k pages
		path := "/v1/nodes?limit=" + strconv.Itoa(page)
		if marker != "" {
			path += "&marker=" + url.QueryEscape(marker)
		}
		r, err := cl.expect(ctx, "GET /v1/nodes (collect)", "GET", path, nil, 200)
		if err != nil {
			return nil, err
		}
		var l nodeList
		if err := json.Unmarshal(r.body, &l); err != nil {
			return nil, fmt.Errorf("GET %s: bad JSON: %v: %s", path, err, snippet(r.body))
		}
		for _, n := range l.Nodes {
			uuids = append(uuids, n.UUID)
		}
		if len(l.Nodes) == 0 || (l.Next == "" && len(l.Nodes) < page) {
			return uuids, nil
		}
		marker = l.Nodes[len(l.Nodes)-1].UUID
	}
	return nil, errors.New("GET /v1/nodes: more than 100000 pages, giving up")
}

func runList(ctx context.Context, c *common, args []string) error {
	fs := newFlags("list", c)
	dur := fs.Duration("duration", 10*time.Second, "how long to send requests (per variant)")
	workers := fs.Int("workers", 8, "concurrent requests")
	limit := fs.Int("limit", 100, "limit= of each request")
	which := fs.String("marker", "both", "none (first page), middle (a page from the middle via marker=) or both")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *workers < 1 || *limit < 1 {
		return errors.New("-workers and -limit must be positive")
	}
	cl, err := newClient(c, *workers)
	if err != nil {
		return err
	}
	uuids, err := allNodes(ctx, cl, 1000)
	if err != nil {
		return fmt.Errorf("collecting node uuids: %w", err)
	}
	total := len(uuids)

	type variant struct {
		name, path string
		want       int
	}
	var vs []variant
	if *which == "none" || *which == "both" {
		vs = append(vs, variant{"first", fmt.Sprintf("/v1/nodes?limit=%d", *limit), min(*limit, total)})
	}
	if *which == "middle" || *which == "both" {
		if total < 2 {
			return fmt.Errorf("-marker %s needs at least 2 nodes, server has %d", *which, total)
		}
		mid := total / 2
		vs = append(vs, variant{"deep", fmt.Sprintf("/v1/nodes?limit=%d&marker=%s", *limit, uuids[mid-1]), min(*limit, total-mid)})
	}
	if len(vs) == 0 {
		return fmt.Errorf("bad -marker %q: none, middle or both", *which)
	}
	var failed bool
	for _, v := range vs {
		cl.errs = newTally()
		key := "GET /v1/nodes?limit=" + strconv.Itoa(*limit)
		if v.name == "deep" {
			key += "&marker=<middle>"
		}
		lat, calls, okN, wall := forDuration(ctx, *workers, *dur, func(ctx context.Context, _ int) (time.Duration, error) {
			r, err := cl.expect(ctx, key, "GET", v.path, nil, 200)
			if err != nil {
				return 0, err
			}
			got := pageNodes(r.body)
			if got < 0 || fullCheck() {
				var l nodeList
				if err := json.Unmarshal(r.body, &l); err != nil {
					cl.errs.add(key+" -> bad JSON", fmt.Sprintf("GET %s: %v: %s", v.path, err, snippet(r.body)))
					return 0, err
				}
				if got >= 0 && got != len(l.Nodes) {
					err := fmt.Errorf("GET %s: the structural walk counted %d nodes, encoding/json %d", v.path, got, len(l.Nodes))
					cl.errs.add(key+" -> check disagrees", err.Error())
					return 0, err
				}
				got = len(l.Nodes)
			}
			if got != v.want {
				err := fmt.Errorf("GET %s: %d nodes, want %d", v.path, got, v.want)
				cl.errs.add(key+" -> wrong node count", err.Error())
				return 0, err
			}
			return r.dur, nil
		})
		rec := newRecord(c, "list")
		rec.Variant = v.name
		rec.Params["path"] = v.path
		rec.Params["limit"] = *limit
		rec.Params["workers"] = *workers
		rec.Params["duration_s"] = dur.Seconds()
		rec.Params["api_version"] = c.apiVersion
		rec.Figures["nodes_total"] = float64(total)
		rec.Figures["requests"] = float64(calls)
		rec.Figures["ok"] = float64(okN)
		rec.Figures["failed"] = float64(calls - okN)
		rec.Figures["wall_s"] = round3(wall.Seconds())
		rec.Figures["rps"] = round3(float64(okN) / wall.Seconds())
		summarize(lat, rec.Figures)
		rec.attach(cl.errs)
		emit(rec, fmt.Sprintf("list %s page%s: %d nodes total, %.1f req/s (workers %d, %.0fs), p50 %.1fms p90 %.1fms p99 %.1fms",
			v.name, labelSuffix(c), total, rec.Figures["rps"], *workers, wall.Seconds(),
			rec.Figures["p50_ms"], rec.Figures["p90_ms"], rec.Figures["p99_ms"]))
		failed = failed || !rec.OK
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if failed {
		return errors.New("some requests failed")
	}
	return nil
}

func runGet(ctx context.Context, c *common, args []string) error {
	fs := newFlags("get", c)
	dur := fs.Duration("duration", 10*time.Second, "how long to send requests")
	workers := fs.Int("workers", 8, "concurrent requests")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *workers < 1 {
		return errors.New("-workers must be positive")
	}
	cl, err := newClient(c, *workers)
	if err != nil {
		return err
	}
	uuids, err := allNodes(ctx, cl, 1000)
	if err != nil {
		return fmt.Errorf("collecting node uuids: %w", err)
	}
	if len(uuids) == 0 {
		return errors.New("the server has no nodes; run create first")
	}
	cl.errs = newTally()
	const key = "GET /v1/nodes/{uuid}"
	rngs := make([]*rand.Rand, *workers)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano())))
	}
	lat, calls, okN, wall := forDuration(ctx, *workers, *dur, func(ctx context.Context, w int) (time.Duration, error) {
		u := uuids[rngs[w].IntN(len(uuids))]
		r, err := cl.expect(ctx, key, "GET", "/v1/nodes/"+u, nil, 200)
		if err != nil {
			return 0, err
		}
		got := topUUID(r.body)
		if got == "" || fullCheck() {
			var nv nodeView
			if err := json.Unmarshal(r.body, &nv); err != nil || (got != "" && got != nv.UUID) {
				got = ""
			} else {
				got = nv.UUID
			}
		}
		if got != u {
			err := fmt.Errorf("GET /v1/nodes/%s: body is not that node: %s", u, snippet(r.body))
			cl.errs.add(key+" -> wrong body", err.Error())
			return 0, err
		}
		return r.dur, nil
	})
	rec := newRecord(c, "get")
	rec.Params["workers"] = *workers
	rec.Params["duration_s"] = dur.Seconds()
	rec.Params["api_version"] = c.apiVersion
	rec.Figures["nodes_total"] = float64(len(uuids))
	rec.Figures["requests"] = float64(calls)
	rec.Figures["ok"] = float64(okN)
	rec.Figures["failed"] = float64(calls - okN)
	rec.Figures["wall_s"] = round3(wall.Seconds())
	rec.Figures["rps"] = round3(float64(okN) / wall.Seconds())
	summarize(lat, rec.Figures)
	rec.attach(cl.errs)
	emit(rec, fmt.Sprintf("get%s: %d nodes total, %.1f req/s (workers %d, %.0fs), p50 %.1fms p99 %.1fms",
		labelSuffix(c), len(uuids), rec.Figures["rps"], *workers, wall.Seconds(), rec.Figures["p50_ms"], rec.Figures["p99_ms"]))
	if !rec.OK {
		return errors.New("some requests failed")
	}
	return ctx.Err()
}

// lifecycleFailure says where one node's lifecycle went wrong.
type lifecycleFailure struct {
	uuid, step, detail string
}

func runLifecycle(ctx context.Context, c *common, args []string) error {
	fs := newFlags("lifecycle", c)
	n := fs.Int("n", 100, "number of nodes to create and take to available")
	workers := fs.Int("workers", 8, "nodes driven concurrently")
	poll := fs.Duration("poll", 50*time.Millisecond, "GET /v1/nodes/{uuid} interval while waiting for a state")
	nodeTimeout := fs.Duration("node-timeout", 120*time.Second, "give up on a node that has not reached its state by then (per step)")
	prefix := fs.String("prefix", "", "node name prefix (default bench-<random>-lc)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 1 || *workers < 1 || *poll <= 0 {
		return errors.New("-n, -workers and -poll must be positive")
	}
	if *prefix == "" {
		*prefix = randomPrefix() + "-lc"
	}
	cl, err := newClient(c, *workers)
	if err != nil {
		return err
	}
	t0 := time.Now()
	uuids, _, createWall := createNodes(ctx, cl, *n, *workers, *prefix, "fake-hardware")

	var (
		mu        sync.Mutex
		failures  []lifecycleFailure
		perNode   []time.Duration
		polls     int
		retries   int
		oddTarget int
	)
	fail := func(u, step, detail string) {
		mu.Lock()
		failures = append(failures, lifecycleFailure{u, step, detail})
		mu.Unlock()
	}
	for i, u := range uuids {
		if u == "" {
			fail(fmt.Sprintf("#%d", i), "create", "POST /v1/nodes failed (see errors)")
		}
	}

	// act sends a provision verb, retrying while the node is locked (409).
	act := func(ctx context.Context, u, verb string) error {
		body := []byte(`{"target": "` + verb + `"}`)
		path := "/v1/nodes/" + u + "/states/provision"
		deadline := time.Now().Add(*nodeTimeout)
		for {
			r, err := cl.do(ctx, "PUT", path, body)
			if err != nil {
				cl.errs.add("PUT /v1/nodes/{uuid}/states/provision -> transport error", fmt.Sprintf("PUT %s %s: %v", path, body, err))
				return err
			}
			switch {
			case r.status == 202:
				return nil
			case r.status == 409 && time.Now().Before(deadline):
				mu.Lock()
				retries++
				mu.Unlock()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(*poll):
				}
				continue
			}
			err = fmt.Errorf("PUT %s %s: status %d, want 202: %s", path, body, r.status, snippet(r.body))
			cl.errs.add(fmt.Sprintf("PUT /v1/nodes/{uuid}/states/provision {%q} -> %d", verb, r.status), err.Error())
			return err
		}
	}
	// await polls the node until it is in state want (and nothing failed).
	await := func(ctx context.Context, u, want string) error {
		path := "/v1/nodes/" + u
		deadline := time.Now().Add(*nodeTimeout)
		last := ""
		for {
			r, err := cl.expect(ctx, "GET /v1/nodes/{uuid} (poll)", "GET", path, nil, 200)
			mu.Lock()
			polls++
			mu.Unlock()
			if err != nil {
				return err
			}
			var nv nodeView
			if err := json.Unmarshal(r.body, &nv); err != nil {
				return fmt.Errorf("GET %s: bad JSON: %v", path, err)
			}
			st := nv.ProvisionState
			last = st
			lastErr := ""
			if nv.LastError != nil {
				lastErr = *nv.LastError
			}
			switch {
			case st == want:
				if nv.TargetProvisionState != nil && *nv.TargetProvisionState != "" {
					mu.Lock()
					oddTarget++
					mu.Unlock()
				}
				return nil
			case st == "error" || containsFail(st):
				return fmt.Errorf("node went to %q (waiting for %q), last_error: %s", st, want, lastErr)
			case st == "enroll" && lastErr != "":
				return fmt.Errorf("node fell back to enroll (waiting for %q), last_error: %s", want, lastErr)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("still %q after %s (waiting for %q), last_error: %s", last, *nodeTimeout, want, lastErr)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*poll):
			}
		}
	}

	var todo []string
	for _, u := range uuids {
		if u != "" {
			todo = append(todo, u)
		}
	}
	transWall := forEach(ctx, *workers, len(todo), func(ctx context.Context, i int) {
		u := todo[i]
		start := time.Now()
		for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
			if err := act(ctx, u, s.verb); err != nil {
				fail(u, s.verb, err.Error())
				return
			}
			if err := await(ctx, u, s.state); err != nil {
				fail(u, s.verb+" -> "+s.state, err.Error())
				return
			}
		}
		mu.Lock()
		perNode = append(perNode, time.Since(start))
		mu.Unlock()
	})
	total := time.Since(t0)

	rec := newRecord(c, "lifecycle")
	rec.Params["n"] = *n
	rec.Params["workers"] = *workers
	rec.Params["poll_ms"] = ms(*poll)
	rec.Params["api_version"] = c.apiVersion
	rec.Figures["available"] = float64(len(perNode))
	rec.Figures["failed"] = float64(len(failures))
	rec.Figures["create_s"] = round3(createWall.Seconds())
	rec.Figures["transitions_s"] = round3(transWall.Seconds())
	rec.Figures["total_s"] = round3(total.Seconds())
	rec.Figures["polls"] = float64(polls)
	rec.Figures["put_409_retries"] = float64(retries)
	rec.Figures["target_not_cleared"] = float64(oddTarget)
	nodeFigs := map[string]float64{}
	summarize(perNode, nodeFigs)
	rec.Figures["node_p50_ms"] = nodeFigs["p50_ms"]
	rec.Figures["node_p99_ms"] = nodeFigs["p99_ms"]
	rec.attach(cl.errs)
	if len(failures) > 0 {
		rec.OK = false
		rec.Note = fmt.Sprintf("%d nodes failed; first: %s at %s: %s", len(failures), failures[0].uuid, failures[0].step, failures[0].detail)
	}
	if oddTarget > 0 {
		rec.Note += fmt.Sprintf(" %d times a node reached its state with target_provision_state still set", oddTarget)
	}
	emit(rec, fmt.Sprintf("lifecycle%s: %d/%d nodes enroll -> manageable -> available in %.2fs total (create %.2fs + transitions %.2fs; workers %d, poll %s; %d polls, %d 409 retries)",
		labelSuffix(c), len(perNode), *n, total.Seconds(), createWall.Seconds(), transWall.Seconds(), *workers, *poll, polls, retries))
	if len(failures) > 0 {
		for i, f := range failures {
			if i == 20 {
				fmt.Fprintf(os.Stderr, "    ... and %d more\n", len(failures)-20)
				break
			}
			fmt.Fprintf(os.Stderr, "    FAILED node %s at %s: %s\n", f.uuid, f.step, f.detail)
		}
		return fmt.Errorf("LIFECYCLE FAILED: %d of %d nodes did not reach available", len(failures), *n)
	}
	return ctx.Err()
}

// containsFail reports Ironic's failure states ("verify failed", "clean
// failed", "deploy failed", ...).
func containsFail(state string) bool { return strings.Contains(state, "fail") }
