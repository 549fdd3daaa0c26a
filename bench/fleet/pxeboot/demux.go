package pxeboot

import (
	"errors"
	"net"
	"slices"
	"sync"
	"time"
)

// demux hands the DHCP replies read from the one raw socket to the
// machine whose chaddr they carry (nclient4's client reads only its own).
type demux struct {
	raw  net.PacketConn
	stop <-chan struct{} // closed when the raw socket is
	mu   sync.Mutex
	subs map[string]*subConn
}

func newDemux(raw net.PacketConn, stop <-chan struct{}) *demux {
	return &demux{raw: raw, stop: stop, subs: map[string]*subConn{}}
}

func (d *demux) loop() {
	buf := make([]byte, 1500)
	for {
		n, addr, err := d.raw.ReadFrom(buf)
		if err != nil {
			// The raw conn's error for its closed socket is not
			// net.ErrClosed: the client's stop says it is closing.
			select {
			case <-d.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // no spinning on a lasting error
			continue
		}
		// BOOTP: hlen at byte 2, chaddr from byte 28.
		if n < 240 || buf[2] == 0 || buf[2] > 16 {
			continue
		}
		key := string(buf[28 : 28+int(buf[2])])
		d.mu.Lock()
		s := d.subs[key]
		d.mu.Unlock()
		if s == nil {
			continue
		}
		select {
		case s.in <- datagram{b: slices.Clone(buf[:n]), from: addr}:
		default: // the client is not reading: a lost datagram, it retries
		}
	}
}

// sub registers a conn for mac's replies (one DORA at a time per MAC).
func (d *demux) sub(mac net.HardwareAddr) *subConn {
	s := &subConn{d: d, key: string(mac), in: make(chan datagram, 8), done: make(chan struct{})}
	d.mu.Lock()
	d.subs[s.key] = s
	d.mu.Unlock()
	return s
}

type datagram struct {
	b    []byte
	from net.Addr
}

// subConn is one machine's view of the shared socket (net.PacketConn for
// nclient4): it reads the replies to its chaddr, writes through the raw
// socket.
type subConn struct {
	d    *demux
	key  string
	in   chan datagram
	once sync.Once
	done chan struct{}
}

func (s *subConn) ReadFrom(p []byte) (int, net.Addr, error) {
	select {
	case g := <-s.in:
		return copy(p, g.b), g.from, nil
	case <-s.done:
		return 0, nil, net.ErrClosed
	}
}

func (s *subConn) WriteTo(p []byte, addr net.Addr) (int, error) { return s.d.raw.WriteTo(p, addr) }

func (s *subConn) Close() error {
	s.once.Do(func() {
		s.d.mu.Lock()
		if s.d.subs[s.key] == s {
			delete(s.d.subs, s.key)
		}
		s.d.mu.Unlock()
		close(s.done)
	})
	return nil
}

func (s *subConn) LocalAddr() net.Addr              { return s.d.raw.LocalAddr() }
func (s *subConn) SetDeadline(time.Time) error      { return nil }
func (s *subConn) SetReadDeadline(time.Time) error  { return nil }
func (s *subConn) SetWriteDeadline(time.Time) error { return nil }
