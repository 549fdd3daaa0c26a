// Package console runs nodes' serial consoles (Ironic's ipmitool-socat and
// ipmitool-shellinabox console interfaces, done in Go): per node one
// session that keeps the BMC's Serial-over-LAN link up and reconnects it
// when it drops, a bounded scrollback, any number of viewers (up to a
// limit) fed from it, and a TCP listener on the node's console port that
// gives the raw stream both ways (socat, nc).
//
// Every goroutine belongs to a session and ends with Stop; the Manager's
// Close stops them all.
package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
)

// Opener activates the node's serial console on its BMC. A session calls it
// again, with backoff, after the link drops.
type Opener func(ctx context.Context) (driver.SerialLink, error)

// Config tunes the Manager; the zero value gives the defaults noted.
type Config struct {
	// Scrollback is how many bytes of output a node keeps for viewers that
	// attach later. Default 256 KiB.
	Scrollback int
	// IdleTimeout closes a TCP client after this long without traffic in
	// either direction. Default 600s (Ironic's [console]terminal_timeout).
	IdleTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnects after the
	// link to the BMC drops: it doubles from min to max. Defaults 1s, 30s.
	MinBackoff, MaxBackoff time.Duration
	// MaxViewers bounds the viewers (TCP clients included) per node.
	// Default 16.
	MaxViewers int
	// Dir keeps each console's scrollback across restarts (keep.go); ""
	// keeps it in memory only. KeepInterval is how often a console with
	// new output writes it there. Default 2s.
	Dir          string
	KeepInterval time.Duration
	Logger       *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Scrollback <= 0 {
		c.Scrollback = 256 << 10
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 600 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(30*time.Second, c.MinBackoff)
	}
	if c.MaxViewers <= 0 {
		c.MaxViewers = 16
	}
	if c.KeepInterval <= 0 {
		c.KeepInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// ErrNotRunning means the node has no console session on this conductor.
var ErrNotRunning = errors.New("console session not running")

// viewerQueue is how many output chunks a viewer may fall behind before it
// is disconnected (it can attach again and gets the scrollback).
const viewerQueue = 512

// writeChunk bounds one input message to the BMC: a huge paste is cut into
// chunks and waits for the serial link (back pressure) instead of queueing
// without bound.
const writeChunk = 256

// inputQueue is how many input chunks wait for the serial link.
const inputQueue = 16

// Manager holds the running console sessions by node UUID.
type Manager struct {
	cfg      Config
	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

// New returns a Manager with cfg's zero fields set to their defaults.
func New(cfg Config) *Manager {
	cfg.setDefaults()
	return &Manager{cfg: cfg, sessions: map[string]*session{}}
}

// Ports is a console port range, both ends included; Min == Max is one
// fixed port (the node's ipmi_terminal_port).
type Ports struct{ Min, Max int }

// Start runs uuid's console: it binds the first free port of ports on host
// ("" for every address), then opens the serial link (so a BMC that refuses
// SOL fails Start), and keeps both until Stop. It answers the port.
// Starting a running node's console is an error (fault.Conflict).
func (m *Manager) Start(ctx context.Context, uuid, host string, ports Ports, open Opener) (int, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, fault.New(fault.Conflict, "The conductor is stopping; console of node %s not started.", uuid)
	}
	if _, ok := m.sessions[uuid]; ok {
		m.mu.Unlock()
		return 0, fault.New(fault.Conflict, "The console of node %s is already running.", uuid)
	}
	// Reserve the slot while the port is bound and the BMC is asked, so two
	// starts of one node cannot race.
	s := &session{m: m, uuid: uuid, open: open, viewers: map[*viewer]struct{}{},
		input: make(chan []byte, inputQueue), ring: newRing(m.cfg.Scrollback),
		log: m.cfg.Logger.With("node", uuid, "verb", "console")}
	m.sessions[uuid] = s
	busy := map[int]bool{}
	for _, o := range m.sessions {
		busy[o.port] = true
	}
	m.mu.Unlock()
	fail := func(err error) (int, error) {
		m.mu.Lock()
		delete(m.sessions, uuid)
		m.mu.Unlock()
		return 0, err
	}

	ln, err := listen(ctx, host, ports, busy)
	if err != nil {
		return fail(err)
	}
	link, err := open(ctx)
	if err != nil {
		ln.Close()
		return fail(err)
	}
	m.mu.Lock()
	s.ln = ln
	s.port = ln.Addr().(*net.TCPAddr).Port
	s.ctx, s.cancel = context.WithCancel(context.Background())
	closing := m.closed
	if closing {
		delete(m.sessions, uuid)
	}
	m.mu.Unlock()
	s.restore()
	s.wg.Add(3)
	go s.run(link)
	go s.accept()
	go s.keep()
	if closing { // Close ran while the BMC was asked
		s.stop()
		return 0, fault.New(fault.Conflict, "The conductor is stopping; console of node %s not started.", uuid)
	}
	s.log.InfoContext(ctx, "console started", "port", s.port)
	return s.port, nil
}

// listen binds the first port of ports nobody uses, as Ironic's
// acquire_port, skipping those of running sessions.
func listen(ctx context.Context, host string, ports Ports, busy map[int]bool) (net.Listener, error) {
	if ports.Min <= 0 || ports.Max < ports.Min {
		return nil, fault.New(fault.Invalid, "Either missing 'ipmi_terminal_port' parameter in node's driver_info or the console port range (--console-port-range) is not configured")
	}
	var lc net.ListenConfig
	var lastErr error
	for p := ports.Min; p <= ports.Max; p++ {
		if busy[p] {
			continue
		}
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return ln, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = errors.New("another node's console has it")
	}
	if ports.Min == ports.Max {
		return nil, fault.Wrap(fault.Conflict, lastErr, "Console port %d is in use: %v", ports.Min, lastErr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return nil, fault.Wrap(fault.Conflict, lastErr, "Unable to allocate a free port on host %s for IPMI terminal, not enough free ports.", host)
}

// Stop ends uuid's console: the link is deactivated, the listener and every
// viewer closed (their reads end with io.EOF). It waits for the session's
// goroutines. Stopping a console that is not running does nothing.
func (m *Manager) Stop(uuid string) {
	m.mu.Lock()
	s := m.sessions[uuid]
	if s != nil && s.ln != nil {
		delete(m.sessions, uuid)
	} else {
		s = nil // not running, or still starting (Start cleans up itself)
	}
	m.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		s.forget = true // its scrollback ends with it
		s.mu.Unlock()
		s.stop()
	}
	m.discard(uuid)
}

// Close stops every console and refuses new ones; their scrollback stays
// kept (Config.Dir) for when they start again.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	var all []*session
	for uuid, s := range m.sessions {
		if s.ln != nil {
			all = append(all, s)
			delete(m.sessions, uuid)
		}
	}
	m.mu.Unlock()
	for _, s := range all {
		s.stop()
	}
}

// Port answers the console port of a running session.
func (m *Manager) Port(uuid string) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[uuid]
	if s == nil || s.ln == nil {
		return 0, false
	}
	return s.port, true
}

// Running lists the nodes whose console runs here.
func (m *Manager) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.sessions))
	for uuid, s := range m.sessions {
		if s.ln != nil {
			out = append(out, uuid)
		}
	}
	return out
}

// Connected reports whether the session's serial link to the BMC is up
// (false while it reconnects).
func (m *Manager) Connected(uuid string) bool {
	m.mu.Lock()
	s := m.sessions[uuid]
	m.mu.Unlock()
	if s == nil || s.ln == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.linked
}

// Attach joins uuid's running console as a viewer: the scrollback, then a
// stream whose reads give the output from now on and whose writes (when
// write is true) type into the console. Close detaches this viewer only.
func (m *Manager) Attach(uuid string, write bool) ([]byte, io.ReadWriteCloser, error) {
	m.mu.Lock()
	s := m.sessions[uuid]
	m.mu.Unlock()
	if s == nil || s.ln == nil {
		return nil, nil, ErrNotRunning
	}
	return s.attach(write)
}

// session is one node's running console.
type session struct {
	m      *Manager
	uuid   string
	log    *slog.Logger
	open   Opener
	ln     net.Listener
	port   int
	ctx    context.Context
	cancel context.CancelFunc
	input  chan []byte
	wg     sync.WaitGroup

	mu      sync.Mutex
	ring    *ring
	viewers map[*viewer]struct{}
	stopped bool
	linked  bool
	// dirty: output since the scrollback was last kept; forget: the
	// console was disabled, its scrollback is not kept (keep.go).
	dirty, forget bool
}

func (s *session) stop() {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	s.stopped = true
	for v := range s.viewers {
		delete(s.viewers, v)
		v.end()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.log.Info("console stopped", "port", s.port)
}

// run keeps the serial link up: when it drops (BMC gone, power cut, SOL
// deactivated by someone else), it reopens it with bounded exponential
// backoff, until Stop. Viewers stay attached meanwhile.
func (s *session) run(link driver.SerialLink) {
	defer s.wg.Done()
	cfg := &s.m.cfg
	backoff := cfg.MinBackoff
	for {
		started := time.Now()
		err := s.runLink(link)
		if cerr := link.Close(s.ctx); cerr != nil && s.ctx.Err() == nil {
			s.log.Debug("console link close", "err", cerr)
		}
		if s.ctx.Err() != nil {
			return
		}
		if time.Since(started) > cfg.MaxBackoff {
			backoff = cfg.MinBackoff // it ran a while: not a flapping BMC
		}
		s.log.Warn("console link to the BMC dropped; reconnecting", "err", err, "retry_in", backoff)
		for {
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, cfg.MaxBackoff)
			link, err = s.open(s.ctx)
			if err == nil {
				s.log.Info("console link to the BMC restored")
				break
			}
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("console link to the BMC: reconnect failed", "err", err, "retry_in", backoff)
		}
	}
}

// runLink streams one link: viewers' input goes through a pipe the link
// reads (closed at the end, so the link's reader ends too).
func (s *session) runLink(link driver.SerialLink) error {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	pr, pw := io.Pipe()
	pumped := make(chan struct{})
	go func() { // owned here: ends with ctx or the pipe
		defer close(pumped)
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-s.input:
				if _, err := pw.Write(b); err != nil {
					return
				}
			}
		}
	}()
	s.setLinked(true)
	err := link.Run(ctx, pr, output{s})
	s.setLinked(false)
	cancel()
	pr.Close()
	<-pumped
	pw.Close()
	if err == nil && s.ctx.Err() == nil {
		err = errors.New("serial link ended")
	}
	return err
}

func (s *session) setLinked(v bool) {
	s.mu.Lock()
	s.linked = v
	s.mu.Unlock()
}

// output is what the node prints: kept in the scrollback and fanned out.
type output struct{ s *session }

func (o output) Write(p []byte) (int, error) {
	s := o.s
	chunk := append([]byte(nil), p...) // viewers share it read-only
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring.write(chunk)
	s.dirty = true
	for v := range s.viewers {
		select {
		case v.ch <- chunk:
		default:
			// A viewer that does not keep up is dropped rather than
			// holding the console back or buffering without bound.
			delete(s.viewers, v)
			v.end()
			s.log.Warn("console viewer too slow, disconnected")
		}
	}
	return len(p), nil
}

func (s *session) attach(write bool) ([]byte, io.ReadWriteCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, nil, ErrNotRunning
	}
	if len(s.viewers) >= s.m.cfg.MaxViewers {
		return nil, nil, fault.New(fault.Conflict, "The console of node %s already has %d viewers.", s.uuid, s.m.cfg.MaxViewers)
	}
	v := &viewer{s: s, write: write, ch: make(chan []byte, viewerQueue),
		gone: make(chan struct{}), closed: make(chan struct{})}
	s.viewers[v] = struct{}{}
	return s.ring.bytes(), v, nil
}

func (s *session) detach(v *viewer) {
	s.mu.Lock()
	delete(s.viewers, v)
	s.mu.Unlock()
}

// viewer is one attached reader (and maybe writer) of a console.
type viewer struct {
	s       *session
	write   bool
	ch      chan []byte
	pending []byte
	rmu     sync.Mutex

	endOnce   sync.Once
	gone      chan struct{} // closed by the session: console stopped or viewer dropped
	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

func (v *viewer) end() { v.endOnce.Do(func() { close(v.gone) }) }

// Read gives the console's output; io.EOF once the console stops (or this
// viewer was dropped for falling behind).
func (v *viewer) Read(p []byte) (int, error) {
	v.rmu.Lock()
	defer v.rmu.Unlock()
	for len(v.pending) == 0 {
		select {
		case b := <-v.ch:
			v.pending = b
		case <-v.gone:
			return 0, io.EOF
		case <-v.closed:
			return 0, io.ErrClosedPipe
		}
	}
	n := copy(p, v.pending)
	v.pending = v.pending[n:]
	return n, nil
}

// Write types p into the console, in bounded chunks that wait for the
// serial link; a read-only viewer gets fault.Forbidden.
func (v *viewer) Write(p []byte) (int, error) {
	if !v.write {
		return 0, fault.New(fault.Forbidden, "This console viewer of node %s is read-only.", v.s.uuid)
	}
	n := 0
	for len(p) > 0 {
		c := p[:min(len(p), writeChunk)]
		select {
		case v.s.input <- append([]byte(nil), c...):
		case <-v.gone:
			return n, io.ErrClosedPipe
		case <-v.closed:
			return n, io.ErrClosedPipe
		}
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// Close detaches this viewer; the console keeps running.
func (v *viewer) Close() error {
	v.closeOnce.Do(func() { close(v.closed) })
	v.s.detach(v)
	return nil
}

// accept serves the console port: each TCP client is a writing viewer.
func (s *session) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("console port accept failed", "err", err)
			}
			return
		}
		s.wg.Add(1)
		go s.serveTCP(c)
	}
}

// serveTCP copies the console to a TCP client and the client's bytes into
// the console, with the scrollback first, until either side ends or
// nothing moved for IdleTimeout.
func (s *session) serveTCP(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	log := s.log.With("client", c.RemoteAddr().String())
	sb, stream, err := s.attach(true)
	if err != nil {
		fmt.Fprintf(c, "castiron: %v\r\n", err)
		log.Warn("console client refused", "err", err)
		return
	}
	defer stream.Close()
	log.Info("console client connected")
	idle := s.m.cfg.IdleTimeout
	touch := func() { _ = c.SetReadDeadline(time.Now().Add(idle)) }
	touch()
	in := make(chan struct{})
	go func() { // client -> console; owned: ends when c is closed
		defer close(in)
		defer stream.Close() // ends the other direction
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				touch()
				if _, werr := stream.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					log.Info("console client idle, disconnected", "idle_timeout", idle)
				}
				return
			}
		}
	}()
	write := func(b []byte) bool {
		_ = c.SetWriteDeadline(time.Now().Add(idle))
		if _, err := c.Write(b); err != nil {
			return false
		}
		touch()
		return true
	}
	if len(sb) == 0 || write(sb) {
		buf := make([]byte, 4096)
		for {
			n, err := stream.Read(buf)
			if err != nil || !write(buf[:n]) {
				break
			}
		}
	}
	c.Close()
	<-in
	log.Info("console client disconnected")
}
