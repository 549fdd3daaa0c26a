package rack

import (
	"bytes"
	"io"
	"testing"
)

// TestConsolePorts: an attached port reads what is printed from then on
// (the scrollback keeps the earlier output), input is taken, and Close
// ends a blocked Read with EOF.
func TestConsolePorts(t *testing.T) {
	c := &Console{}
	c.Write([]byte("POST ok\r\n"))
	p := c.Attach()
	c.Write([]byte("iPXE 1.21\r\n"))
	buf := make([]byte, 64)
	n, err := p.Read(buf)
	if err != nil || string(buf[:n]) != "iPXE 1.21\r\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if n, err := p.Write([]byte("root\r")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if got := c.Scrollback(); !bytes.Equal(got, []byte("POST ok\r\niPXE 1.21\r\n")) {
		t.Errorf("scrollback %q", got)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Read(buf); done <- err }()
	p.Close()
	if err := <-done; err != io.EOF {
		t.Errorf("read after close: %v, want EOF", err)
	}
	c.Write(bytes.Repeat([]byte("x"), 2*scrollback))
	if len(c.Scrollback()) != scrollback {
		t.Errorf("scrollback grew to %d bytes", len(c.Scrollback()))
	}
}
