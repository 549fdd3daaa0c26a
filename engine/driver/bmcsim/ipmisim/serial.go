package ipmisim

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/bougou/go-ipmi/pkg/hal"
)

// serialBuffer bounds what waits in either direction of a SerialPort.
const serialBuffer = 64 << 10

// SerialPort is a simulated machine's serial port (Config.Serial), reached
// over IPMI Serial-over-LAN through go-ipmi's SOL data plane: what the
// machine prints (Write) goes to the remote console while a SOL payload is
// active, and is lost otherwise, as on a UART nobody listens to; what the
// remote console types is what the machine reads (Read). Both directions
// hold at most 64 KiB; Write never blocks (the oldest output goes first).
type SerialPort struct {
	mu       sync.Mutex
	cond     *sync.Cond
	out, in  []byte
	attached bool
	closed   bool
}

func newSerialPort() *SerialPort {
	p := &SerialPort{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Write is the machine printing.
func (p *SerialPort) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, io.ErrClosedPipe
	}
	if p.attached {
		p.out = appendBounded(p.out, b)
	}
	return len(b), nil
}

// Read is the machine reading what the remote console typed; it blocks
// until there is some, or the BMC closes (io.EOF).
func (p *SerialPort) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.in) == 0 && !p.closed {
		p.cond.Wait()
	}
	if len(p.in) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.in)
	p.in = p.in[n:]
	return n, nil
}

// Attached reports whether a SOL payload is active on the port.
func (p *SerialPort) Attached() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attached
}

func (p *SerialPort) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
}

func appendBounded(buf, b []byte) []byte {
	buf = append(buf, b...)
	if over := len(buf) - serialBuffer; over > 0 {
		buf = append(buf[:0], buf[over:]...)
	}
	return buf
}

var errSerialBusy = errors.New("ipmisim: serial port already attached to a SOL payload")

// Open is go-ipmi's hal.ConsoleHAL: Activate Payload (SOL) attaches.
func (p *SerialPort) Open(context.Context) (hal.ConsoleConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, io.ErrClosedPipe
	}
	if p.attached {
		return nil, errSerialBusy
	}
	p.attached = true
	return &serialConn{p: p}, nil
}

// serialConn is the BMC's end of the port while a payload is active.
type serialConn struct {
	p    *SerialPort
	once sync.Once
}

// Write is the remote console typing.
func (c *serialConn) Write(b []byte) (int, error) {
	p := c.p
	p.mu.Lock()
	p.in = appendBounded(p.in, b)
	p.mu.Unlock()
	p.cond.Broadcast()
	return len(b), nil
}

// ReadAvailable drains the machine's pending output without blocking.
func (c *serialConn) ReadAvailable(b []byte) (int, error) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

func (c *serialConn) SendBreak(context.Context) error { return hal.ErrNotSupported }

// Close detaches the payload; output printed from now on is lost.
func (c *serialConn) Close() error {
	c.once.Do(func() {
		p := c.p
		p.mu.Lock()
		p.attached = false
		p.out = nil
		p.mu.Unlock()
	})
	return nil
}
