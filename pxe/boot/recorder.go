package boot

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// BatchRecorder queues events and hands them to a sink in batches, so the
// packet path never waits for a database commit. When the queue is full
// events are dropped and counted (a timeline is diagnostics, not state).
type BatchRecorder struct {
	sink    func(ctx context.Context, evs []Event) error
	queue   chan Event
	log     *slog.Logger
	dropped atomic.Int64
}

// NewBatchRecorder makes a recorder; Run must be started for events to be
// written.
func NewBatchRecorder(sink func(ctx context.Context, evs []Event) error, log *slog.Logger) *BatchRecorder {
	return &BatchRecorder{sink: sink, queue: make(chan Event, 4096), log: log}
}

// Record implements Recorder.
func (b *BatchRecorder) Record(_ context.Context, ev Event) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	select {
	case b.queue <- ev:
	default:
		b.dropped.Add(1)
	}
}

// Run writes queued events until ctx ends, then flushes what is left.
func (b *BatchRecorder) Run(ctx context.Context) {
	batch := make([]Event, 0, 256)
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		if err := b.sink(ctx, batch); err != nil {
			b.log.Warn("boot timeline write failed", "events", len(batch), "err", err)
		}
		batch = batch[:0]
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case ev := <-b.queue:
					batch = append(batch, ev)
				default:
					flush(context.WithoutCancel(ctx))
					return
				}
			}
		case ev := <-b.queue:
			batch = append(batch, ev)
			if len(batch) == cap(batch) {
				flush(ctx)
			}
		case <-tick.C:
			flush(ctx)
		}
	}
}

// Dropped is how many events were lost to a full queue.
func (b *BatchRecorder) Dropped() int64 { return b.dropped.Load() }
