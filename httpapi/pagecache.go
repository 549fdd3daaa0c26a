package httpapi

import (
	"sync"
)

// Whole answers kept while nothing changed (issue 28's API ceiling). A
// single-conductor store (SQLite: this process is its only writer) counts
// its write transactions, and the conductor counts ring changes; while
// both read the same, a read gives what it gave before, so an answer made
// then can be sent again without asking the database at all. Only answers
// that are the same for every caller allowed to get them are kept: never
// one a policy masked for its caller (nodeRedactor); what the secrets
// policy shows the caller is part of the key (viewKey), and a list scoped
// to a project is kept under that project.

// stamp is what a kept answer is checked against: the store's write
// generation plus the rings' epoch (both only grow, so the sum is the same
// only when neither changed), or 0 (keep nothing) when other processes
// write to the store too. Read it before the reads an answer is made
// from: a write that ends after it changes it.
func (a *API) stamp() uint64 {
	gen, exclusive := a.cond.WriteGeneration()
	if !exclusive {
		return 0
	}
	return gen + a.cond.RingEpoch() + 1
}

const (
	// maxPageBytes bounds the kept list pages; a page of 100 node
	// summaries is 37 kB, of 100 full nodes 250 kB.
	maxPageBytes = 4 << 20
	maxPages     = 256
)

// pageCache keeps whole list answers made at one stamp; a put at a newer
// stamp drops them all (they can no longer be sent).
type pageCache struct {
	mu    sync.RWMutex
	st    uint64
	pages map[string][]byte
	size  int
}

func newPageCache() *pageCache { return &pageCache{pages: map[string][]byte{}} }

// get returns the page kept under key at stamp st, or nil.
func (c *pageCache) get(key string, st uint64) []byte {
	if st == 0 {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.st != st {
		return nil
	}
	return c.pages[key]
}

// put keeps body, made from reads after st was read, under key. The body
// must not change afterwards.
func (c *pageCache) put(key string, st uint64, body []byte) {
	if st == 0 || len(body) > maxPageBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case st < c.st:
		return // made before a newer page: it may be stale already
	case st > c.st:
		clear(c.pages)
		c.st, c.size = st, 0
	}
	if old, ok := c.pages[key]; ok {
		c.size -= cap(old)
		delete(c.pages, key)
	}
	for k, b := range c.pages { // in Go's random map order
		if c.size+cap(body) <= maxPageBytes && len(c.pages) < maxPages {
			break
		}
		c.size -= cap(b)
		delete(c.pages, k)
	}
	c.pages[key] = body
	c.size += cap(body)
}
