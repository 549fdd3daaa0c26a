package dhcp

import (
	"context"
	"sync"
	"time"
)

// leaseWriter batches concurrent lease writes into one PutLeases call (one
// group-commit job, one transaction, no savepoint per lease). A write that
// finds nobody flushing starts a drain goroutine, which writes everything
// queued, again and again, and ends when the queue is empty. Under load a
// batch is everything that arrived during the previous commit (plus a short
// gathering wait, below), so many ACKs share one commit; a caller waits for
// no batch but the one holding its own lease.
type leaseWriter struct {
	store    LeaseStore
	mu       sync.Mutex
	pending  []leaseJob
	draining bool
	lastEnd  time.Time // when the last drain ended
	drains   sync.WaitGroup
}

type leaseJob struct {
	l    Lease
	done func(error) // called by the drain once the write ended
}

const (
	// maxLeaseBatch bounds one transaction.
	maxLeaseBatch = 512
	// Under sustained load (a drain ended less than busyGap ago, or this
	// drain already committed a batch) batches are gather apart: a commit
	// costs fixed work (begin, locks, WAL frames written, the sync of the
	// write-ahead log's index) however few leases it carries, and at
	// thousands of ACKs/s it would otherwise carry one or two. Waiting a
	// few milliseconds makes it carry tens; a DHCP client waits seconds
	// before it retransmits. An idle server's ACK is not delayed.
	busyGap = 10 * time.Millisecond
	gather  = 4 * time.Millisecond
	// A drain that already has this many leases does not wait.
	fullEnough = 64
)

// put returns once l is durable, or failed, or ctx ended (the lease may
// then still be written; the caller sends no ACK either way).
func (w *leaseWriter) put(ctx context.Context, l Lease) error {
	done := make(chan error, 1)
	w.enqueue(ctx, l, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue queues l; done is called with the outcome, from the drain
// goroutine, after the commit. done must not block for long: the next
// batch waits for it.
func (w *leaseWriter) enqueue(ctx context.Context, l Lease, done func(error)) {
	w.mu.Lock()
	w.pending = append(w.pending, leaseJob{l: l, done: done})
	if !w.draining {
		w.draining = true
		// Other callers' leases ride on the drain: detach it from this
		// caller's cancellation. It ends by itself once the queue is empty.
		w.drains.Add(1)
		go w.drain(context.WithoutCancel(ctx))
	}
	w.mu.Unlock()
}

// wait returns when no drain is running (shutdown: after the last enqueue).
func (w *leaseWriter) wait() { w.drains.Wait() }

func (w *leaseWriter) drain(ctx context.Context) {
	defer w.drains.Done()
	w.mu.Lock()
	busy := time.Since(w.lastEnd) < busyGap
	var last time.Time // when the previous batch of this drain started
	if busy {
		last = time.Now()
	}
	for len(w.pending) > 0 {
		if busy && len(w.pending) < fullEnough {
			if wait := gather - time.Since(last); wait > 0 {
				w.mu.Unlock()
				time.Sleep(wait)
				w.mu.Lock()
			}
		}
		busy, last = true, time.Now()
		n := min(len(w.pending), maxLeaseBatch)
		batch := append([]leaseJob(nil), w.pending[:n]...)
		w.pending = append(w.pending[:0], w.pending[n:]...)
		w.mu.Unlock()
		w.flush(ctx, batch)
		w.mu.Lock()
	}
	w.draining = false
	w.lastEnd = time.Now()
	w.mu.Unlock()
}

func (w *leaseWriter) flush(ctx context.Context, batch []leaseJob) {
	ls := make([]Lease, len(batch))
	for i, j := range batch {
		ls[i] = j.l
	}
	errs, err := w.store.PutLeases(ctx, ls)
	for i, j := range batch {
		if err != nil {
			j.done(err)
		} else {
			j.done(errs[i])
		}
	}
}
