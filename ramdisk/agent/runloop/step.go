package runloop

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"castiron/ramdisk/protocol"
)

// stepRun is one step in its goroutine, owned by the heartbeat loop: the
// loop cancels it and waits for done before returning.
type stepRun struct {
	step   protocol.Step
	cancel context.CancelFunc
	done   chan struct{} // closed when the step has returned

	mu       sync.Mutex
	progress *protocol.Progress
	ended    bool
	result   map[string]any
	err      error
}

func startStep(ctx context.Context, step protocol.Step, inv *protocol.Inventory, runner StepRunner, log *slog.Logger) *stepRun {
	ctx, cancel := context.WithCancel(ctx)
	run := &stepRun{step: step, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		defer cancel()
		result, err := runStepSafely(ctx, runner, step, inv, run.setProgress)
		run.mu.Lock()
		run.ended, run.result, run.err = true, result, err
		run.mu.Unlock()
		if err != nil {
			log.Error("step failed", "step", step.ID, "err", err)
		} else {
			log.Info("step succeeded", "step", step.ID)
		}
	}()
	return run
}

// runStepSafely turns a panicking step into a failed one: as PID 1 a panic
// would take the kernel down with it.
func runStepSafely(ctx context.Context, runner StepRunner, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (result map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("step panicked: %v", p)
		}
	}()
	return runner(ctx, step, inv, progress)
}

func (r *stepRun) setProgress(p protocol.Progress) {
	r.mu.Lock()
	r.progress = &p
	r.mu.Unlock()
}

func (r *stepRun) finished() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// report is the step's state for the next heartbeat; final is true once it
// carries the outcome.
func (r *stepRun) report() (rep *protocol.StepReport, final bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rep = &protocol.StepReport{ID: r.step.ID, Status: protocol.StepRunning, Progress: r.progress}
	switch {
	case !r.ended:
	case r.err != nil:
		rep.Status, rep.Error = protocol.StepFailed, r.err.Error()
	default:
		rep.Status, rep.Result = protocol.StepSucceeded, r.result
	}
	return rep, r.ended
}
