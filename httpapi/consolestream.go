package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"castiron/fault"
	"castiron/httpapi/identity"
)

// GET /v1/nodes/{ident}/states/console/stream (castiron-only): a node's serial
// console over a WebSocket, for the web UI's terminal. Behind the API's
// authentication (a handshake without credentials gets 401 before any
// upgrade) and policy: whoever may see the node (baremetal:node:get) may
// watch; only a caller allowed baremetal:node:set_console_state may type.
//
// Protocol: the server's first message is a text frame, JSON
// {"node": uuid, "write": bool}; then binary frames: the scrollback, then
// the live output. The client sends binary frames (keystrokes, at most
// ConsoleMaxInput bytes each; a larger one closes the socket with 1009);
// a read-only viewer that sends anything is closed with 1008. The socket
// closes with 1000 when the console ends (disabled, node deleted).

// ConsoleAttacher attaches a viewer to a node's serial console
// (engine.Conductor implements it once the console exists).
type ConsoleAttacher interface {
	// AttachConsole returns the recent output and a stream: reads are the
	// live output (EOF when the console ends), writes type into it
	// (refused unless write), Close detaches this viewer. A node without
	// an enabled console is a fault.Invalid error; an unknown node
	// fault.NotFound.
	AttachConsole(ctx context.Context, node string, write bool) (scrollback []byte, stream io.ReadWriteCloser, err error)
}

const (
	// ConsoleMaxInput bounds one client message: keystrokes are a few
	// bytes, and the UI cuts pastes into 1 KiB messages; a client that
	// sends more in one message is closed (1009) rather than buffered.
	ConsoleMaxInput = 4 << 10
	// consoleChunk is the largest output message.
	consoleChunk = 16 << 10
	// consoleWriteTimeout: a viewer that takes longer to accept one
	// message is dropped, so it cannot hold the console's output back.
	consoleWriteTimeout = 10 * time.Second
	// A viewer that does not answer a ping within consolePingTimeout is
	// gone (a laptop closed, a network cut): its session ends.
	consolePingInterval = 30 * time.Second
	consolePingTimeout  = 15 * time.Second
)

// consoleHello is the first message of a session.
type consoleHello struct {
	Node  string `json:"node"`
	Write bool   `json:"write"`
}

// consoleSubprotocol is what the web UI offers; other clients need not.
const consoleSubprotocol = "castiron.console"

// consoleStream is GET /v1/nodes/{ident}/states/console/stream.
func (a *API) consoleStream(w http.ResponseWriter, r *http.Request) error {
	if a.opts.Console == nil {
		return fault.New(fault.NotImplemented, "Console streaming is not available on this castiron: its conductor has no serial console support.")
	}
	ident := r.PathValue("ident")
	n, err := a.cond.Store().GetNode(r.Context(), ident)
	if err != nil {
		return err
	}
	if host, url, ok := a.ownerElsewhere(r, n); ok {
		// Another conductor runs this node's console session (several
		// conductors on one database): the handshake and the whole
		// session go to it, as a verb would.
		a.proxyConsole(w, r, n.UUID, host, url)
		return nil
	}
	if !isWebSocket(r) {
		// Attached and let go at once, so that a plain GET says what a
		// handshake would meet (console off, no such node): a browser's
		// WebSocket reports a refused handshake without its status or body.
		_, stream, err := a.opts.Console.AttachConsole(r.Context(), n.UUID, false)
		if err != nil {
			return err
		}
		stream.Close()
		return errInvalid("GET /v1/nodes/%s/states/console/stream is a WebSocket endpoint: send a WebSocket upgrade request.", ident)
	}
	write := true
	if id := identity.From(r.Context()); id != nil && !id.Unrestricted {
		write = a.enforcer().Allowed("baremetal:node:set_console_state", nodeTarget(n), id.Creds)
	}
	scrollback, stream, err := a.opts.Console.AttachConsole(r.Context(), n.UUID, write)
	if err != nil {
		return err
	}
	// Same origin only (the library's default): a page elsewhere cannot
	// ride on the browser's stored credentials.
	// The UI offers "castiron.console" (and, under Keystone, its token as
	// a second subprotocol, never echoed back): a browser that offered
	// subprotocols fails a handshake that selects none.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{consoleSubprotocol}})
	if err != nil {
		stream.Close()
		a.log.InfoContext(r.Context(), "console stream: handshake refused", "node", n.UUID, "err", err)
		return nil // Accept answered
	}
	log := a.log.With("node", n.UUID, "user", userOf(r), "write", write)
	log.InfoContext(r.Context(), "console viewer attached")
	code, reason := serveConsole(c, consoleHello{Node: n.UUID, Write: write}, scrollback, stream)
	log.InfoContext(r.Context(), "console viewer detached", "code", code, "reason", reason)
	return nil
}

// proxyConsole relays a console WebSocket to the conductor that owns the
// node: net/http/httputil's reverse proxy carries the upgrade and then
// copies both directions. The owner checks the credentials and the policy
// again (the request keeps its headers) and sees the client's Host, so its
// same-origin check judges the browser's page, not this hop. An owner that
// cannot be reached is a 503 with Ironic's error body: its console is not
// here either.
func (a *API) proxyConsole(w http.ResponseWriter, r *http.Request, node, host, owner string) {
	target, err := url.Parse(owner)
	if err != nil {
		writeError(w, r, fault.New(fault.Unavailable, "The console of node %s is served by conductor %s, whose API URL %q does not parse: %v", node, host, owner, err))
		return
	}
	var transport http.RoundTripper
	if f := a.forwarder(); f.Transport != nil {
		transport = f.Transport
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(hdrForwarded, a.cond.Hostname())
		},
		Transport: transport,
		ModifyResponse: func(res *http.Response) error {
			res.Header.Set(hdrForwarded, host)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			a.log.WarnContext(r.Context(), "console stream: owner unreachable", "node", node, "owner", host, "err", err)
			writeError(w, r, fault.New(fault.Unavailable, "The console of node %s is served by conductor %s, which cannot be reached: %v", node, host, err))
		},
	}
	a.log.InfoContext(r.Context(), "console stream: relayed to the owner", "node", node, "owner", host)
	rp.ServeHTTP(w, r)
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	has := func(hdr, token string) bool {
		for _, v := range r.Header.Values(hdr) {
			for _, t := range strings.Split(v, ",") {
				if strings.EqualFold(strings.TrimSpace(t), token) {
					return true
				}
			}
		}
		return false
	}
	return has("Connection", "upgrade") && has("Upgrade", "websocket")
}

// serveConsole runs one viewer's session until the console ends, the
// client goes or breaks the protocol; it returns how the socket was
// closed. Three goroutines, all joined before it returns: output (stream
// to socket), input (socket to stream, and the reader the library needs
// for pings and the closing handshake) and the pinger.
func serveConsole(c *websocket.Conn, hello consoleHello, scrollback []byte, stream io.ReadWriteCloser) (websocket.StatusCode, string) {
	c.SetReadLimit(ConsoleMaxInput)
	ctx, cancel := context.WithCancel(context.Background())
	var closeOnce sync.Once
	closeStream := func() { closeOnce.Do(func() { stream.Close() }) }

	type ending struct {
		code   websocket.StatusCode
		reason string
	}
	done := make(chan ending, 3)
	send := func(typ websocket.MessageType, b []byte) error {
		wctx, wcancel := context.WithTimeout(ctx, consoleWriteTimeout)
		defer wcancel()
		return c.Write(wctx, typ, b)
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		js, _ := json.Marshal(hello)
		if err := send(websocket.MessageText, js); err != nil {
			done <- ending{websocket.StatusGoingAway, "client gone"}
			return
		}
		for len(scrollback) > 0 {
			n := min(len(scrollback), consoleChunk)
			if err := send(websocket.MessageBinary, scrollback[:n]); err != nil {
				done <- ending{websocket.StatusGoingAway, "client gone"}
				return
			}
			scrollback = scrollback[n:]
		}
		buf := make([]byte, consoleChunk)
		for {
			n, err := stream.Read(buf)
			if n > 0 {
				if werr := send(websocket.MessageBinary, buf[:n]); werr != nil {
					done <- ending{websocket.StatusPolicyViolation, "viewer too slow or gone"}
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					done <- ending{websocket.StatusNormalClosure, "console closed"}
				} else {
					done <- ending{websocket.StatusInternalError, "console failed"}
				}
				return
			}
		}
	})
	wg.Go(func() {
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				if errors.Is(err, websocket.ErrMessageTooBig) {
					done <- ending{websocket.StatusMessageTooBig, "message too big"}
				} else {
					done <- ending{websocket.StatusNormalClosure, "client closed"}
				}
				return
			}
			switch {
			case !hello.Write:
				done <- ending{websocket.StatusPolicyViolation, "read-only console"}
				return
			case typ != websocket.MessageBinary:
				done <- ending{websocket.StatusUnsupportedData, "keystrokes go in binary messages"}
				return
			}
			if _, err := stream.Write(data); err != nil {
				done <- ending{websocket.StatusPolicyViolation, "console refused input"}
				return
			}
		}
	})
	wg.Go(func() {
		t := time.NewTicker(consolePingInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(ctx, consolePingTimeout)
			err := c.Ping(pctx)
			pcancel()
			if err != nil {
				done <- ending{websocket.StatusGoingAway, "no answer to ping"}
				return
			}
		}
	})

	end := <-done
	// Detach first: a blocked stream read or write returns, and the
	// console stops sending to this viewer at once.
	closeStream()
	c.Close(end.code, end.reason) // bounded by the library (5 s + 5 s)
	cancel()
	c.CloseNow()
	wg.Wait()
	return end.code, end.reason
}
