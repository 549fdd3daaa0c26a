// Package steps runs the agent's clean and deploy steps on this machine:
// erase_devices_metadata (partition tables and file system signatures),
// erase_devices (every byte zeroed) and write_image (a raw, qcow2, gzip or
// zstd image streamed from HTTP onto the root disk, checksummed, with an
// optional config drive partition). Steps report progress at most twice a
// second and stop promptly when their context is cancelled.
package steps

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"castiron/ramdisk/agent/steps/fetch"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/swraid"
)

// Run executes one step on this machine's disks, reporting progress as it
// goes, and returns the step's result. inv is the inventory collected at
// start (disks for root device hints). ctx is cancelled on abort.
func Run(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
	return newRunner().run(ctx, step, inv, progress)
}

// RunTrusting is Run for a ramdisk that carries castiron's CA: images and
// config drives are downloaded over HTTPS only, from servers tlsCfg
// trusts (fetch.Options.TLS).
func RunTrusting(tlsCfg *tls.Config) func(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
	return func(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
		r := newRunner()
		r.fetch.TLS = tlsCfg
		return r.run(ctx, step, inv, progress)
	}
}

// runner carries what a step needs besides its arguments; tests shorten
// its delays.
type runner struct {
	log           *slog.Logger
	fetch         fetch.Options
	progressEvery time.Duration
	// md is the ramdisk's mdadm (software RAID); nil where there is none
	// (tests, a ramdisk built without it).
	md *swraid.MD
}

func newRunner() *runner {
	log := slog.Default().With("component", "steps")
	return &runner{
		log:           log,
		fetch:         fetch.Options{Log: log},
		progressEvery: 500 * time.Millisecond,
		md:            swraid.Find(log),
	}
}

func (r *runner) run(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
	rep := &reporter{fn: progress, every: r.progressEvery}
	log := r.log.With("step", step.Name, "step_id", step.ID)
	args := step.Args
	if args == nil {
		args = map[string]any{}
	}
	start := time.Now()
	log.Info("step starting")
	var res map[string]any
	var err error
	if step.Interface == protocol.StepRAIDInterface {
		res, err = r.raidStep(ctx, log, step.Name, args, inv, rep)
		return r.finish(log, start, res, err)
	}
	switch step.Name {
	case protocol.StepEraseDevicesMetadata:
		res, err = r.eraseDevicesMetadata(ctx, log, args, inv, rep)
	case protocol.StepEraseDevices:
		res, err = r.eraseDevices(ctx, log, args, inv, rep)
	case protocol.StepWriteImage:
		res, err = r.writeImage(ctx, log, args, inv, rep)
	default:
		return nil, fmt.Errorf("unknown step %s.%s", step.Interface, step.Name)
	}
	return r.finish(log, start, res, err)
}

func (r *runner) finish(log *slog.Logger, start time.Time, res map[string]any, err error) (map[string]any, error) {
	if err != nil {
		log.Warn("step failed", "error", err, "elapsed", time.Since(start))
		return nil, err
	}
	log.Info("step done", "elapsed", time.Since(start), "result", res)
	return res, nil
}

// reporter passes progress on, at most once per interval, except the last
// report of a step.
type reporter struct {
	fn    func(protocol.Progress)
	every time.Duration
	last  time.Time
}

func (r *reporter) report(p protocol.Progress, final bool) {
	if r.fn == nil {
		return
	}
	now := time.Now()
	if !final && !r.last.IsZero() && now.Sub(r.last) < r.every {
		return
	}
	r.last = now
	if p.Total > 0 {
		p.Percent = min(100, float64(int64(float64(p.Done)*1000/float64(p.Total)))/10)
	}
	r.fn(p)
}
