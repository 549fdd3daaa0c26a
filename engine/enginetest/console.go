package enginetest

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine/console"
)

// FreePortRange is a range of two ports nothing listens on now, for
// engine.Config.ConsolePorts.
func FreePortRange(t testing.TB) console.Ports {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if p >= 65535 {
			continue
		}
		if ln2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1))); err == nil {
			ln2.Close()
			return console.Ports{Min: p, Max: p + 1}
		}
	}
	t.Fatal("no two free consecutive ports")
	return console.Ports{}
}

// ReadFor reads r until want appears (15s at most) and returns what was
// read; bytes after want in the same read are returned too (not kept).
func ReadFor(t testing.TB, r io.Reader, want string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() { // ends with want, or with r (the test closes it)
		var b bytes.Buffer
		buf := make([]byte, 512)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if strings.Contains(b.String(), want) || err != nil {
				got <- b.String()
				return
			}
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, want) {
			t.Fatalf("stream ended without %q: %q", want, s)
		}
		return s
	case <-time.After(15 * time.Second):
		t.Fatalf("no %q in 15s", want)
	}
	return ""
}
