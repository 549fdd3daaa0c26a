package scaleout

// TestScaleOut runs three castiron conductors on loopback over one
// PostgreSQL database (issue 14): 1,000 fake-hardware nodes enrolled through
// all of them spread evenly over the hash ring; verbs sent to any instance
// run on the node's owner; kill -9 of one conductor while some of its nodes
// wait for a ramdisk and one holds a reservation: its nodes move to the
// others, nothing acknowledged is lost, nothing stays locked, wait-state
// deadlines are kept; restarted, it gets its nodes back.

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"castiron/storage/pgtest"
	"castiron/tests/crashtest"
)

func TestScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs PostgreSQL and three conductors")
	}
	pg := pgtest.New(t)
	db := pg.Database(t)
	tmp := t.TempDir()
	bin := crashtest.Build(t, tmp)
	bmcPort := crashtest.BlackHole(t)
	names := []string{"c1", "c2", "c3"}
	start := func(name string) *crashtest.Server {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return crashtest.Start(t, bin, dir, tmp, "--database", db, "--conductor-name", name, "--callback-timeout", "30m")
	}
	srv := map[string]*crashtest.Server{}
	for _, n := range names {
		srv[n] = start(n)
	}
	via := func(i int) *crashtest.Server { return srv[names[i%len(names)]] }

	// Enroll 1,000 nodes through all three, 12 at a time.
	const total = 1000
	type acked struct{ uuid, tag string }
	var mu sync.Mutex
	var nodes []acked
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				tag := fmt.Sprintf("n-%04d", i)
				code, out, err := via(i).Do("POST", "/v1/nodes", map[string]any{
					"name": tag, "driver": "fake-hardware", "extra": map[string]any{"tag": tag}})
				if err != nil || code != http.StatusCreated {
					t.Errorf("create %s: %d %v %v", tag, code, out, err)
					continue
				}
				mu.Lock()
				nodes = append(nodes, acked{crashtest.Str(out["uuid"]), tag})
				mu.Unlock()
			}
		}()
	}
	t0 := time.Now()
	for i := 0; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("enrolled %d nodes through 3 conductors in %s", len(nodes), time.Since(t0).Round(time.Millisecond))
	if t.Failed() {
		return
	}

	reserved := map[string]string{} // filled by owners: node -> reservation
	owners := func(s *crashtest.Server) map[string]string {
		t.Helper()
		out := map[string]string{}
		clear(reserved)
		marker := ""
		for {
			page := s.Must(http.StatusOK, "GET", "/v1/nodes?fields=uuid,conductor,reservation&limit=500"+marker, nil)
			list, _ := page["nodes"].([]any)
			for _, v := range list {
				n := v.(map[string]any)
				out[crashtest.Str(n["uuid"])] = crashtest.Str(n["conductor"])
				if r := crashtest.Str(n["reservation"]); r != "" {
					reserved[crashtest.Str(n["uuid"])] = r
				}
			}
			if len(list) < 500 {
				return out
			}
			marker = "&marker=" + crashtest.Str(list[len(list)-1].(map[string]any)["uuid"])
		}
	}
	count := func(m map[string]string) map[string]int {
		c := map[string]int{}
		for _, h := range m {
			c[h]++
		}
		return c
	}
	// agreed waits until every instance names the same owner for every node
	// and the owners are exactly the alive conductors. Each conductor
	// rebuilds its rings from the conductors table every second, so one that
	// just started (or restarted) is on the others' rings within about a
	// second, not at once: asserting agreement right after a start races
	// with that refresh.
	agreed := func(what string) map[string]string {
		t.Helper()
		t0 := time.Now()
		for {
			var views []map[string]int
			var first map[string]string
			same := true
			for _, n := range names {
				o := owners(srv[n])
				views = append(views, count(o))
				if first == nil {
					first = o
				} else if !maps.Equal(first, o) {
					same = false
				}
			}
			if c := count(first); same && len(c) == len(names) && c[""] == 0 {
				t.Logf("%s: every instance sees ownership %v (agreed after %s)", what, c, time.Since(t0).Round(time.Millisecond))
				return first
			}
			if time.Since(t0) > 60*time.Second {
				t.Fatalf("%s: instances %v still disagree on owners after 60s: %v", what, names, views)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	before := agreed("after enrollment")
	spread := count(before)
	for _, n := range names {
		if got := spread[n]; got < total/3*8/10 || got > total/3*12/10 {
			t.Errorf("%s owns %d nodes, want %d ±20%%", n, got, total/3)
		}
	}
	// A driver's hosts are the alive conductors that enable it.
	driverHosts := func(s *crashtest.Server) string {
		return fmt.Sprint(s.Must(http.StatusOK, "GET", "/v1/drivers/fake-hardware", nil)["hosts"])
	}
	for _, n := range names {
		if got := driverHosts(srv[n]); got != "[c1 c2 c3]" {
			t.Errorf("%s: fake-hardware hosts %s, want [c1 c2 c3]", n, got)
		}
	}
	// ?conductor= follows the ring.
	if l := srv["c3"].Must(http.StatusOK, "GET", "/v1/nodes?conductor=c2&limit=2000", nil); len(l["nodes"].([]any)) != spread["c2"] {
		t.Errorf("?conductor=c2 lists %d nodes, c2 owns %d", len(l["nodes"].([]any)), spread["c2"])
	}

	// The victim, c2: agent-inspection nodes of its own in "inspect wait",
	// driven through c1 (forwarded to c2), and an ipmi node whose BMC never
	// answers, held (reserved) by c2 in "verifying".
	victim := "c2"
	made := 0
	mkOwned := func(body map[string]any) string {
		for i := 0; i < 200; i++ {
			made++
			body["name"] = fmt.Sprintf("%s-%v-%d", victim, body["driver"], made)
			n := srv["c1"].Must(http.StatusCreated, "POST", "/v1/nodes", body)
			if crashtest.Str(n["conductor"]) == victim {
				return crashtest.Str(n["uuid"])
			}
		}
		t.Fatalf("no node of %s in 200 tries", victim)
		return ""
	}
	var waiting []string
	for i := 0; i < 3; i++ {
		waiting = append(waiting, mkOwned(map[string]any{"driver": "fake-hardware", "inspect_interface": "agent"}))
	}
	for _, id := range waiting {
		srv["c1"].Must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "manage"})
	}
	waitedAt := map[string]string{}
	for _, id := range waiting {
		srv["c1"].WaitState(id, "manageable", 60*time.Second)
		srv["c3"].Must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "inspect"})
	}
	for _, id := range waiting {
		n := srv["c1"].WaitState(id, "inspect wait", 60*time.Second)
		waitedAt[id] = crashtest.Str(n["provision_updated_at"])
	}
	// The work ran on the owner: its history names c2.
	hist := srv["c3"].Must(http.StatusOK, "GET", "/v1/nodes/"+waiting[0]+"/history?detail=true", nil)
	for _, v := range hist["history"].([]any) {
		if e := v.(map[string]any); crashtest.Str(e["conductor"]) != victim {
			t.Errorf("history of %s: event %q recorded by %v, want %s", waiting[0], e["event"], e["conductor"], victim)
		}
	}
	locked := mkOwned(map[string]any{"driver": "ipmi", "driver_info": map[string]any{
		"ipmi_address": "127.0.0.1", "ipmi_port": bmcPort, "ipmi_username": "admin", "ipmi_password": "secret"}})
	srv["c3"].Must(http.StatusAccepted, "PUT", "/v1/nodes/"+locked+"/states/provision", map[string]any{"target": "manage"})
	srv["c1"].WaitNode(locked, 30*time.Second, "reserved by "+victim, func(n map[string]any) bool {
		return n["provision_state"] == "verifying" && n["reservation"] == victim
	})
	// Exclusive across processes: another instance's verb is NodeLocked.
	if code, out, _ := srv["c3"].Do("PUT", "/v1/nodes/"+locked+"/states/power", map[string]any{"target": "power on"}); code != http.StatusConflict {
		t.Errorf("power on a node reserved by %s through c3: %d %v, want 409", victim, code, out)
	}

	// kill -9 the victim.
	srv[victim].Kill9()
	killed := time.Now()
	var dead, moved time.Duration
	deadline := killed.Add(90 * time.Second)
	for time.Now().Before(deadline) {
		cs := srv["c1"].Must(http.StatusOK, "GET", "/v1/conductors", nil)
		for _, v := range cs["conductors"].([]any) {
			if c := v.(map[string]any); c["hostname"] == victim && c["alive"] == false && dead == 0 {
				dead = time.Since(killed)
			}
		}
		if dead != 0 {
			o := owners(srv["c3"])
			if c := count(o); c[victim] == 0 && c[""] == 0 {
				moved = time.Since(killed)
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("after kill -9 of %s: alive=false after %s, every node on an alive owner after %s", victim, dead.Round(time.Millisecond), moved.Round(time.Millisecond))
	if dead == 0 || moved == 0 {
		t.Fatalf("takeover did not happen within %s", 90*time.Second)
	}
	if got := driverHosts(srv["c3"]); got != "[c1 c3]" {
		t.Errorf("after kill -9 of %s: fake-hardware hosts %s, want [c1 c3]", victim, got)
	}
	// Nothing stays locked: the takeover releases and fails the verifying node.
	srv["c1"].WaitNode(locked, 60*time.Second, "released", func(n map[string]any) bool { return n["reservation"] == nil })
	if owners(srv["c3"]); len(reserved) != 0 {
		t.Errorf("nodes still reserved after takeover: %v", reserved)
	}
	// Wait states keep their deadlines on their new owners.
	for _, id := range waiting {
		n := srv["c3"].Node(id)
		if n["provision_state"] != "inspect wait" || crashtest.Str(n["provision_updated_at"]) != waitedAt[id] || n["conductor"] == victim {
			t.Errorf("waiting node %s after takeover: %v %v conductor %v", id, n["provision_state"], n["provision_updated_at"], n["conductor"])
		}
	}
	// No acknowledged write lost.
	for _, a := range nodes {
		n := srv["c1"].Node(a.uuid)
		if ex, _ := n["extra"].(map[string]any); crashtest.Str(ex["tag"]) != a.tag {
			t.Errorf("node %s lost its extra: %v", a.uuid, n["extra"])
		}
	}

	// Restart the victim: nodes rebalance back to it, on every instance.
	srv[victim] = start(victim)
	back := agreed("after restart of " + victim)
	for u, h := range before {
		if back[u] != h {
			t.Errorf("node %s owned by %s after rebalance, %s before the kill", u, back[u], h)
			break
		}
	}

	// The agent's calls work whichever instance they reach: lookup and
	// continue_inspection of waiting nodes through instances that do not
	// own them.
	other := func(id string) *crashtest.Server {
		for _, n := range names {
			if n != back[id] {
				return srv[n]
			}
		}
		return nil
	}
	if l := other(waiting[1]).Must(http.StatusOK, "GET", "/v1/lookup?node_uuid="+waiting[1], nil); crashtest.Str(l["node"].(map[string]any)["uuid"]) != waiting[1] {
		t.Errorf("lookup of %s through a non-owner: %v", waiting[1], l)
	}
	mac := "52:54:00:5c:a1:e0"
	other(waiting[0]).Must(http.StatusAccepted, "POST", "/v1/continue_inspection?node_uuid="+waiting[0], map[string]any{
		"inventory": map[string]any{
			"interfaces": []any{map[string]any{"name": "eth0", "mac_address": mac, "has_carrier": true}},
			"cpu":        map[string]any{"count": 2, "architecture": "x86_64"},
			"memory":     map[string]any{"total": 1 << 30, "physical_mb": 1024},
			"disks":      []any{map[string]any{"name": "/dev/vda", "size": 10 << 30, "rotational": false}},
			"boot":       map[string]any{"current_boot_mode": "bios", "pxe_interface": mac},
		},
	})
	n := srv[back[waiting[0]]].WaitState(waiting[0], "manageable", 60*time.Second)
	if p, _ := n["properties"].(map[string]any); fmt.Sprint(p["memory_mb"]) != "1024" {
		t.Errorf("inspection reported through a non-owner: properties %v", n["properties"])
	}
	// ... and the owner ran it.
	hist = srv[back[waiting[0]]].Must(http.StatusOK, "GET", "/v1/nodes/"+waiting[0]+"/history?detail=true", nil)
	for _, v := range hist["history"].([]any) {
		if e := v.(map[string]any); crashtest.Str(e["conductor"]) != back[waiting[0]] {
			t.Errorf("history of %s: event %q recorded by %v, want its owner %s", waiting[0], e["event"], e["conductor"], back[waiting[0]])
		}
	}
}
