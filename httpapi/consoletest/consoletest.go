// Package consoletest is an in-memory serial console for tests of the
// console stream (httpapi) and the web UI's terminal: an
// httpapi.ConsoleAttacher that keeps a bounded scrollback, prints to every
// viewer, echoes what is typed (as a serial getty does) and records it.
// It holds no SOL: the real console is the conductor's.
package consoletest

import (
	"context"
	"errors"
	"io"
	"sync"

	"castiron/fault"
)

// ScrollbackMax bounds the kept output, as a real console's buffer is.
const ScrollbackMax = 64 << 10

// Console is the fake: one console per enabled node.
type Console struct {
	mu      sync.Mutex
	nodes   map[string]*node
	changed chan struct{} // closed and replaced at every attach, detach or input
}

type node struct {
	scrollback []byte
	typed      []byte
	viewers    map[*Viewer]bool
	attaches   []bool // the write flag of every attach, in order
}

// New is a console with no node enabled.
func New() *Console {
	return &Console{nodes: map[string]*node{}, changed: make(chan struct{})}
}

// Enable enables the console of node (its uuid), with nothing printed yet.
func (c *Console) Enable(uuid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[uuid] == nil {
		c.nodes[uuid] = &node{viewers: map[*Viewer]bool{}}
	}
}

// Disable ends node's console: every viewer reads EOF.
func (c *Console) Disable(uuid string) {
	c.mu.Lock()
	n := c.nodes[uuid]
	delete(c.nodes, uuid)
	c.mu.Unlock()
	if n == nil {
		return
	}
	for v := range n.viewers {
		v.out.CloseWithError(io.EOF)
	}
	c.notify()
}

// Print writes b as the machine's output: into the scrollback and to every
// viewer (blocking until each has taken it, as a viewer that stops reading
// would hold a real console only up to its buffer).
func (c *Console) Print(uuid string, b []byte) {
	c.mu.Lock()
	n := c.nodes[uuid]
	if n == nil {
		c.mu.Unlock()
		return
	}
	n.scrollback = append(n.scrollback, b...)
	if over := len(n.scrollback) - ScrollbackMax; over > 0 {
		n.scrollback = append([]byte(nil), n.scrollback[over:]...)
	}
	viewers := make([]*Viewer, 0, len(n.viewers))
	for v := range n.viewers {
		viewers = append(viewers, v)
	}
	c.mu.Unlock()
	for _, v := range viewers {
		v.out.Write(b) // a detached viewer's pipe is closed: nothing to do
	}
}

// Typed is everything typed into node's console so far.
func (c *Console) Typed(uuid string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[uuid]; n != nil {
		return append([]byte(nil), n.typed...)
	}
	return nil
}

// Viewers is how many viewers are attached to node's console now.
func (c *Console) Viewers(uuid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[uuid]; n != nil {
		return len(n.viewers)
	}
	return 0
}

// Attaches is the write flag of every attach to node's console, in order.
func (c *Console) Attaches(uuid string) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[uuid]; n != nil {
		return append([]bool(nil), n.attaches...)
	}
	return nil
}

// Wait blocks until cond (called with nothing locked) is true or ctx ends;
// cond is checked again after every attach, detach and input.
func (c *Console) Wait(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Console) notify() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// AttachConsole implements httpapi.ConsoleAttacher.
func (c *Console) AttachConsole(ctx context.Context, uuid string, write bool) ([]byte, io.ReadWriteCloser, error) {
	c.mu.Lock()
	n := c.nodes[uuid]
	if n == nil {
		c.mu.Unlock()
		return nil, nil, fault.New(fault.Invalid, "The console of node %s is not enabled.", uuid)
	}
	r, w := io.Pipe()
	v := &Viewer{c: c, uuid: uuid, write: write, in: r, out: w}
	n.viewers[v] = true
	n.attaches = append(n.attaches, write)
	sb := append([]byte(nil), n.scrollback...)
	c.mu.Unlock()
	c.notify()
	return sb, v, nil
}

// Viewer is one attached viewer's stream.
type Viewer struct {
	c     *Console
	uuid  string
	write bool
	in    *io.PipeReader
	out   *io.PipeWriter
	once  sync.Once
}

// Read is the console's live output.
func (v *Viewer) Read(p []byte) (int, error) { return v.in.Read(p) }

// Write types p: recorded, then echoed to every viewer.
func (v *Viewer) Write(p []byte) (int, error) {
	if !v.write {
		return 0, fault.New(fault.Forbidden, "This console viewer is read-only.")
	}
	v.c.mu.Lock()
	n := v.c.nodes[v.uuid]
	if n == nil || !n.viewers[v] {
		v.c.mu.Unlock()
		return 0, errors.New("console viewer detached")
	}
	n.typed = append(n.typed, p...)
	v.c.mu.Unlock()
	v.c.notify()
	v.c.Print(v.uuid, p)
	return len(p), nil
}

// Close detaches the viewer.
func (v *Viewer) Close() error {
	v.once.Do(func() {
		v.c.mu.Lock()
		if n := v.c.nodes[v.uuid]; n != nil {
			delete(n.viewers, v)
		}
		v.c.mu.Unlock()
		v.in.Close()
		v.c.notify()
	})
	return nil
}
