package ipmi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
)

// Kept sessions. A power read on a new session costs 7 round trips (Get
// Channel Authentication Capabilities, Open Session, RAKP 1 and 3, Set
// Session Privilege Level, Get Chassis Status, Close Session); on an open
// one it costs 1. So power reads (power sync, Verify) leave their session
// open for the next read of the same BMC. go-ipmi's client keeps an open
// session alive by itself (Get Session Info every 30 s, under the 60 s
// inactivity timeout of IPMI 2.0 §6.12.15) until it is closed; the engine
// closes the sessions it stopped using (CloseIdleSessions) and all of them
// when it stops (CloseSessions). Power changes keep their own session for
// their whole wait, as before, so they never hold a kept one for minutes.

// keepKey is one BMC as one user sees it: nodes behind the same BMC with
// the same credentials share its session.
type keepKey struct {
	address  string
	port     int
	username string
	password string
	priv     types.PrivilegeLevel
	v15      bool
	suite    int
}

func keyOf(inf *info) keepKey {
	return keepKey{address: inf.address, port: inf.port, username: inf.username, password: inf.password,
		priv: inf.priv, v15: inf.v15, suite: inf.suite}
}

// kept is one open session. busy is a one-slot semaphore: an operation
// that finds the session in use opens a session of its own rather than wait.
type kept struct {
	busy chan struct{}
	c    *client.Client // nil: none open
	used time.Time
	gone bool // removed from the pool while a taker waited for it
}

type keptPool struct {
	mu sync.Mutex
	m  map[keepKey]*kept
}

// take returns k's entry, claimed, or nil when another operation has it.
func (p *keptPool) take(k keepKey) *kept {
	for {
		p.mu.Lock()
		e := p.m[k]
		if e == nil {
			if p.m == nil {
				p.m = make(map[keepKey]*kept)
			}
			e = &kept{busy: make(chan struct{}, 1)}
			p.m[k] = e
		}
		p.mu.Unlock()
		select {
		case e.busy <- struct{}{}:
		default:
			return nil
		}
		if !e.gone {
			return e
		}
		<-e.busy // closed meanwhile: a session opened on it would leak
	}
}

func (e *kept) release() { <-e.busy }

// withKept runs fn on the BMC's kept session (opening it if needed) and
// keeps the session open afterwards unless fn failed. A failure on a
// session that was already open is retried once on a new one: the BMC may
// have forgotten the session (restart, eviction).
func (d *Driver) withKept(ctx context.Context, inf *info, fn func(ctx context.Context, s *conn) error) error {
	once := func(s *conn) error { return fn(ctx, s) }
	if d.cfg.SessionPerOperation {
		return d.session(ctx, inf, once)
	}
	e := d.keep.take(keyOf(inf))
	if e == nil {
		return d.session(ctx, inf, once)
	}
	defer e.release()
	s := &conn{d: d, inf: inf, c: e.c}
	var err error
	if s.c != nil {
		// A BMC that forgot the session (restart, shorter inactivity
		// timeout than go-ipmi's 30 s keepalive) does not answer: two
		// exchange timeouts are enough to tell, then a new session.
		rctx, cancel := context.WithTimeout(ctx, 2*d.cfg.Timeout)
		err = fn(rctx, s)
		cancel()
		if err != nil && ctxErr(ctx) == nil && !errors.Is(err, ErrAuthentication) {
			s.drop(ctx)
			err = fn(ctx, s)
		}
	} else {
		err = fn(ctx, s)
	}
	if err != nil {
		s.drop(ctx)
	}
	e.c, e.used = s.c, time.Now()
	return err
}

// CloseIdleSessions closes the kept sessions unused for longer than idle
// (nodes deleted, moved to another conductor, put in maintenance).
func (d *Driver) CloseIdleSessions(ctx context.Context, idle time.Duration) {
	d.closeKept(ctx, func(e *kept) bool { return time.Since(e.used) > idle })
}

// CloseSessions closes every kept session, waiting for operations in
// flight on them; after it the pool is empty (it fills again on use).
func (d *Driver) CloseSessions(ctx context.Context) {
	d.closeKept(ctx, nil)
}

// OpenSessions is the number of kept sessions open now.
func (d *Driver) OpenSessions() int {
	d.keep.mu.Lock()
	defer d.keep.mu.Unlock()
	n := 0
	for _, e := range d.keep.m {
		select {
		case e.busy <- struct{}{}:
			if e.c != nil {
				n++
			}
			<-e.busy
		default:
			n++ // in use, so open or opening
		}
	}
	return n
}

// closeKept removes the entries match selects (all when nil) and closes
// their sessions, several at a time: Close Session is a round trip each.
func (d *Driver) closeKept(ctx context.Context, match func(*kept) bool) {
	var doomed []*client.Client
	d.keep.mu.Lock()
	for k, e := range d.keep.m {
		if match != nil {
			select {
			case e.busy <- struct{}{}: // idle: ours to judge
			default:
				continue // in use: not idle
			}
			if !match(e) {
				<-e.busy
				continue
			}
		} else {
			select {
			case e.busy <- struct{}{}:
			case <-ctx.Done():
				d.keep.mu.Unlock()
				return
			}
		}
		if e.c != nil {
			doomed = append(doomed, e.c)
			e.c = nil
		}
		delete(d.keep.m, k)
		e.gone = true
		<-e.busy
	}
	d.keep.mu.Unlock()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, c := range doomed {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			defer cancel()
			if ctx.Err() != nil {
				cancel() // out of time: free the socket, skip Close Session
			}
			_ = c.Close(cctx)
		}()
	}
	wg.Wait()
}
