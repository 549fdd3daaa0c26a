package httpapi

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"castiron/storage"
)

// By default the budget of rendered node views follows the fleet: a full
// node view is 2-3 KB, a list summary 0.4 KB, so viewBytesPerNode keeps
// the full view of most nodes, between minViewCacheBytes and
// maxAutoViewCacheBytes (10,000 nodes: 20 MiB). The Go heap grows to about
// twice what it holds, so this is about twice it in RSS after load. A fixed
// budget kept views of deleted nodes the fleet had long forgotten: 16 MiB
// whatever the fleet (issue 28's soak).
const (
	viewBytesPerNode      = 2 << 10
	minViewCacheBytes     = 1 << 20
	maxAutoViewCacheBytes = 32 << 20
	// resizeEvery bounds how often the fleet is counted (one COUNT(*)).
	resizeEvery  = 10 * time.Second
	countTimeout = 2 * time.Second
)

// maxViewKeys bounds the kinds of view kept (microversion x base URL x
// fields): real clients use a handful, and the Host header is the client's.
const maxViewKeys = 16

// viewCache keeps rendered node views: the JSON of one node as one kind of
// request shows it. A read first asks the store for the node's row version
// (storage.GetNodeVersion, or a list of versions), which costs a fraction
// of reading and decoding the 60 columns, and answers from here when the
// view was made from that very version; a row written since, by this
// process or by another conductor on the same database, has another
// version and is read and rendered again. Besides the row, a view depends
// on the request (the view key: microversion, base URL of its links,
// ?fields=) and on the conductor the hash ring names for the node, which
// changes without the row: that is part of the check too.
type viewCache struct {
	mu    sync.RWMutex
	views map[string]map[string]*cachedView // view key -> node uuid -> view
	size  int                               // bytes of all bodies
	max   int
	// count, when set, sizes max from the number of nodes (re-counted at
	// most every resizeEvery, by a put); nil: max is the operator's.
	count   func(context.Context) (int, error)
	sizedAt time.Time
}

type cachedView struct {
	version   int64
	conductor string // ConductorFor the node when rendered ("" = none or not shown)
	body      []byte
	// stamp is API.stamp when the view was last made or found current
	// (0: unknown): while it still reads the same, the view is current
	// without asking the store (fresh).
	stamp atomic.Uint64
}

// newViewCache returns a cache of up to max bytes of views; nil (no cache)
// when max is negative. max 0 sizes it from count (the number of nodes),
// or minViewCacheBytes when count is nil.
func newViewCache(max int, count func(context.Context) (int, error)) *viewCache {
	if max < 0 {
		return nil
	}
	c := &viewCache{views: map[string]map[string]*cachedView{}, max: max}
	if max == 0 {
		c.max = minViewCacheBytes
		c.count = count
	}
	return c
}

// budgetFor is the automatic budget for a fleet of nodes.
func budgetFor(nodes int) int {
	return min(max(nodes*viewBytesPerNode, minViewCacheBytes), maxAutoViewCacheBytes)
}

// resize re-counts the fleet when that is due and sets the budget from
// it, shrinking the cache if it now holds more. It runs on a put, outside
// the request's context (a view is kept after the answer is made), bounded
// by countTimeout.
func (c *viewCache) resize() {
	if c.count == nil {
		return
	}
	c.mu.Lock()
	due := time.Since(c.sizedAt) >= resizeEvery
	if due {
		c.sizedAt = time.Now() // one counter at a time
	}
	c.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		return // keep the budget; try again when due
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = budgetFor(n)
	if c.size > c.max {
		c.shrink()
	}
}

// forget drops every view of node (deleted).
func (c *viewCache) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, m := range c.views {
		if e := m[node]; e != nil {
			c.size -= cap(e.body)
			delete(m, node)
			if len(m) == 0 {
				delete(c.views, k)
			}
		}
	}
}

// viewKey names what shapes a node's view besides its row.
func viewKey(v *viewCtx, fields []string) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(v.ver.Minor))
	if v.showDriverSecrets {
		b.WriteString(" show_password")
	}
	if v.showInstanceSecrets {
		b.WriteString(" show_instance_secrets")
	}
	b.WriteByte(' ')
	b.WriteString(v.base)
	b.WriteByte(' ')
	if fields == nil {
		b.WriteByte('*')
	}
	b.WriteString(strings.Join(fields, ","))
	return b.String()
}

// mayHave reports whether a view of the node ident names may be kept
// under key: false only when ident is a uuid with no view at all, so a
// first read goes straight to the node instead of reading its version
// first (the cache is keyed by uuid; a name is looked up to find it).
func (c *viewCache) mayHave(key, ident string) bool {
	u, err := uuid.Parse(ident)
	if err != nil {
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.views[key][u.String()] != nil
}

// get returns the view of node under key if it was made from version with
// conductor, else nil. A view found is marked current at stamp st (read
// before version was).
func (c *viewCache) get(key, node string, version int64, conductor string, st uint64) []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.views[key][node]
	if e == nil || e.version != version || e.conductor != conductor {
		return nil
	}
	if st != 0 {
		e.stamp.Store(st)
	}
	return e.body
}

// fresh returns the view of node under key if it was made or found current
// at stamp st (nothing written, rings unchanged since), else nil.
func (c *viewCache) fresh(key, node string, st uint64) []byte {
	if st == 0 {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e := c.views[key][node]; e != nil && e.stamp.Load() == st {
		return e.body
	}
	return nil
}

func (c *viewCache) lookup(key, node string, version int64, conductor string) []byte {
	if e := c.views[key][node]; e != nil && e.version == version && e.conductor == conductor {
		return e.body
	}
	return nil
}

// getAll fills bodies[i] with the view of nodes[i] (their UUID and
// RowVersion; conductor says what the ring names for each) and returns
// the indexes it found none for.
func (c *viewCache) getAll(key string, nodes []*storage.NodeVersion, conductor func(*storage.NodeVersion) string, bodies [][]byte) []int {
	var misses []int
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, n := range nodes {
		if bodies[i] = c.lookup(key, n.UUID, n.RowVersion, conductor(n)); bodies[i] == nil {
			misses = append(misses, i)
		}
	}
	return misses
}

// put keeps body as the view of node under key, made from version with
// conductor, from a read made after stamp st was read. The body must not
// change afterwards; its capacity counts against the budget (callers give
// exact-size copies).
func (c *viewCache) put(key, node string, version int64, conductor string, st uint64, body []byte) {
	c.resize()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(body) > c.max/64 {
		return
	}
	m := c.views[key]
	if m == nil {
		if len(c.views) >= maxViewKeys {
			c.dropKey()
		}
		m = map[string]*cachedView{}
		c.views[key] = m
	}
	if old := m[node]; old != nil {
		c.size -= cap(old.body)
	}
	e := &cachedView{version: version, conductor: conductor, body: body}
	e.stamp.Store(st)
	m[node] = e
	c.size += cap(body)
	if c.size > c.max {
		c.shrink()
	}
}

// dropKey forgets every view of one key (an arbitrary one: map order).
func (c *viewCache) dropKey() {
	for k, m := range c.views {
		for _, e := range m {
			c.size -= cap(e.body)
		}
		delete(c.views, k)
		return
	}
}

// shrink forgets views, in map order (which Go randomises), until a
// quarter of the budget is free again.
func (c *viewCache) shrink() {
	for k, m := range c.views {
		for node, e := range m {
			if c.size <= c.max*3/4 {
				return
			}
			c.size -= cap(e.body)
			delete(m, node)
		}
		if len(m) == 0 {
			delete(c.views, k)
		}
	}
}
