package scaleout

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/storage/pgtest"
	"castiron/tests/crashtest"
)

// TestConsoleRelayed: two conductors on one PostgreSQL database, an IPMI
// node whose BMC (castiron's simulator, in this process) has a serial port
// over Serial-over-LAN. Its console runs on the node's owner; the web
// UI's console WebSocket opened on the OTHER conductor's API reaches it
// all the same (relayed, the handshake answered by the owner): what the
// machine prints arrives, what the viewer types reaches the machine. A
// plain GET of the stream on the other conductor answers what the owner
// answers.
func TestConsoleRelayed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs PostgreSQL and two conductors")
	}
	pg := pgtest.New(t)
	db := pg.Database(t)
	tmp := t.TempDir()
	bin := crashtest.Build(t, tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fleet, err := ipmisim.Start(ctx, ipmisim.Config{N: 1, Serial: true, PoweredOn: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	bmc := fleet.BMCs[0]

	srv := map[string]*crashtest.Server{}
	for i, name := range []string{"c1", "c2"} {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		lo := 47100 + 100*i
		srv[name] = crashtest.Start(t, bin, dir, tmp, "--database", db, "--conductor-name", name,
			"--console-port-range", fmt.Sprintf("%d:%d", lo, lo+99))
	}
	// Both conductors on both rings before the node is placed.
	time.Sleep(2500 * time.Millisecond)

	out := srv["c1"].Must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
		"name": "console-relay", "driver": "ipmi", "console_interface": "ipmitool-socat",
		"driver_info": map[string]any{"ipmi_address": bmc.Host(), "ipmi_port": bmc.Port(),
			"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword},
	})
	id := crashtest.Str(out["uuid"])
	srv["c2"].Must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/console", map[string]any{"enabled": true})
	n := srv["c1"].WaitNode(id, 30*time.Second, "console enabled", func(n map[string]any) bool { return n["console_enabled"] == true })
	owner := crashtest.Str(n["conductor"])
	other := map[string]string{"c1": "c2", "c2": "c1"}[owner]
	if other == "" {
		t.Fatalf("node's conductor %q is neither c1 nor c2", owner)
	}
	t.Logf("console of %s runs on %s; viewing through %s", id, owner, other)

	wsURL := "ws" + strings.TrimPrefix(srv[other].Base, "http") + "/v1/nodes/" + id + "/states/console/stream"
	var c *websocket.Conn
	var res *http.Response
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The owner starts the session right after enabling; until the
		// SOL payload is up a handshake meets 409.
		c, res, err = websocket.Dial(ctx, wsURL, nil)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", wsURL, err, res)
	}
	defer c.CloseNow()
	if got := res.Header.Get("X-Castiron-Forwarded-By"); got != owner {
		t.Errorf("handshake answered by %q, want the owner %q", got, owner)
	}
	typ, hello, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText || !bytes.Contains(hello, []byte(id)) {
		t.Fatalf("hello: %v %v %q", typ, err, hello)
	}

	// The machine prints; the viewer on the other conductor sees it.
	want := []byte("relayed-boot-line-" + id[:8])
	printer := time.NewTicker(500 * time.Millisecond)
	defer printer.Stop()
	go func() {
		for range printer.C {
			if _, err := bmc.Serial().Write(append(want, '\n')); err != nil {
				return
			}
		}
	}()
	var seen []byte
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	for !bytes.Contains(seen, want) {
		_, b, err := c.Read(rctx)
		if err != nil {
			rcancel()
			t.Fatalf("reading the console through %s: %v (got %q)", other, err, seen)
		}
		seen = append(seen, b...)
	}
	rcancel()
	printer.Stop()

	// The viewer types; the machine reads it.
	typed := []byte("typed-through-" + other)
	if err := c.Write(ctx, websocket.MessageBinary, typed); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		var acc []byte
		buf := make([]byte, 256)
		for !bytes.Contains(acc, typed) {
			k, err := bmc.Serial().Read(buf)
			if err != nil {
				break
			}
			acc = append(acc, buf[:k]...)
		}
		got <- acc
	}()
	select {
	case b := <-got:
		if !bytes.Contains(b, typed) {
			t.Fatalf("the machine read %q, want %q", b, typed)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("what was typed on the relayed console never reached the machine")
	}
	c.Close(websocket.StatusNormalClosure, "")

	// A plain GET on the other conductor answers as the owner does (400:
	// a WebSocket endpoint), not "not running here".
	code, body, _ := srv[other].Do("GET", "/v1/nodes/"+id+"/states/console/stream", nil)
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "WebSocket") {
		t.Errorf("plain GET through %s: %d %v", other, code, body)
	}

	// Disable: the session ends for the relayed viewer too.
	c2, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	if _, _, err := c2.Read(ctx); err != nil {
		t.Fatal(err)
	}
	srv[other].Must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/console", map[string]any{"enabled": false})
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	for {
		if _, _, err := c2.Read(cctx); err != nil {
			if s := websocket.CloseStatus(err); s != websocket.StatusNormalClosure {
				t.Errorf("relayed viewer after disable: %v (status %d), want a normal close", err, s)
			}
			break
		}
	}
}
