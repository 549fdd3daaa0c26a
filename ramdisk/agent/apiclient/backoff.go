package apiclient

import (
	"context"
	"math/rand/v2"
	"time"
)

// Default backoff: from half a second up to 10 s.
const (
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 10 * time.Second
)

// Backoff is exponential backoff with jitter: the n-th retry waits a random
// time in [d/2, d] where d = Base·2ⁿ capped at Max, so machines booting
// together do not retry in step. The zero value uses the defaults.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// Delay returns the wait before retry number attempt (0 for the first).
func (b Backoff) Delay(attempt int) time.Duration {
	if b.Base <= 0 {
		b.Base = DefaultBackoffBase
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoffMax
	}
	d := b.Max
	if attempt < 30 {
		if exp := b.Base << attempt; exp > 0 && exp < b.Max {
			d = exp
		}
	}
	half := d / 2
	return half + rand.N(half+1)
}

// Sleep waits d or until ctx is done, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
