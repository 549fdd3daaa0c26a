package dhcp

import (
	"sync"
	"time"
)

// throttle lets one event per (kind, MAC) through per period, so a machine
// the gate refuses (it retries every few seconds, forever) or a flood of
// them cannot flood the timeline or the log. Its memory is bounded: when
// full, old entries are swept, and if that frees nothing new keys are
// dropped.
type throttle struct {
	period time.Duration
	max    int
	mu     sync.Mutex
	last   map[throttleKey]time.Time
}

type throttleKey struct {
	kind string
	mac  hwaddr
}

func newThrottle(period time.Duration, max int) *throttle {
	return &throttle{period: period, max: max, last: map[throttleKey]time.Time{}}
}

func (t *throttle) allow(kind string, mac hwaddr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := throttleKey{kind, mac}
	if at, ok := t.last[k]; ok && now.Sub(at) < t.period {
		return false
	}
	if len(t.last) >= t.max {
		for k, at := range t.last {
			if now.Sub(at) >= t.period {
				delete(t.last, k)
			}
		}
		if len(t.last) >= t.max {
			return false
		}
	}
	t.last[k] = now
	return true
}
