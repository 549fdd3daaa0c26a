package boot

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// BatchRecorder queues events and hands them to a sink in batches, so the
// packet path never waits for a database commit. Record appends to a
// buffer under a lock and wakes the writer only when a batch is full (else
// the writer takes what is there every flushEvery): a boot storm records
// thousands of events a second, and waking a goroutine for each would cost
// more than the event. When the buffer is full events are dropped and
// counted (a timeline is diagnostics, not state).
type BatchRecorder struct {
	sink    func(ctx context.Context, evs []Event) error
	log     *slog.Logger
	mu      sync.Mutex
	buf     []Event
	full    chan struct{} // one token: buf reached batchEvents
	dropped atomic.Int64
}

const (
	// batchEvents is one write (one transaction) of a busy recorder.
	batchEvents = 1024
	// maxQueued bounds the buffer: about 4 s of a 10,000 DORA/s storm.
	maxQueued = 16 * batchEvents
	// flushEvery is the longest an event waits in the buffer.
	flushEvery = 100 * time.Millisecond
)

// NewBatchRecorder makes a recorder; Run must be started for events to be
// written.
func NewBatchRecorder(sink func(ctx context.Context, evs []Event) error, log *slog.Logger) *BatchRecorder {
	return &BatchRecorder{sink: sink, log: log, full: make(chan struct{}, 1)}
}

// Record implements Recorder.
func (b *BatchRecorder) Record(_ context.Context, ev Event) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	b.mu.Lock()
	if len(b.buf) >= maxQueued {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.buf = append(b.buf, ev)
	wake := len(b.buf) == batchEvents
	b.mu.Unlock()
	if wake {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// Run writes queued events until ctx ends, then writes what is left.
func (b *BatchRecorder) Run(ctx context.Context) {
	var spare []Event
	// flush writes everything buffered, batchEvents at a time, oldest first.
	flush := func(ctx context.Context) {
		b.mu.Lock()
		evs := b.buf
		b.buf = spare[:0]
		b.mu.Unlock()
		for rest := evs; len(rest) > 0; {
			n := min(len(rest), batchEvents)
			if err := b.sink(ctx, rest[:n]); err != nil {
				b.log.Warn("boot timeline write failed", "events", n, "err", err)
			}
			rest = rest[n:]
		}
		clear(evs) // let the strings go
		if cap(evs) <= 2*batchEvents {
			spare = evs // reuse; a storm's larger buffer is given back
		} else {
			spare = nil
		}
	}
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			flush(context.WithoutCancel(ctx))
			return
		case <-b.full:
		case <-tick.C:
		}
		flush(ctx)
	}
}

// Dropped is how many events were lost to a full queue.
func (b *BatchRecorder) Dropped() int64 { return b.dropped.Load() }
