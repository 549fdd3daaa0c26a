package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPowerTimeout means a node did not reach the requested power state in
// time (drivers re-export it as their own sentinel).
var ErrPowerTimeout = errors.New("timed out waiting for power state")

// PowerWait polls a BMC until the node is in Want: the wait every driver's
// SetPowerState ends with.
type PowerWait struct {
	Protocol string // "IPMI", "Redfish": for messages
	Node     string
	Action   string // what was sent, for messages
	Want     string
	Timeout  time.Duration
	// Interval is the first pause between reads; it doubles up to
	// MaxInterval.
	Interval, MaxInterval time.Duration
	// Read reads the power state once, bounded by ctx.
	Read func(ctx context.Context) (string, error)
	// Fatal reports a read error that ends the wait at once (refused
	// credentials: polling will not fix them). Nil: none is.
	Fatal func(error) bool
	// Failed hears of every other failed read (a BMC may be busy while the
	// node changes state; the wait goes on). Nil: nothing to do.
	Failed func(error)
}

// Run waits; the error wraps ErrPowerTimeout, or ctx's error when the
// caller gave up, or a Fatal read error.
func (w PowerWait) Run(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	delay := w.Interval
	last, lastErr := "", error(nil)
	for {
		state, err := w.Read(wctx)
		if err == nil && state == w.Want {
			return nil
		}
		switch {
		case err != nil && wctx.Err() != nil:
			// cut short by the deadline: not the BMC's fault
		case err != nil && w.Fatal != nil && w.Fatal(err):
			return err
		case err != nil:
			lastErr = err
			if w.Failed != nil {
				w.Failed(err)
			}
		default:
			last, lastErr = state, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-wctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return fmt.Errorf("%s %s for node %s: gave up waiting for %s: %w", w.Protocol, w.Action, w.Node, w.Want, ctx.Err())
			}
			if lastErr != nil {
				return fmt.Errorf("%w: node %s did not reach %q within %s after %s; last read failed: %w",
					ErrPowerTimeout, w.Node, w.Want, w.Timeout, w.Action, lastErr)
			}
			return fmt.Errorf("%w: node %s did not reach %q within %s after %s (still %q)",
				ErrPowerTimeout, w.Node, w.Want, w.Timeout, w.Action, last)
		case <-t.C:
		}
		delay = min(2*delay, w.MaxInterval)
	}
}
