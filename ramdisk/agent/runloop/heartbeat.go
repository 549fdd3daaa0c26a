package runloop

import (
	"context"
	"fmt"
	"time"

	"castiron/ramdisk/agent/apiclient"
	"castiron/ramdisk/protocol"
)

// heartbeat is the main loop. A finished step's report is sent until an
// answer to a heartbeat that carried it is anything other than run_step of
// that same step: that is castiron's acknowledgement.
func (l *loop) heartbeat(ctx context.Context, node, token string) error {
	var (
		run      *stepRun                // the current step, running or finished
		finished = map[string]*stepRun{} // acknowledged steps, by ID
		interval = l.cfg.HeartbeatInterval
		refused  int // heartbeats refused in a row
		failures int // transient failures in a row
	)
	for {
		report, final := run.report()
		in, err := l.cfg.API.Heartbeat(ctx, node, protocol.Heartbeat{
			AgentToken:   token,
			AgentVersion: l.cfg.AgentVersion,
			Step:         report,
		})
		wait := interval
		switch {
		case err != nil && ctx.Err() != nil:
			if run != nil {
				l.stop(run)
			}
			return ctx.Err()
		case err != nil && isRefusal(err):
			refused++
			l.log.Warn("heartbeat refused", "err", err, "count", refused)
			if refused >= refusalLimit {
				return l.finish(run, protocol.CmdPowerOff, fmt.Sprintf("heartbeat refused %d times: %v", refused, err))
			}
		case err != nil:
			wait = l.cfg.Backoff.Delay(failures)
			failures++
			l.log.Warn("heartbeat failed, retrying", "err", err, "in", wait.Round(time.Millisecond))
		default:
			refused, failures = 0, 0
			interval = l.interval(in.HeartbeatInterval)
			wait = interval
			if final && !(in.Command == protocol.CmdRunStep && in.Step != nil && in.Step.ID == run.step.ID) {
				l.log.Debug("step report acknowledged", "step", run.step.ID)
				finished[run.step.ID] = run
				run = nil
			}
			switch in.Command {
			case protocol.CmdWait:
			case protocol.CmdRunStep:
				run = l.runStep(ctx, run, in.Step, finished)
			case protocol.CmdAbort:
				return l.finish(run, protocol.CmdPowerOff, reasonOr(in.Reason, "aborted by castiron"))
			case protocol.CmdPowerOff, protocol.CmdReboot:
				return l.finish(run, in.Command, reasonOr(in.Reason, "asked by castiron"))
			default:
				l.log.Warn("unknown instruction, waiting", "command", in.Command)
			}
		}
		if err := l.wait(ctx, wait, run); err != nil {
			if run != nil {
				l.stop(run)
			}
			return err
		}
	}
}

// runStep starts step unless it is the one already running or reported. A
// step that already ran is never run twice (a second write_image or erase
// could do harm): its outcome is reported again instead.
func (l *loop) runStep(ctx context.Context, run *stepRun, step *protocol.Step, finished map[string]*stepRun) *stepRun {
	switch {
	case step == nil:
		l.log.Warn("run_step without a step, waiting")
		return run
	case run != nil && run.step.ID == step.ID:
		return run // already running, or its result not yet acknowledged
	case run == nil && finished[step.ID] != nil:
		l.log.Warn("asked again for a finished step; reporting its outcome again", "step", step.ID)
		return finished[step.ID]
	case run != nil:
		// castiron must abort a step before giving another one.
		l.log.Warn("asked for a step while another is running; still reporting it", "running", run.step.ID, "asked", step.ID)
		return run
	}
	l.log.Info("step started", "step", step.ID, "name", step.Interface+"."+step.Name)
	return startStep(ctx, *step, l.cfg.Inventory, l.cfg.Steps, l.log)
}

// wait sleeps d, waking early when the running step ends so that its
// result is reported at once.
func (l *loop) wait(ctx context.Context, d time.Duration, run *stepRun) error {
	var ended <-chan struct{}
	if run != nil && !run.finished() {
		ended = run.done
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-ended:
	}
	return nil
}

func (l *loop) interval(seconds float64) time.Duration {
	if seconds <= 0 {
		return l.cfg.HeartbeatInterval
	}
	return max(time.Duration(seconds*float64(time.Second)), l.cfg.MinHeartbeat)
}

// isRefusal: answers that say this agent is not wanted (bad token, the node
// is gone or not in a wait state) rather than that the server is unwell.
func isRefusal(err error) bool {
	switch apiclient.StatusCode(err) {
	case 401, 403, 404, 409:
		return true
	}
	return false
}

func reasonOr(reason, fallback string) string {
	if reason != "" {
		return reason
	}
	return fallback
}
