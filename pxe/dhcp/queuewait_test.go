package dhcp

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReceivedAt: a socket with SO_TIMESTAMPNS (as listen sets it) gives
// each packet the kernel's receive time, which receivedAt reads; no control
// message gives the zero time.
func TestReceivedAt(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	if err != nil {
		t.Fatal(err)
	}
	cli, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// The kernel turns receive timestamps on asynchronously after the
	// first socket asks: until then a packet is stamped when it is read.
	// Retry until one is stamped on arrival.
	buf, oob := make([]byte, 16), make([]byte, oobSpace)
	for try := 0; ; try++ {
		before := time.Now()
		if _, err := cli.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		after := time.Now()               // loopback delivers within the write
		time.Sleep(50 * time.Millisecond) // the packet waits in the queue
		_, oobn, _, _, err := srv.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		at := receivedAt(oob[:oobn])
		if at.IsZero() {
			t.Fatal("no receive time")
		}
		if !at.Before(before.Add(-time.Millisecond)) && !at.After(after.Add(time.Millisecond)) {
			if waited := time.Since(at); waited < 50*time.Millisecond {
				t.Fatalf("queue wait %v, want ≥ 50ms", waited)
			}
			break
		}
		if try == 40 {
			t.Fatalf("received at %v, sent between %v and %v", at, before, after)
		}
	}
	if !receivedAt(nil).IsZero() || !receivedAt([]byte{1, 2, 3}).IsZero() {
		t.Fatal("no control message gave a time")
	}
}
