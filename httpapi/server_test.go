package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"castiron/storage"
)

// TestTooLargeBodyLingers is Python's http.client against a 20 MB POST: it
// writes the whole body before it reads, and must then read Ironic-style
// 413, not a broken pipe or a reset.
func TestTooLargeBodyLingers(t *testing.T) {
	h := newAPI(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	const size = 20 << 20
	head := fmt.Sprintf("POST /v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-OpenStack-Ironic-API-Version: latest\r\n\r\n", size)
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	body := append([]byte(`{"driver": "fake-hardware", "extra": {"blob": "`), bytes.Repeat([]byte("x"), size)...)
	if _, err := conn.Write(body[:size]); err != nil {
		t.Fatalf("writing the body before reading: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", res.StatusCode)
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	if !strings.Contains(b.String(), "Request body is larger than") {
		t.Errorf("body %s", b.String())
	}
}

// TestNodeLockedIsRetried: a request that finds its node locked by a short
// task waits for it, as Ironic's conductor retries taking the lock; a lock
// held longer than the retries is the 409.
func TestNodeLockedIsRetried(t *testing.T) {
	h := newAPI(t, func(o *Options) { o.LockRetry = 100 * time.Millisecond })
	id := h.createNode(map[string]any{})["uuid"].(string)
	holder := "other-host"
	h.db(id, func(n *storage.Node) { n.Reservation = &holder })
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(50 * time.Millisecond)
		h.db(id, func(n *storage.Node) { n.Reservation = nil })
	}()
	patch := []any{map[string]any{"op": "add", "path": "/extra/a", "value": "b"}}
	if got := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, patch).json(t); got["extra"].(map[string]any)["a"] != "b" {
		t.Errorf("patched after the lock went: %v", got["extra"])
	}
	<-released
	h.db(id, func(n *storage.Node) { n.Reservation = &holder })
	h.expect(http.StatusConflict, "PATCH", "/v1/nodes/"+id, latest, patch)
}
