package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"castiron/storage"
)

// Work goes to the node's owner. Every castiron instance serves the whole
// API (reads come from the shared database), but a request that acts on a
// node (a verb, a change, a driver call, an agent heartbeat) is sent over
// HTTP to the conductor that owns the node on the hash ring, as Ironic's API
// sends it over RPC to the ring's conductor. The owner then runs it exactly
// as a single conductor does: its reservation, its background task, its
// periodic jobs. Reservations stay exclusive whoever runs a request: they
// are taken in row-locked transactions in the shared database.

// hdrForwarded marks a forwarded request: its receiver runs it, whatever its
// own view of the ring (a request is forwarded at most once).
const hdrForwarded = "X-Castiron-Forwarded-By"

// forwardTimeout bounds a forwarded request; verbs answer once their state
// change is recorded, so this is generous.
const forwardTimeout = 2 * time.Minute

// driverReads are the GET endpoints under a node that talk to its BMC.
var driverReads = []string{"/validate", "/management/boot_device", "/management/boot_device/supported",
	"/states/console", "/vendor_passthru", "/management/indicators"}

// forwardIdent returns the node a request acts on, when it must run on the
// node's owner.
func forwardIdent(r *http.Request) (string, bool) {
	p := strings.TrimPrefix(r.URL.Path, "/v1")
	if rest, ok := strings.CutPrefix(p, "/heartbeat/"); ok && r.Method == http.MethodPost {
		return rest, rest != ""
	}
	rest, ok := strings.CutPrefix(p, "/nodes/")
	if !ok || rest == "" {
		return "", false
	}
	ident, sub, _ := strings.Cut(rest, "/")
	if ident == "detail" || ident == "" {
		return "", false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if sub == "states/console/stream" {
			// A WebSocket: consolestream.go relays it to the owner itself
			// (forwarding here copies bodies and cannot carry an upgrade).
			return "", false
		}
		for _, d := range driverReads {
			if "/"+sub == d || strings.HasPrefix("/"+sub, d+"/") {
				return ident, true
			}
		}
		return "", false
	case http.MethodPost:
		// POST /v1/nodes creates; POST under a node acts on it.
		return ident, sub != ""
	}
	return ident, true // PUT, PATCH, DELETE
}

// forward sends r to the owner of the node it acts on and reports whether
// it did. It does not when this conductor owns the node, when the node is
// unknown (the local handler answers 404), when r was forwarded already, or
// when the owner cannot be reached: a conductor that died looks alive until
// its heartbeat times out, and meanwhile its nodes are served here rather
// than failing.
func (a *API) forward(w http.ResponseWriter, r *http.Request) bool {
	ident, ok := forwardIdent(r)
	if !ok || r.Header.Get(hdrForwarded) != "" {
		return false
	}
	// What places the node on the ring (uuid, group, driver) is all the
	// owner needs: reading the whole node (60 columns, its JSON decoded)
	// for every verb and heartbeat was 5% of castiron's CPU in a 1,000-node
	// storm, on a single conductor where nothing is ever forwarded.
	nv, err := a.cond.Store().GetNodeVersion(r.Context(), ident)
	if err != nil {
		return false
	}
	n := nv.Node()
	if _, _, ok := a.ownerElsewhere(r, n); !ok {
		return false
	}
	var body []byte
	if r.Body != nil {
		orig := r.Body
		body, err = io.ReadAll(io.LimitReader(orig, MaxBodyBytes+1))
		if err != nil || len(body) > MaxBodyBytes {
			// The local handler reads it all again and answers.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), orig), orig}
			return false
		}
	}
	return a.toOwner(w, r, n, body)
}

// ownerElsewhere names n's owner when it is another conductor that r may be
// sent to (r was not forwarded already).
func (a *API) ownerElsewhere(r *http.Request, n *storage.Node) (host, url string, ok bool) {
	if r.Header.Get(hdrForwarded) != "" {
		return "", "", false
	}
	host, url, ok = a.cond.OwnerURL(n)
	if !ok || host == a.cond.Hostname() || url == "" {
		return "", "", false
	}
	return host, url, true
}

// toOwner sends r, whose body was read into body, to n's owner when that is
// another conductor, and copies its answer to w; false when it did not (r's
// body is then body again, for the local handler).
func (a *API) toOwner(w http.ResponseWriter, r *http.Request, n *storage.Node, body []byte) bool {
	host, url, ok := a.ownerElsewhere(r, n)
	if !ok {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, strings.TrimRight(url, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return false
	}
	out.Header = r.Header.Clone()
	out.Header.Set(hdrForwarded, a.cond.Hostname())
	resp, err := a.forwarder().Do(out)
	if err != nil {
		a.log.Warn("owner unreachable, serving its node here", "node", n.UUID, "owner", host, "method", r.Method, "path", r.URL.Path, "err", err)
		return false
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set(hdrForwarded, host)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true
}

// forwarder is the HTTP client for forwarded requests.
func (a *API) forwarder() *http.Client {
	if a.opts.Forwarder != nil {
		return a.opts.Forwarder
	}
	return http.DefaultClient
}
