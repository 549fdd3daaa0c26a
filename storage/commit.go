package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"castiron/fault"
)

// maxBatch bounds how many write transactions share one commit.
const maxBatch = 128

var errClosed = errors.New("storage: closed")

// writeJob is one caller's write transaction waiting for the committer.
type writeJob struct {
	ctx  context.Context
	fn   func(r runner) error
	done chan error
}

// committer is the group commit: one goroutine owns the writer connection
// and runs every write transaction that is queued when it gets to them in
// one SQLite transaction, each inside its own SAVEPOINT so that one failing
// (a duplicate name, a NodeLocked check) rolls back alone. Under concurrent
// writes a commit (WAL frames written, then the WAL synced: synchronous=FULL,
// the dominant cost of a small write) is then shared by many callers; a lone
// write still commits at once. Every caller returns only after its own
// commit is durable: on disk, synced, surviving a power cut.
type committer struct {
	w        *pool
	jobs     chan *writeJob
	closing  chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	obs      atomic.Pointer[CommitObserver]
}

// CommitObserver is told of each group commit: how many write transactions
// it carried, how long it took from begin to durable commit, and the error
// when the commit as a whole failed (metrics).
type CommitObserver interface {
	Commit(batch int, took time.Duration, err error)
}

// ObserveCommits sets the observer of group commits.
// On PostgreSQL there is no group commit of castiron's own to observe.
func (s *DB) ObserveCommits(o CommitObserver) {
	if s.commits != nil {
		s.commits.obs.Store(&o)
	}
}

func (c *committer) observe(batch int, start time.Time, err error) {
	if o := c.obs.Load(); o != nil {
		(*o).Commit(batch, time.Since(start), err)
	}
}

func startCommitter(w *pool) *committer {
	c := &committer{w: w, jobs: make(chan *writeJob), closing: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *committer) stop() {
	c.stopOnce.Do(func() { close(c.closing) })
	<-c.done
}

// writeTx runs fn in a write transaction (BEGIN IMMEDIATE through the DSN's
// _txlock, so the write lock is taken up front and never upgraded from a read
// lock, which is what produces SQLITE_BUSY under concurrency), possibly
// together with other callers' transactions. An error from fn is returned
// unchanged and none of fn's writes persist. A write refused because the
// disk is full is a fault.StorageFull (fault.NoSpace).
//
// Under a context marked by RetryOutages, a write refused because the
// database server is unreachable is run again until it succeeds or ctx
// ends.
func (s *DB) writeTx(ctx context.Context, fn func(r runner) error) error {
	defer s.gen.Add(1) // after the commit: see WriteGeneration
	return s.writeRetrying(ctx, func() error { return s.writeTx1(ctx, fn) })
}

// WriteGeneration changes whenever a write to the database has ended, and
// reports whether it can be relied on (valid). On SQLite it is PRAGMA
// data_version on a connection of its own, which changes with every commit
// of any other connection, this store's writer's and other processes'
// alike, plus this store's own count of write transactions (also those
// that wrote nothing). On PostgreSQL, shared with other conductors, it is
// not valid. While it reads the same, a read made after reading it sees
// what a later read would: the API's answers made then may be reused
// without asking the database again.
func (s *DB) WriteGeneration() (gen uint64, valid bool) {
	if s.dataVer == nil {
		return 0, false
	}
	v, err := s.dataVer.read()
	if err != nil {
		return 0, false
	}
	return v + s.gen.Load(), true
}

// writeStmt is writeTx for an fn that runs exactly one statement. On
// PostgreSQL that statement runs on its own, outside BEGIN ... COMMIT: it
// is then its own transaction and commits as durably (synchronous_commit),
// in one round trip instead of three. On SQLite it is writeTx: the group
// commit shares one WAL sync between concurrent writers.
func (s *DB) writeStmt(ctx context.Context, fn func(r runner) error) error {
	if s.commits != nil {
		return s.writeTx(ctx, fn)
	}
	defer s.gen.Add(1)
	return s.writeRetrying(ctx, func() error { return fn(runner{p: s.w}) })
}

// writeRetrying runs write, and again after an outage of the database
// server under RetryOutages (writeTx).
func (s *DB) writeRetrying(ctx context.Context, write func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := classifyWrite(write())
		if !fault.Is(err, fault.Unavailable) || ctx.Value(outageKey{}) == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

type outageKey struct{}

// RetryOutages marks ctx as a background task's: its writes wait out a
// restart of the database server (writeTx) instead of failing at once, as
// an API request's do (503, the client retries). A task has nobody to retry
// for it: one that could not record its end would leave its node reserved
// by a conductor that is alive, which nothing releases (issue 26). fn runs
// again as a whole, so a write whose COMMIT was cut off after it reached
// the server is applied to the node as it is then, as any UpdateNode is.
func RetryOutages(ctx context.Context) context.Context {
	return context.WithValue(ctx, outageKey{}, true)
}

func (s *DB) writeTx1(ctx context.Context, fn func(r runner) error) error {
	if s.commits == nil {
		return s.concurrentTx(ctx, fn)
	}
	job := &writeJob{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.commits.jobs <- job:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.commits.closing:
		return errClosed
	}
	// Once queued the job runs (or is skipped if ctx ended first); wait for
	// its outcome so the caller never races its own write.
	return <-job.done
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]*writeJob, 0, maxBatch)
	for {
		select {
		case <-c.closing:
			return
		case j := <-c.jobs:
			batch = append(batch[:0], j)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case j := <-c.jobs:
				batch = append(batch, j)
			default:
				break drain
			}
		}
		c.run(batch)
	}
}

// run commits one batch and tells each caller its own outcome.
func (c *committer) run(batch []*writeJob) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	defer func() {
		for i, j := range batch {
			j.done <- errs[i]
		}
	}()
	start := time.Now()
	tx, err := c.w.db.BeginTx(ctx, nil)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("storage: begin: %w", err)
		}
		c.observe(len(batch), start, err)
		return
	}
	var missed []string
	r := runner{p: c.w, tx: tx, missed: &missed}
	alone := len(batch) == 1
	anyOK := false
	for i, j := range batch {
		if err := j.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if !alone {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT job"); err != nil {
				errs[i] = fmt.Errorf("storage: savepoint: %w", err)
				continue
			}
		}
		if err := j.fn(r); err != nil {
			errs[i] = err
			if !alone {
				_, err1 := tx.ExecContext(ctx, "ROLLBACK TO job")
				_, err2 := tx.ExecContext(ctx, "RELEASE job")
				if err := errors.Join(err1, err2); err != nil {
					// The transaction is unusable: fail the whole batch.
					tx.Rollback()
					for k := range errs {
						if errs[k] == nil {
							errs[k] = fmt.Errorf("storage: rollback to savepoint: %w", err)
						}
					}
					return
				}
			}
			continue
		}
		if !alone {
			if _, err := tx.ExecContext(ctx, "RELEASE job"); err != nil {
				errs[i] = fmt.Errorf("storage: release savepoint: %w", err)
				continue
			}
		}
		anyOK = true
	}
	if !anyOK {
		tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("storage: commit: %w", err)
			}
		}
		c.observe(len(batch), start, err)
		return
	}
	c.observe(len(batch), start, nil)
	// The UPDATE of a given set of changed columns recurs (every power sync
	// writes the same ones): have it prepared for next time.
	for _, q := range missed {
		c.w.prepare(ctx, q)
	}
}
