package tftp

// Transfers driven by raw TFTP packets, for what pin/tftp's client cannot
// send (firmware quirks, abandoned transfers).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/pxe/boot"
)

// TestEDK2TwoTransfers replays what OVMF's PXE client sends (lab NOTES
// gotcha 9): an RRQ with tsize+blksize+windowsize whose OACK it abandons
// with an ERROR, then the real download without tsize.
func TestEDK2TwoTransfers(t *testing.T) {
	dir, files := testFiles(t)
	addr, rec := startServer(t, Config{Dir: dir})
	want := files["snponly.efi"]

	// 1: size query.
	conn := udpConn(t)
	server := mustResolve(t, addr)
	sendRRQ(t, conn, server, "snponly.efi", "tsize", "0", "blksize", "1468", "windowsize", "4")
	opts, tid := readOACK(t, conn)
	if opts["tsize"] != strconv.Itoa(len(want)) || opts["blksize"] != "1468" || len(opts) != 2 {
		t.Fatalf("OACK %v, want tsize=%d blksize=1468 and no windowsize", opts, len(want))
	}
	// EDK2 ends the query with an ERROR to the transfer port.
	errPkt := append([]byte{0, 5, 0, 8}, append([]byte("User aborted the transfer"), 0)...)
	if _, err := conn.WriteToUDP(errPkt, tid); err != nil {
		t.Fatal(err)
	}

	// 2: the download, lock-step since windowsize was not acknowledged.
	conn2 := udpConn(t)
	sendRRQ(t, conn2, server, "snponly.efi", "blksize", "1468", "windowsize", "4")
	opts, tid = readOACK(t, conn2)
	if opts["blksize"] != "1468" || len(opts) != 1 {
		t.Fatalf("OACK %v, want only blksize=1468", opts)
	}
	got := receiveBlocks(t, conn2, tid, 1468)
	if !bytes.Equal(got, want) {
		t.Fatalf("downloaded %d bytes, want %d identical", len(got), len(want))
	}

	rec.waitFor(t, 2*time.Second, func(ev boot.Event) bool {
		return ev.Kind == boot.TFTPServed && strings.Contains(ev.Detail, "bytes=0") && strings.Contains(ev.Detail, "incomplete")
	})
	rec.waitFor(t, 2*time.Second, func(ev boot.Event) bool {
		return ev.Kind == boot.TFTPServed && strings.HasPrefix(ev.Detail, fmt.Sprintf("file=snponly.efi bytes=%d duration=", len(want))) && !strings.Contains(ev.Detail, "incomplete")
	})
}

// TestAbandonedTransferEnds: a client that never answers the OACK must not
// hold the transfer for pin/tftp's default ~30 s.
func TestAbandonedTransferEnds(t *testing.T) {
	dir, _ := testFiles(t)
	addr, rec := startServer(t, Config{Dir: dir, Timeout: 100 * time.Millisecond, Retries: 2})
	conn := udpConn(t)
	start := time.Now()
	sendRRQ(t, conn, mustResolve(t, addr), "undionly.kpxe", "tsize", "0", "blksize", "1468")
	readOACK(t, conn)
	ev := rec.waitFor(t, 5*time.Second, func(ev boot.Event) bool {
		return ev.Kind == boot.TFTPServed && strings.Contains(ev.Detail, "incomplete")
	})
	t.Logf("abandoned transfer given up after %s: %s", time.Since(start), ev.Detail)
}

// --- raw TFTP packets, for what pin/tftp's client cannot send ---

func udpConn(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustResolve(t *testing.T, addr string) *net.UDPAddr {
	a, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sendRRQ(t *testing.T, c *net.UDPConn, to *net.UDPAddr, name string, opts ...string) {
	t.Helper()
	pkt := []byte{0, 1}
	for _, s := range append([]string{name, "octet"}, opts...) {
		pkt = append(append(pkt, s...), 0)
	}
	if _, err := c.WriteToUDP(pkt, to); err != nil {
		t.Fatal(err)
	}
}

func readOACK(t *testing.T, c *net.UDPConn) (map[string]string, *net.UDPAddr) {
	t.Helper()
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 || binary.BigEndian.Uint16(buf) != 6 {
		t.Fatalf("want OACK, got % x", buf[:min(n, 32)])
	}
	fields := strings.Split(strings.TrimSuffix(string(buf[2:n]), "\x00"), "\x00")
	opts := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		opts[strings.ToLower(fields[i])] = fields[i+1]
	}
	return opts, from
}

// receiveBlocks ACKs the OACK (block 0) and every DATA block.
func receiveBlocks(t *testing.T, c *net.UDPConn, tid *net.UDPAddr, blksize int) []byte {
	t.Helper()
	ack := func(block uint16) {
		if _, err := c.WriteToUDP([]byte{0, 4, byte(block >> 8), byte(block)}, tid); err != nil {
			t.Fatal(err)
		}
	}
	ack(0)
	var out []byte
	buf := make([]byte, 65536)
	next := uint16(1)
	for {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, _, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n < 4 || binary.BigEndian.Uint16(buf) != 3 {
			t.Fatalf("want DATA, got % x", buf[:min(n, 32)])
		}
		block := binary.BigEndian.Uint16(buf[2:])
		if block != next {
			ack(block) // duplicate after a retransmit
			continue
		}
		out = append(out, buf[4:n]...)
		ack(block)
		next++
		if n-4 < blksize {
			return out
		}
	}
}
