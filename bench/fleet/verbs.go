package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Power verbs through the API (-verbs): after the power sync window, every
// node is sent "power on" and then "power off" (or the other order, so
// that each verb changes the node's state and reaches its BMC), spread
// over the target's API endpoints (each conductor's, for pg3), 64 requests
// in flight. Timed from the first request until the API shows every node
// in the target state: verbs/s is what the conductors get through against
// 20-50 ms BMCs (a verb is a session, the chassis command and the reads
// that confirm it). Power sync keeps running meanwhile, as in production.

const verbClients = 64

type verbResult struct {
	Target  string  `json:"target"`
	Seconds float64 `json:"seconds"`
	PerS    float64 `json:"verbs_per_s"`
	Refused int     `json:"refused"` // answers other than 202
	Pending int     `json:"pending"` // nodes not in the target state at the deadline
	Errors  int     `json:"errors"`  // nodes with a last_error at the end
}

// nodePower is one node as the verbs phase lists it.
type nodePower struct {
	UUID       string  `json:"uuid"`
	PowerState *string `json:"power_state"`
	LastError  *string `json:"last_error"`
}

func listPower(base string) ([]nodePower, error) {
	var all []nodePower
	next := base + "/v1/nodes?fields=uuid,power_state,last_error&limit=1000"
	for next != "" {
		req, _ := http.NewRequest("GET", next, nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.10")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		var page struct {
			Nodes []nodePower `json:"nodes"`
			Next  string      `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, page.Nodes...)
		next = ""
		if page.Next != "" {
			// "next" names the server by its public URL; keep ours.
			if u, err := url.Parse(page.Next); err == nil {
				next = base + u.RequestURI()
			}
		}
	}
	return all, nil
}

// measureVerbs runs both verbs over every node and returns one result each.
func measureVerbs(bases []string, deadline time.Duration) []verbResult {
	nodes, err := listPower(bases[0])
	if err != nil || len(nodes) == 0 {
		log.Printf("verbs: listing nodes: %v (%d nodes)", err, len(nodes))
		return nil
	}
	on := 0
	for _, n := range nodes {
		if n.PowerState != nil && *n.PowerState == "power on" {
			on++
		}
	}
	order := []string{"power on", "power off"}
	if on > len(nodes)/2 {
		order = []string{"power off", "power on"}
	}
	var out []verbResult
	for _, target := range order {
		r := runVerb(bases, nodes, target, deadline)
		log.Printf("verbs: %q on %d nodes: %.1f s, %.1f verbs/s, %d refused, %d pending, %d with last_error",
			target, len(nodes), r.Seconds, r.PerS, r.Refused, r.Pending, r.Errors)
		out = append(out, r)
	}
	return out
}

func runVerb(bases []string, nodes []nodePower, target string, deadline time.Duration) verbResult {
	r := verbResult{Target: target}
	body, _ := json.Marshal(map[string]string{"target": target})
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range verbClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(nodes) {
					return
				}
				base := bases[i%len(bases)]
				req, _ := http.NewRequest("PUT", base+"/v1/nodes/"+nodes[i].UUID+"/states/power", bytes.NewReader(body))
				req.Header.Set("X-OpenStack-Ironic-API-Version", "1.10")
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					refused.Add(1)
					continue
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted && refused.Add(1) == 1 {
					log.Printf("verbs: %s: %d %s", target, resp.StatusCode, strings.TrimSpace(string(msg)))
				}
			}
		}()
	}
	wg.Wait()
	r.Refused = int(refused.Load())
	end := t0.Add(deadline)
	for {
		cur, err := listPower(bases[0])
		if err == nil {
			r.Pending, r.Errors = 0, 0
			for _, n := range cur {
				if n.PowerState == nil || *n.PowerState != target {
					r.Pending++
				}
				if n.LastError != nil && *n.LastError != "" {
					r.Errors++
				}
			}
			if r.Pending == 0 {
				break
			}
		}
		if time.Now().After(end) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.Seconds = time.Since(t0).Seconds()
	if r.Pending == 0 && r.Seconds > 0 {
		r.PerS = float64(len(nodes)) / r.Seconds
	}
	return r
}

// verbsTable prints the verbs phase side by side, a row per fleet size.
func verbsTable(c config, rs []result) string {
	var b strings.Builder
	any := false
	for _, r := range rs {
		any = any || len(r.Verbs) > 0
	}
	if !any {
		return ""
	}
	fmt.Fprintf(&b, "\nPower verbs through the API, %d-%d ms BMCs, %d requests in flight, power sync on; seconds until the API shows every node in the target state (verbs/s)\n\n| nodes | target | verb | seconds (verbs/s) | refused | pending | last_error |\n|---|---|---|---|---|---|---|\n",
		c.latMin.Milliseconds(), c.latMax.Milliseconds(), verbClients)
	for _, r := range rs {
		for _, v := range r.Verbs {
			fmt.Fprintf(&b, "| %d | %s | %s | %.1f (%.1f) | %d | %d | %d |\n", r.N, r.Target, v.Target, v.Seconds, v.PerS, v.Refused, v.Pending, v.Errors)
		}
	}
	by := map[string]map[int]float64{}
	for _, r := range rs {
		for _, v := range r.Verbs {
			if by[r.Target] == nil {
				by[r.Target] = map[int]float64{}
			}
			by[r.Target][r.N] += v.PerS / float64(len(r.Verbs))
		}
	}
	for _, n := range c.ns {
		if one, three := by["pg1"][n], by["pg3"][n]; one > 0 && three > 0 {
			fmt.Fprintf(&b, "\n%d nodes: 3 conductors / 1 on verbs: x%.2f (mean verbs/s %.1f / %.1f)\n", n, three/one, three, one)
		}
	}
	return b.String()
}
