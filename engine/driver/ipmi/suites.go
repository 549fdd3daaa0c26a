package ipmi

import "sync"

// suiteKey identifies one BMC of one node: a node whose ipmi_address or
// ipmi_port changes is probed again.
type suiteKey struct {
	uuid    string
	address string
	port    int
}

// suiteCache remembers, per BMC, the RMCP+ cipher suite that worked, so only
// the first session with a BMC pays for the probe. It lives in memory: after a
// restart each BMC is probed once more.
type suiteCache struct {
	mu sync.Mutex
	m  map[suiteKey]int
}

func (c *suiteCache) get(k suiteKey) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[k]
	return s, ok
}

func (c *suiteCache) set(k suiteKey, suite int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[suiteKey]int)
	}
	c.m[k] = suite
}

func (c *suiteCache) forget(k suiteKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
