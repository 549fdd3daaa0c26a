package runloop

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"castiron/ramdisk/agent/apiclient"
	"castiron/ramdisk/protocol"
)

const testNode = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"

// castiron is an httptest server playing castiron's ramdisk API; each test
// scripts its answers. An answer of type string is sent as is, anything
// else as JSON.
type castiron struct {
	t   *testing.T
	srv *httptest.Server

	inspection func(n int, data protocol.InspectionData) (int, any)
	lookup     func(n int, q url.Values) (int, any)
	heartbeat  func(n int, hb protocol.Heartbeat) (int, any)

	mu         sync.Mutex
	calls      map[string]int
	heartbeats []protocol.Heartbeat
	lookups    []url.Values
}

func newCastiron(t *testing.T) *castiron {
	c := &castiron{t: t, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/continue_inspection", func(w http.ResponseWriter, r *http.Request) {
		var data protocol.InspectionData
		c.decode(r, &data)
		n := c.count("inspection")
		c.answer(w, r, c.inspection != nil, func() (int, any) { return c.inspection(n, data) })
	})
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		n := c.count("lookup")
		c.mu.Lock()
		c.lookups = append(c.lookups, r.URL.Query())
		c.mu.Unlock()
		c.answer(w, r, c.lookup != nil, func() (int, any) { return c.lookup(n, r.URL.Query()) })
	})
	mux.HandleFunc("POST /v1/heartbeat/{node}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("node") != testNode {
			t.Errorf("heartbeat for node %q", r.PathValue("node"))
		}
		var hb protocol.Heartbeat
		c.decode(r, &hb)
		n := c.count("heartbeat")
		c.mu.Lock()
		c.heartbeats = append(c.heartbeats, hb)
		c.mu.Unlock()
		c.answer(w, r, c.heartbeat != nil, func() (int, any) { return c.heartbeat(n, hb) })
	})
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

func (c *castiron) decode(r *http.Request, v any) {
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, v); err != nil {
		c.t.Errorf("%s %s: bad body %q: %v", r.Method, r.URL.Path, b, err)
	}
}

func (c *castiron) count(endpoint string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[endpoint]++
	return c.calls[endpoint] - 1
}

func (c *castiron) callCount(endpoint string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[endpoint]
}

func (c *castiron) answer(w http.ResponseWriter, r *http.Request, scripted bool, play func() (int, any)) {
	if got := r.Header.Get("X-OpenStack-Ironic-API-Version"); got != apiclient.APIVersion {
		c.t.Errorf("%s: API version header %q", r.URL.Path, got)
	}
	if !scripted {
		c.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	code, body := play()
	if s, ok := body.(string); ok {
		w.WriteHeader(code)
		io.WriteString(w, s)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

func (c *castiron) recorded() []protocol.Heartbeat {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.Heartbeat(nil), c.heartbeats...)
}

func lookupAnswer(token string) protocol.LookupResponse {
	return protocol.LookupResponse{
		Node:   protocol.LookupNode{UUID: testNode},
		Config: protocol.LookupConfig{AgentToken: token, AgentTokenRequired: true, HeartbeatTimeout: 300},
	}
}

func instruction(cmd string, step *protocol.Step) protocol.Instruction {
	return protocol.Instruction{Command: cmd, Step: step, HeartbeatInterval: 0.001}
}

// machine records what the loop asked for.
type machine struct {
	mu      sync.Mutex
	actions []string
}

func (m *machine) PowerOff() error { m.record("power_off"); return nil }
func (m *machine) Reboot() error   { m.record("reboot"); return nil }
func (m *machine) record(a string) {
	m.mu.Lock()
	m.actions = append(m.actions, a)
	m.mu.Unlock()
}
func (m *machine) done() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.actions...)
}

// sleeps records the retry waits instead of sleeping them.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func testInventory() *protocol.Inventory {
	return &protocol.Inventory{
		Interfaces: []protocol.Interface{
			{Name: "eth0", MACAddress: "52:54:00:12:34:56"},
			{Name: "eth1", MACAddress: "52:54:00:ab:cd:ef"},
		},
		Boot: protocol.Boot{CurrentBootMode: "bios", PXEInterface: "52:54:00:12:34:56"},
	}
}

func noSteps(t *testing.T) StepRunner {
	return func(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
		t.Errorf("unexpected step %+v", step)
		return nil, nil
	}
}

// config returns a Config for c with fast timings; inspection selects the
// inspection callback path.
func (c *castiron) config(t *testing.T, inspection bool, m *machine, s *sleeps) Config {
	cfg := Config{
		API:               apiclient.New(c.srv.URL, "castiron-agent/test"),
		BootIF:            "01-52-54-00-12-34-56",
		Inventory:         testInventory(),
		Steps:             noSteps(t),
		Machine:           m,
		AgentVersion:      "castiron-agent/test",
		Backoff:           apiclient.Backoff{Base: 8 * time.Millisecond, Max: 40 * time.Millisecond},
		Sleep:             s.sleep,
		MinHeartbeat:      time.Millisecond,
		HeartbeatInterval: 5 * time.Millisecond,
		StopTimeout:       5 * time.Second,
	}
	if inspection {
		cfg.InspectionURL = c.srv.URL + "/v1/continue_inspection"
	}
	return cfg
}

// run runs the loop with a deadline so a broken loop fails instead of
// hanging.
func run(t *testing.T, cfg Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	if ctx.Err() != nil {
		t.Fatalf("Run did not finish: %v", err)
	}
	return err
}
