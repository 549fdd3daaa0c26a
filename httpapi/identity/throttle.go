package identity

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Throttle slows down repeated failed logins from one client address: after
// Free failures each further attempt from that address waits Base,
// doubling per failure up to Max, before its credentials are even looked
// at. A success clears the address; failures are forgotten after Window.
// Other addresses are never slowed (no lock-out of the real admin), and at
// most Size addresses are remembered (the oldest go first), so memory is
// bounded whatever an attacker sends.
type Throttle struct {
	Free   int
	Base   time.Duration
	Max    time.Duration
	Window time.Duration
	Size   int

	mu    sync.Mutex
	addrs map[string]*list.Element
	lru   *list.List // of *failures, most recent first
	now   func() time.Time
}

type failures struct {
	addr  string
	count int
	last  time.Time
}

// NewThrottle returns the defaults: 5 free failures, then 250 ms doubling
// to 10 s, forgotten after 15 minutes, 4096 addresses.
func NewThrottle() *Throttle {
	return &Throttle{Free: 5, Base: 250 * time.Millisecond, Max: 10 * time.Second, Window: 15 * time.Minute, Size: 4096}
}

func (t *Throttle) init() {
	if t.addrs == nil {
		t.addrs = map[string]*list.Element{}
		t.lru = list.New()
	}
	if t.now == nil {
		t.now = time.Now
	}
}

// Delay is how long an attempt from addr waits now.
func (t *Throttle) Delay(addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	e, ok := t.addrs[addr]
	if !ok {
		return 0
	}
	f := e.Value.(*failures)
	if t.now().Sub(f.last) > t.Window {
		t.lru.Remove(e)
		delete(t.addrs, addr)
		return 0
	}
	over := f.count - t.Free
	if over <= 0 {
		return 0
	}
	d := t.Base
	for i := 1; i < over && d < t.Max; i++ {
		d *= 2
	}
	return min(d, t.Max)
}

// Wait sleeps Delay(addr), or until ctx ends (false).
func (t *Throttle) Wait(ctx context.Context, addr string) bool {
	d := t.Delay(addr)
	if d == 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Failed records a failed login from addr.
func (t *Throttle) Failed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	if e, ok := t.addrs[addr]; ok {
		f := e.Value.(*failures)
		if t.now().Sub(f.last) > t.Window {
			f.count = 0
		}
		f.count++
		f.last = t.now()
		t.lru.MoveToFront(e)
		return
	}
	t.addrs[addr] = t.lru.PushFront(&failures{addr: addr, count: 1, last: t.now()})
	for t.lru.Len() > max(t.Size, 1) {
		old := t.lru.Back()
		t.lru.Remove(old)
		delete(t.addrs, old.Value.(*failures).addr)
	}
}

// Succeeded clears addr.
func (t *Throttle) Succeeded(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	if e, ok := t.addrs[addr]; ok {
		t.lru.Remove(e)
		delete(t.addrs, addr)
	}
}

// Len is how many addresses are remembered.
func (t *Throttle) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	return t.lru.Len()
}
