package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"castiron/client"
)

// Runner runs one bulk command: at most Concurrency nodes at a time (the
// rest queue, so a bulk introspection does not PXE-boot a whole rack at once),
// each shown on Progress.
type Runner struct {
	Client      *client.Client
	Concurrency int           // default 20
	Timeout     time.Duration // per node and transition; default 30 min
	Progress    Progress
}

// each runs fn for every label with the concurrency cap and collects results
// in input order.
func (r *Runner) each(ctx context.Context, labels []string, fn func(ctx context.Context, i int, t Task) Result) []Result {
	conc := r.Concurrency
	if conc <= 0 {
		conc = 20
	}
	results := make([]Result, len(labels))
	if len(labels) == 0 {
		return results
	}
	tasks := make([]Task, len(labels))
	for i, l := range labels {
		tasks[i] = r.Progress.Task(l)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(conc, len(labels)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := tasks[i]
				t.State("starting")
				res := fn(ctx, i, t)
				if res.Label == "" {
					res.Label = labels[i]
				}
				if res.OK {
					t.Done(true, res.State+" ("+res.Action+")")
				} else {
					t.Done(false, oneLine(res.LastError))
				}
				results[i] = res
			}
		}()
	}
	for i := range labels {
		select {
		case work <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	for i := range results {
		if results[i].Label == "" { // never started: interrupted
			results[i] = Result{Label: labels[i], LastError: "not started: " + context.Cause(ctx).Error()}
			tasks[i].Done(false, results[i].LastError)
		}
	}
	r.Progress.Close()
	return results
}

// settled reports whether Ironic has finished with the node for now: it is
// in a stable state, a failure state (Ironic keeps target_provision_state
// set there: inspect failed -> manageable, clean failed -> available, ...)
// or a hold waiting for the operator.
func settled(n *client.Node) bool {
	switch n.ProvisionState {
	case "verifying", "inspecting", "inspect wait", "cleaning", "clean wait", "deploying",
		"wait call-back", "deleting", "adopting", "rescuing", "rescue wait", "unrescuing",
		"servicing", "service wait":
		return false
	case "inspect failed", "clean failed", "deploy failed", "rescue failed", "unrescue failed",
		"service failed", "adopt failed", "error", "clean hold", "deploy hold", "service hold":
		return true
	}
	return n.TargetProvisionState == ""
}

// move asks for target (manage, provide, inspect, abort) and waits until the
// node settles, showing each state it passes through. A node that is briefly
// locked (409 NodeLocked) is retried.
func (r *Runner) move(ctx context.Context, t Task, uuid, target string) (*client.Node, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t.State(target + " requested")
	delay := 50 * time.Millisecond
	for {
		err := r.Client.SetProvisionState(ctx, uuid, target)
		if err == nil {
			break
		}
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 409 || !strings.Contains(strings.ToLower(e.Fault), "locked") {
			return nil, errors.New(faultOf(err))
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("%s: node stayed locked: %s", target, e.Fault)
		}
		delay = min(delay*2, time.Second)
	}
	return r.settle(ctx, t, uuid)
}

// settle polls the node until Ironic has finished with it.
func (r *Runner) settle(ctx context.Context, t Task, uuid string) (*client.Node, error) {
	delay := 50 * time.Millisecond
	for {
		n, err := r.Client.GetNode(ctx, uuid)
		if err != nil {
			return nil, errors.New(faultOf(err))
		}
		st := n.ProvisionState
		if n.TargetProvisionState != "" {
			st += " -> " + n.TargetProvisionState
		}
		t.State(st)
		if settled(n) {
			return n, nil
		}
		if err := sleep(ctx, delay); err != nil {
			return n, fmt.Errorf("timed out in %s", n.ProvisionState)
		}
		delay = min(delay*3/2, 2*time.Second)
	}
}

// expect turns a settled node into an error unless it reached want.
func expect(n *client.Node, want string) error {
	if n.ProvisionState == want {
		return nil
	}
	if n.LastError != "" {
		return fmt.Errorf("%s", n.LastError)
	}
	return fmt.Errorf("ended in %q instead of %q", n.ProvisionState, want)
}

func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// faultOf is the server's faultstring, or the error text.
func faultOf(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%s (HTTP %d)", e.Fault, e.Status)
	}
	return err.Error()
}

// steps runs the state changes a bulk command asked for on one node, from
// whatever state it is in, and reports how it ended.
type steps struct {
	manage, inspect, provide bool
}

func (r *Runner) advance(ctx context.Context, t Task, n *client.Node, s steps, res *Result) {
	res.UUID, res.State = n.UUID, n.ProvisionState
	var did []string
	fail := func(n *client.Node, err error) {
		if n != nil {
			res.State = n.ProvisionState
		}
		res.OK, res.LastError = false, err.Error()
	}
	res.OK = true
	step := func(target, want string) bool {
		m, err := r.move(ctx, t, n.UUID, target)
		if err == nil {
			err = expect(m, want)
		}
		if err != nil {
			fail(m, err)
			return false
		}
		n = m
		res.State = n.ProvisionState
		did = append(did, target)
		return true
	}
	defer func() {
		if len(did) > 0 {
			if res.Action != "" {
				res.Action += ", "
			}
			res.Action += strings.Join(did, ", ")
		}
	}()
	if s.manage && n.ProvisionState == "enroll" && !step("manage", "manageable") {
		return
	}
	if s.inspect && (n.ProvisionState == "manageable" || n.ProvisionState == "inspect failed") &&
		!step("inspect", "manageable") {
		return
	}
	if s.provide && n.ProvisionState == "manageable" && !step("provide", "available") {
		return
	}
}
