package runloop

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"castiron/ramdisk/protocol"
)

// Inspection: the inventory is posted, the 1.84 answer carries the token,
// the first heartbeat is told to power off.
func TestInspectionThenPowerOff(t *testing.T) {
	c := newCastiron(t)
	c.inspection = func(n int, data protocol.InspectionData) (int, any) {
		if data.BootInterface != "01-52-54-00-12-34-56" || len(data.Inventory.Interfaces) != 2 || data.Error != "" {
			t.Errorf("inspection data %+v", data)
		}
		return 202, lookupAnswer("tok-1")
	}
	c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
		if hb.AgentToken != "tok-1" || hb.AgentVersion != "castiron-agent/test" || hb.CallbackURL != "" || hb.Step != nil {
			t.Errorf("heartbeat %+v", hb)
		}
		return 202, instruction(protocol.CmdPowerOff, nil)
	}
	m := &machine{}
	if err := run(t, c.config(t, true, m, &sleeps{})); err != nil {
		t.Fatal(err)
	}
	if got := m.done(); !reflect.DeepEqual(got, []string{"power_off"}) {
		t.Errorf("machine actions %v", got)
	}
	if n := c.callCount("lookup"); n != 0 {
		t.Errorf("%d lookups, want none (token came with the inspection answer)", n)
	}
}

// An ironic-inspector style answer names the node only: lookup follows.
// An inventory error is posted as the inspection error.
func TestInspectionOldAnswerThenLookup(t *testing.T) {
	c := newCastiron(t)
	c.inspection = func(n int, data protocol.InspectionData) (int, any) {
		if data.Error != "inventory incomplete: disks: boom" {
			t.Errorf("inspection error %q", data.Error)
		}
		return 202, map[string]string{"uuid": testNode}
	}
	c.lookup = func(n int, q url.Values) (int, any) {
		if q.Get("node_uuid") != testNode || q.Get("addresses") != "52:54:00:12:34:56,52:54:00:ab:cd:ef" {
			t.Errorf("lookup query %v", q)
		}
		return 200, lookupAnswer("tok-2")
	}
	c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
		if hb.AgentToken != "tok-2" {
			t.Errorf("token %q", hb.AgentToken)
		}
		return 202, instruction(protocol.CmdReboot, nil)
	}
	m := &machine{}
	cfg := c.config(t, true, m, &sleeps{})
	cfg.InventoryError = errors.New("inventory incomplete: disks: boom")
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	if got := m.done(); !reflect.DeepEqual(got, []string{"reboot"}) {
		t.Errorf("machine actions %v", got)
	}
}

// Refusals of the inspection post power the machine off without retrying,
// except 404/409 (the node may not be in inspect wait yet): retried
// inspectNotWaitingRetries times; 5xx and 429 are retried with growing,
// capped, jittered waits.
func TestInspectionAnswers(t *testing.T) {
	tests := []struct {
		name      string
		codes     []int // answers before success; the last may be final
		wantPosts int
		wantHB    bool
	}{
		{"late callback 404", []int{404, 404, 404, 404, 404, 404}, 6, false},
		{"not inspect wait 409", []int{409, 409, 409, 409, 409, 409}, 6, false},
		{"posted before inspect wait: 404, then accepted", []int{404, 404}, 3, true},
		{"bad data 400", []int{400}, 1, false},
		{"forbidden 403", []int{403}, 1, false},
		{"backoff on 500s", []int{500, 503, 502, 500, 429}, 6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCastiron(t)
			c.inspection = func(n int, data protocol.InspectionData) (int, any) {
				if n < len(tt.codes) {
					return tt.codes[n], `{"error_message": "no"}`
				}
				return 202, lookupAnswer("tok")
			}
			c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
				return 202, instruction(protocol.CmdPowerOff, nil)
			}
			m, s := &machine{}, &sleeps{}
			cfg := c.config(t, true, m, s)
			if err := run(t, cfg); err != nil {
				t.Fatal(err)
			}
			if got := m.done(); !reflect.DeepEqual(got, []string{"power_off"}) {
				t.Errorf("machine actions %v", got)
			}
			if n := c.callCount("inspection"); n != tt.wantPosts {
				t.Errorf("%d inspection posts, want %d", n, tt.wantPosts)
			}
			if hb := c.callCount("heartbeat") > 0; hb != tt.wantHB {
				t.Errorf("heartbeated: %v, want %v", hb, tt.wantHB)
			}
			if len(s.d) != tt.wantPosts-1 {
				t.Fatalf("retry waits %v, want %d", s.d, tt.wantPosts-1)
			}
			for i, d := range s.d {
				ceiling := min(cfg.Backoff.Base<<i, cfg.Backoff.Max)
				if d < ceiling/2 || d > ceiling {
					t.Errorf("wait %d = %v, want in [%v, %v]", i, d, ceiling/2, ceiling)
				}
			}
		})
	}
}

// Lookup, wait, run a step reporting progress, report its result until
// acknowledged, then power off.
func TestStepLifecycle(t *testing.T) {
	for _, tt := range []struct {
		name       string
		stepErr    error
		wantStatus string
	}{
		{"succeeds", nil, protocol.StepSucceeded},
		{"fails", errors.New("disk on fire"), protocol.StepFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			step := &protocol.Step{ID: "s-1", Interface: "deploy", Name: protocol.StepWriteImage, Args: map[string]any{"image_url": "http://x/img"}}
			release := make(chan struct{})
			var releaseOnce sync.Once
			c := newCastiron(t)
			c.lookup = func(n int, q url.Values) (int, any) { return 200, lookupAnswer("tok") }
			var mu sync.Mutex
			phase := "wait" // wait -> run -> ack -> off
			c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
				mu.Lock()
				defer mu.Unlock()
				switch phase {
				case "wait":
					phase = "run"
					return 202, instruction(protocol.CmdWait, nil)
				case "run":
					if hb.Step != nil && hb.Step.Status == protocol.StepRunning && hb.Step.Progress != nil {
						releaseOnce.Do(func() { close(release) })
					}
					if hb.Step != nil && hb.Step.Status != protocol.StepRunning {
						phase = "ack"
						return 202, instruction(protocol.CmdWait, nil) // the acknowledgement
					}
					return 202, instruction(protocol.CmdRunStep, step) // repeated: must not restart
				case "ack":
					if hb.Step != nil {
						t.Errorf("step still reported after acknowledgement: %+v", hb.Step)
					}
					phase = "off"
					return 202, instruction(protocol.CmdPowerOff, nil)
				}
				t.Errorf("heartbeat after power off")
				return 500, "{}"
			}
			m := &machine{}
			cfg := c.config(t, false, m, &sleeps{})
			var starts int
			cfg.Steps = func(ctx context.Context, s protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
				starts++
				if s.ID != "s-1" || inv == nil || len(inv.Interfaces) != 2 {
					t.Errorf("step %+v inventory %v", s, inv)
				}
				progress(protocol.Progress{Done: 5, Total: 10, Unit: "bytes", Percent: 50})
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if tt.stepErr != nil {
					return nil, tt.stepErr
				}
				return map[string]any{protocol.ResultTargetDisk: "/dev/vda"}, nil
			}
			if err := run(t, cfg); err != nil {
				t.Fatal(err)
			}
			if got := m.done(); !reflect.DeepEqual(got, []string{"power_off"}) {
				t.Errorf("machine actions %v", got)
			}
			if starts != 1 {
				t.Errorf("step started %d times", starts)
			}
			var final *protocol.StepReport
			sawProgress := false
			for _, hb := range c.recorded() {
				if hb.Step == nil {
					continue
				}
				if hb.Step.Status == protocol.StepRunning && hb.Step.Progress != nil && hb.Step.Progress.Percent == 50 {
					sawProgress = true
				}
				if hb.Step.Status != protocol.StepRunning {
					final = hb.Step
				}
			}
			if !sawProgress {
				t.Error("no running report with progress")
			}
			if final == nil || final.Status != tt.wantStatus || final.ID != "s-1" {
				t.Fatalf("final report %+v, want status %s", final, tt.wantStatus)
			}
			if tt.stepErr != nil && final.Error != "disk on fire" {
				t.Errorf("error %q", final.Error)
			}
			if tt.stepErr == nil && final.Result[protocol.ResultTargetDisk] != "/dev/vda" {
				t.Errorf("result %v", final.Result)
			}
		})
	}
}

// abort cancels a long step, waits for it to return, then powers off.
func TestAbortCancelsStep(t *testing.T) {
	step := &protocol.Step{ID: "long", Interface: "clean", Name: protocol.StepEraseDevices, Abortable: true}
	c := newCastiron(t)
	c.lookup = func(n int, q url.Values) (int, any) { return 200, lookupAnswer("tok") }
	started := make(chan struct{})
	c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
		if hb.Step != nil && hb.Step.Status == protocol.StepRunning {
			<-started
			return 202, protocol.Instruction{Command: protocol.CmdAbort, Reason: "operator abort"}
		}
		return 202, instruction(protocol.CmdRunStep, step)
	}
	m := &machine{}
	cfg := c.config(t, false, m, &sleeps{})
	var stepReturned time.Time
	cfg.Machine = machineFunc(func(a string) {
		if stepReturned.IsZero() {
			t.Errorf("%s before the step returned", a)
		}
		m.record(a)
	})
	cfg.Steps = func(ctx context.Context, s protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // a step takes a moment to stop
		stepReturned = time.Now()
		return nil, ctx.Err()
	}
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	if got := m.done(); !reflect.DeepEqual(got, []string{"power_off"}) {
		t.Errorf("machine actions %v", got)
	}
}

type machineFunc func(action string)

func (f machineFunc) PowerOff() error { f("power_off"); return nil }
func (f machineFunc) Reboot() error   { f("reboot"); return nil }

// Heartbeats refused three times in a row (node no longer waiting) power
// off; a 500 in between does not count and is retried with backoff.
func TestHeartbeatRefused(t *testing.T) {
	c := newCastiron(t)
	c.lookup = func(n int, q url.Values) (int, any) { return 200, lookupAnswer("tok") }
	answers := []int{409, 500, 404, 401}
	c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
		if n < len(answers) {
			return answers[n], `{"error_message":"no"}`
		}
		t.Errorf("heartbeat %d after refusals", n)
		return 202, ""
	}
	m := &machine{}
	if err := run(t, c.config(t, false, m, &sleeps{})); err != nil {
		t.Fatal(err)
	}
	if got := m.done(); !reflect.DeepEqual(got, []string{"power_off"}) {
		t.Errorf("machine actions %v", got)
	}
	if n := c.callCount("heartbeat"); n != 4 {
		t.Errorf("%d heartbeats, want 4 (409, 500, 404, 401: a 500 does not reset the count)", n)
	}
}

// A stock Ironic answers 202 with no body: the agent keeps heartbeating
// until its context ends. Lookup retries a 404 and a withheld token.
func TestStockIronicAndLookupRetries(t *testing.T) {
	c := newCastiron(t)
	c.lookup = func(n int, q url.Values) (int, any) {
		switch n {
		case 0:
			return 404, `{"error_message":"not found"}`
		case 1:
			return 200, lookupAnswer("******")
		}
		return 200, lookupAnswer("tok-3")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
		if hb.AgentToken != "tok-3" {
			t.Errorf("token %q", hb.AgentToken)
		}
		if n == 3 {
			cancel()
		}
		return 202, ""
	}
	m, s := &machine{}, &sleeps{}
	cfg := c.config(t, false, m, s)
	cfg.TokenRetry = 123 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if len(m.done()) != 0 {
		t.Errorf("machine actions %v, want none", m.done())
	}
	if len(s.d) != 2 || s.d[1] != 123*time.Millisecond {
		t.Errorf("lookup waits %v, want a backoff then the token retry", s.d)
	}
}

// A step is never run twice: asked again after its outcome was
// acknowledged, the agent reports the outcome again.
func TestFinishedStepNotRerun(t *testing.T) {
	step := &protocol.Step{ID: "w-1", Interface: "deploy", Name: protocol.StepWriteImage}
	c := newCastiron(t)
	c.lookup = func(n int, q url.Values) (int, any) { return 200, lookupAnswer("tok") }
	var mu sync.Mutex
	acked, reReported := false, false
	c.heartbeat = func(n int, hb protocol.Heartbeat) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case hb.Step == nil && !acked:
			return 202, instruction(protocol.CmdRunStep, step)
		case hb.Step != nil && hb.Step.Status == protocol.StepSucceeded && !acked:
			acked = true
			return 202, instruction(protocol.CmdWait, nil)
		case hb.Step == nil && acked:
			return 202, instruction(protocol.CmdRunStep, step) // a stale repeat
		case hb.Step != nil && hb.Step.Status == protocol.StepSucceeded && acked:
			reReported = true
			return 202, instruction(protocol.CmdPowerOff, nil)
		}
		return 202, instruction(protocol.CmdWait, nil)
	}
	m := &machine{}
	cfg := c.config(t, false, m, &sleeps{})
	var starts int
	cfg.Steps = func(ctx context.Context, s protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
		starts++
		return map[string]any{"n": starts}, nil
	}
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	if starts != 1 || !reReported {
		t.Errorf("step started %d times, outcome re-reported: %v", starts, reReported)
	}
}
