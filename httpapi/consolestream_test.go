package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"castiron/httpapi/consoletest"
)

// consoleClient is one WebSocket viewer of a node's console.
type consoleClient struct {
	t     *testing.T
	c     *websocket.Conn
	hello consoleHello
}

func wsURL(h *apiHarness, node string) string {
	return "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/v1/nodes/" + node + "/states/console/stream"
}

// dialConsole opens the stream as user ("" = no credentials); it returns
// the handshake's HTTP status and body when the upgrade is refused.
func dialConsole(t *testing.T, h *apiHarness, node, user string, hdr http.Header) (*consoleClient, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if hdr == nil {
		hdr = http.Header{}
	}
	if user != "" {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, "pw-"+user)
		hdr.Set("Authorization", req.Header.Get("Authorization"))
	}
	c, res, err := websocket.Dial(ctx, wsURL(h, node), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if res == nil {
			t.Fatalf("dial: %v", err)
		}
		b, _ := io.ReadAll(res.Body)
		return nil, res.StatusCode, string(b)
	}
	cc := &consoleClient{t: t, c: c}
	typ, js, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("first message: %v %v %q", typ, err, js)
	}
	if err := json.Unmarshal(js, &cc.hello); err != nil {
		t.Fatalf("hello %q: %v", js, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return cc, http.StatusSwitchingProtocols, ""
}

// readUntil reads binary output until it holds want; it returns all read.
func (cc *consoleClient) readUntil(want string) string {
	cc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got bytes.Buffer
	for !strings.Contains(got.String(), want) {
		typ, b, err := cc.c.Read(ctx)
		if err != nil {
			cc.t.Fatalf("waiting for %q, got %q: %v", want, got.String(), err)
		}
		if typ != websocket.MessageBinary {
			cc.t.Fatalf("output in a %v message: %q", typ, b)
		}
		got.Write(b)
	}
	return got.String()
}

// closed reads until the server closes the socket and returns its status.
func (cc *consoleClient) closed() (websocket.StatusCode, string) {
	cc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := cc.c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			cc.t.Fatalf("socket ended without a close frame: %v", err)
		}
		return ce.Code, ce.Reason
	}
}

func (cc *consoleClient) send(b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cc.c.Write(ctx, websocket.MessageBinary, b)
}

func waitConsole(t *testing.T, con *consoletest.Console, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := con.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestConsoleStreamNotAvailable(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "n1"})
	r := h.do("GET", "/v1/nodes/"+id+"/states/console/stream", latest, nil)
	if r.status != http.StatusBadRequest || !strings.Contains(r.faultstring(t), "Console streaming is not available") {
		t.Fatalf("without an attacher: %d %s", r.status, r.body)
	}
	if _, status, body := dialConsole(t, h, id, "", nil); status != http.StatusBadRequest || !strings.Contains(body, "not available") {
		t.Fatalf("WebSocket without an attacher: %d %s", status, body)
	}
}

func TestConsoleStream(t *testing.T) {
	con := consoletest.New()
	h := newRBAC(t, func(o *Options) { o.Console = con })
	a, b, _, _ := rbacFixture(t, h)
	con.Enable(a)
	con.Print(a, []byte("BIOS POST\r\nLinux version 6.1\r\nlogin: "))

	t.Run("no credentials: 401 before the upgrade", func(t *testing.T) {
		_, status, _ := dialConsole(t, h.apiHarness, a, "", nil)
		if status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", status)
		}
		_, status, _ = dialConsole(t, h.apiHarness, a, "", http.Header{"Authorization": {"Basic " + "c3lzYWRtaW46d3Jvbmc="}})
		if status != http.StatusUnauthorized {
			t.Fatalf("wrong password: status %d, want 401", status)
		}
		if n := con.Viewers(a); n != 0 {
			t.Fatalf("%d viewers attached by refused handshakes", n)
		}
	})

	t.Run("plain GET, unknown or hidden node, console off, foreign origin", func(t *testing.T) {
		if r := h.want(http.StatusBadRequest, "sysadmin", "GET", "/v1/nodes/"+a+"/states/console/stream", "", nil); !strings.Contains(r.faultstring(t), "WebSocket upgrade") {
			t.Errorf("plain GET: %s", r.body)
		}
		if _, status, _ := dialConsole(t, h.apiHarness, "0c0ffee0-0000-4000-8000-000000000000", "sysadmin", nil); status != http.StatusNotFound {
			t.Errorf("unknown node: %d", status)
		}
		if _, status, _ := dialConsole(t, h.apiHarness, a, "otheradmin", nil); status != http.StatusNotFound {
			t.Errorf("another project's node: %d, want 404", status)
		}
		if _, status, body := dialConsole(t, h.apiHarness, b, "sysadmin", nil); status != http.StatusBadRequest || !strings.Contains(body, "not enabled") {
			t.Errorf("console not enabled: %d %s", status, body)
		}
		if _, status, _ := dialConsole(t, h.apiHarness, a, "sysadmin", http.Header{"Origin": {"http://evil.example"}}); status != http.StatusForbidden {
			t.Errorf("cross-origin handshake: %d, want 403", status)
		}
		if n := con.Viewers(a); n != 0 {
			t.Fatalf("%d viewers left attached", n)
		}
	})

	t.Run("writer: scrollback, then typing and its echo", func(t *testing.T) {
		cc, _, _ := dialConsole(t, h.apiHarness, a, "sysadmin", nil)
		if !cc.hello.Write || cc.hello.Node != a {
			t.Fatalf("hello %+v", cc.hello)
		}
		cc.readUntil("login: ")
		if err := cc.send([]byte("root\r")); err != nil {
			t.Fatal(err)
		}
		cc.readUntil("root\r")
		if got := string(con.Typed(a)); got != "root\r" {
			t.Fatalf("typed %q", got)
		}
		cc.c.Close(websocket.StatusNormalClosure, "")
		waitConsole(t, con, "the viewer detached", func() bool { return con.Viewers(a) == 0 })
	})

	t.Run("read-only callers watch and cannot type", func(t *testing.T) {
		for _, user := range []string{"sysreader", "lesseemember", "ownerreader"} {
			before := len(con.Typed(a))
			cc, status, body := dialConsole(t, h.apiHarness, a, user, nil)
			if cc == nil {
				t.Fatalf("%s: %d %s", user, status, body)
			}
			if cc.hello.Write {
				t.Errorf("%s: hello %+v, want read-only", user, cc.hello)
			}
			if att := con.Attaches(a); att[len(att)-1] {
				t.Errorf("%s: attached with write", user)
			}
			cc.readUntil("login: ")
			cc.send([]byte("reboot\r"))
			if code, reason := cc.closed(); code != websocket.StatusPolicyViolation || reason != "read-only console" {
				t.Errorf("%s: closed %v %q", user, code, reason)
			}
			if got := con.Typed(a); len(got) != before {
				t.Errorf("%s typed %q", user, got[before:])
			}
		}
		cc, _, _ := dialConsole(t, h.apiHarness, a, "ownermember", nil)
		if !cc.hello.Write {
			t.Error("the owner's member may type (set_console_state)")
		}
	})

	t.Run("huge paste: one big message is refused, a chunked one goes through", func(t *testing.T) {
		cc, _, _ := dialConsole(t, h.apiHarness, a, "sysadmin", nil)
		before := len(con.Typed(a))
		cc.send(bytes.Repeat([]byte("x"), 1<<20))
		if code, _ := cc.closed(); code != websocket.StatusMessageTooBig {
			t.Errorf("1 MiB message: closed %v, want 1009", code)
		}
		waitConsole(t, con, "the viewer detached", func() bool { return con.Viewers(a) == 0 })
		if got := con.Typed(a); len(got) != before {
			t.Errorf("%d bytes of the oversized message typed", len(got)-before)
		}

		// As the UI sends a paste: 1 KiB messages.
		cc, _, _ = dialConsole(t, h.apiHarness, a, "sysadmin", nil)
		paste := append(bytes.Repeat([]byte("0123456789abcdef"), 256<<10/16), "<end of paste>"...)
		done := make(chan error, 1)
		go func() {
			for p := paste; len(p) > 0; p = p[min(len(p), 1024):] {
				if err := cc.send(p[:min(len(p), 1024)]); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		// The echo comes back meanwhile: read it, as the browser does.
		cc.readUntil("<end of paste>")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := con.Typed(a)[before:]; !bytes.Equal(got, paste) {
			t.Errorf("typed %d bytes, want the 256 KiB paste intact", len(got))
		}
	})

	t.Run("two viewers, then the console ends", func(t *testing.T) {
		v1, _, _ := dialConsole(t, h.apiHarness, a, "sysadmin", nil)
		v2, _, _ := dialConsole(t, h.apiHarness, a, "sysreader", nil)
		waitConsole(t, con, "two viewers", func() bool { return con.Viewers(a) >= 2 })
		go con.Print(a, []byte("\r\nkernel: eth0 link up\r\n"))
		v1.readUntil("eth0 link up")
		v2.readUntil("eth0 link up")
		v1.send([]byte("uptime\r"))
		v1.readUntil("uptime\r")
		v2.readUntil("uptime\r")
		v2.c.CloseNow() // the read-only viewer goes away without a word
		waitConsole(t, con, "one viewer", func() bool { return con.Viewers(a) == 1 })
		v1.send([]byte("w\r"))
		v1.readUntil("w\r")

		con.Disable(a)
		if code, reason := v1.closed(); code != websocket.StatusNormalClosure || reason != "console closed" {
			t.Errorf("console disabled: closed %v %q", code, reason)
		}
		if _, status, _ := dialConsole(t, h.apiHarness, a, "sysadmin", nil); status != http.StatusBadRequest {
			t.Errorf("after disable: %d, want 400", status)
		}
	})
}
