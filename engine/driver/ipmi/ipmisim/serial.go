package ipmisim

import (
	"net"
	"testing"
	"time"
)

// SerialPort is the node's side of a serial line for ipmi_sim's SOL device
// (StartSimSOL(t, p.Addr())): a TCP listener ipmi_sim connects to when a
// SOL payload is activated. Accept hands out each connection.
type SerialPort struct {
	ln  net.Listener
	got chan net.Conn
}

// NewSerialPort listens on 127.0.0.1; everything closes when the test ends.
func NewSerialPort(t testing.TB) *SerialPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SerialPort{ln: ln, got: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.got <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for {
			select {
			case c := <-p.got:
				c.Close()
			default:
				return
			}
		}
	})
	return p
}

// Addr is host:port for StartSimSOL.
func (p *SerialPort) Addr() string { return p.ln.Addr().String() }

// Accept waits up to 10s for ipmi_sim's next connection.
func (p *SerialPort) Accept(t testing.TB) net.Conn {
	t.Helper()
	select {
	case c := <-p.got:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("ipmi_sim never connected to the serial port")
		return nil
	}
}
