package rack

import (
	"io"
	"sync"
)

// scrollback is how much of what a machine printed its console keeps.
const scrollback = 64 << 10

// Console is a machine's serial port, seen from outside: what the firmware,
// the boot loader, the ramdisk agent and the OS print goes to Write, is kept
// (the last 64 KiB) and copied to every attached port. A BMC's Serial over
// LAN (ipmisim, once it has SOL) attaches with Attach and gets an
// io.ReadWriteCloser: it reads the machine's output from that moment on
// and what it writes is the machine's keyboard input (read by nothing yet:
// the simulated machine only prints).
type Console struct {
	mu    sync.Mutex
	buf   []byte
	ports map[*port]struct{}
	input []byte
	// wire is the BMC's end of the serial line (ipmisim's SOL port), nil
	// for a Redfish machine; it never blocks.
	wire io.Writer
}

// Write prints to the console; it never blocks on a slow reader (a port
// that cannot keep up loses output, as a serial line without flow control).
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	if len(c.buf) > scrollback {
		c.buf = append(c.buf[:0:0], c.buf[len(c.buf)-scrollback:]...)
	}
	for pt := range c.ports {
		pt.push(p)
	}
	if c.wire != nil {
		_, _ = c.wire.Write(p)
	}
	return len(p), nil
}

// Scrollback returns what the console kept.
func (c *Console) Scrollback() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

// Attach opens a port on the serial line.
func (c *Console) Attach() io.ReadWriteCloser {
	pt := &port{c: c, ready: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.ports == nil {
		c.ports = map[*port]struct{}{}
	}
	c.ports[pt] = struct{}{}
	c.mu.Unlock()
	return pt
}

// port is one attachment: a bounded queue of output.
type port struct {
	c      *Console
	mu     sync.Mutex
	out    []byte
	closed bool
	ready  chan struct{}
}

func (p *port) push(b []byte) {
	p.mu.Lock()
	if len(p.out)+len(b) <= scrollback {
		p.out = append(p.out, b...)
	}
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// Read returns the machine's output; io.EOF once closed.
func (p *port) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		if len(p.out) > 0 {
			n := copy(b, p.out)
			p.out = p.out[n:]
			p.mu.Unlock()
			return n, nil
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		<-p.ready
	}
}

// Write is keyboard input to the machine.
func (p *port) Write(b []byte) (int, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if len(p.c.input)+len(b) <= 4096 {
		p.c.input = append(p.c.input, b...)
	}
	return len(b), nil
}

// Close detaches the port; a blocked Read returns io.EOF.
func (p *port) Close() error {
	p.c.mu.Lock()
	delete(p.c.ports, p)
	p.c.mu.Unlock()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
	return nil
}
