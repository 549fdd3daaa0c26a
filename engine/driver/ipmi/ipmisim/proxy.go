package ipmisim

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a UDP relay in front of a real ipmi_sim that makes it faulty the
// way castiron's own simulator (engine/driver/bmcsim/ipmisim) can be: dead,
// slow, lossy, or vanishing after n answers. ipmi_sim itself has no such
// knobs, and a relay keeps the BMC's own protocol code untouched: what the
// driver meets is OpenIPMI's lanplus, with the network failing under it.
// Hand-written because no maintained Go library does fault injection for
// UDP; it is ~100 lines of test support, never in the binary.
type Proxy struct {
	Port int

	target  *net.UDPAddr
	front   *net.UDPConn
	mu      sync.Mutex
	clients map[string]*net.UDPConn // client address -> its own upstream socket

	dead     atomic.Bool
	dieAfter atomic.Int64 // n+1 answers still relayed before dying; 0: off
	drop     atomic.Uint64
	slow     atomic.Int64

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// StartProxy relays 127.0.0.1:<Proxy.Port> to the simulator on simPort
// until ctx ends or Close.
func StartProxy(ctx context.Context, simPort int) (*Proxy, error) {
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Proxy{Port: front.LocalAddr().(*net.UDPAddr).Port, front: front, cancel: cancel,
		target:  &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: simPort},
		clients: map[string]*net.UDPConn{}}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); <-ctx.Done(); front.Close(); p.closeClients() }()
	go func() { defer p.wg.Done(); p.relayRequests(ctx) }()
	return p, nil
}

// SetDead drops every packet both ways (true) or relays again (false).
func (p *Proxy) SetDead(dead bool) { p.dieAfter.Store(0); p.dead.Store(dead) }

// DieAfter relays n more answers, then drops everything until SetDead(false).
func (p *Proxy) DieAfter(n int) { p.dieAfter.Store(int64(n) + 1) }

// SetDropRate is the probability (0-1) that a request is lost.
func (p *Proxy) SetDropRate(r float64) { p.drop.Store(math.Float64bits(min(max(r, 0), 1))) }

// SetSlow delays every answer by d (0: none).
func (p *Proxy) SetSlow(d time.Duration) { p.slow.Store(int64(d)) }

// Close stops the relay and waits for its goroutines.
func (p *Proxy) Close() { p.cancel(); p.wg.Wait() }

func (p *Proxy) closeClients() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.Close()
	}
}

func (p *Proxy) relayRequests(ctx context.Context) {
	buf := make([]byte, 2048)
	for {
		n, from, err := p.front.ReadFromUDP(buf)
		if err != nil {
			return // closed by the owner goroutine
		}
		if p.dead.Load() || rand.Float64() < math.Float64frombits(p.drop.Load()) {
			continue
		}
		up, err := p.upstream(ctx, from)
		if err != nil {
			return
		}
		_, _ = up.Write(buf[:n])
	}
}

// upstream is the client's own socket to the simulator, so that ipmi_sim
// sees one peer per client as without the relay.
func (p *Proxy) upstream(ctx context.Context, from *net.UDPAddr) (*net.UDPConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[from.String()]; ok {
		return c, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	c, err := net.DialUDP("udp", nil, p.target)
	if err != nil {
		return nil, err
	}
	p.clients[from.String()] = c
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.relayAnswers(c, from) }()
	return c, nil
}

func (p *Proxy) relayAnswers(up *net.UDPConn, client *net.UDPAddr) {
	buf := make([]byte, 2048)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return // closed by closeClients
		}
		if left := p.dieAfter.Load(); left > 0 {
			if left == 1 {
				p.dead.Store(true)
				p.dieAfter.Store(0)
			} else {
				p.dieAfter.Add(-1)
			}
		}
		if p.dead.Load() {
			continue
		}
		if d := time.Duration(p.slow.Load()); d > 0 {
			time.Sleep(d) // the relay of this client only; others go on
		}
		_, _ = p.front.WriteToUDP(buf[:n], client)
	}
}
