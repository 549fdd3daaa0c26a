// Package httpapi serves Ironic's /v1 REST API over engine. It parses and
// checks requests, negotiates microversions, renders Ironic's JSON views and
// error bodies, and calls engine for every change; it never writes state.
package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"castiron/engine"
	"castiron/fault"
	"castiron/httpapi/identity"
	"castiron/httpapi/policy"
	"castiron/pxe/boot"
	"castiron/storage"
)

// MaxBodyBytes caps request bodies (Ironic has no such cap; an appliance
// reachable from a site network should).
const MaxBodyBytes = 1 << 20

// Options configure the API.
type Options struct {
	// Auth checks credentials; nil means noauth.
	Auth   Authenticator
	Logger *slog.Logger
	// Extra mounts other handlers (web UI, ramdisk callbacks) on the same mux
	// under their own patterns.
	Extra map[string]http.Handler
	// HTML, when set, answers GET / for browsers (Accept: text/html); API
	// clients keep getting Ironic's version document there.
	HTML http.Handler
	// Forwarder sends requests to the conductor that owns their node
	// (forward.go); nil: http.DefaultClient.
	Forwarder *http.Client
	// BootRecorder, when set, gets the agent's calls for the boot timeline.
	BootRecorder boot.Recorder
	// Observer, when set, is told of every request answered (metrics).
	Observer RequestObserver
	// LockRetry is how long a request that found its node locked waits
	// before it tries again (Ironic's [conductor]node_locked_retry_interval,
	// 1 s when zero); lockAttempts tries are made in all.
	LockRetry time.Duration
	// MaxMinor is the newest microversion served (1.MaxMinor); zero means
	// the package's MaxMinor. Tests of resources above it (inspection
	// rules, 1.96) raise it for their server.
	MaxMinor int
	// Policy is the authorization policy applied to callers with roles
	// (Keystone, http_basic with a users file); nil: Ironic's defaults.
	Policy *policy.Enforcer
	// Throttle slows down repeated failed logins per client address; nil:
	// identity.NewThrottle's defaults.
	Throttle *identity.Throttle
	// ViewCacheBytes bounds the rendered node views kept for reads
	// (viewcache.go): 0 follows the fleet (2 KiB a node, 1-32 MiB),
	// negative keeps none.
	ViewCacheBytes int
	// Console attaches viewers to nodes' serial consoles for
	// GET /v1/nodes/{ident}/states/console/stream (consolestream.go); nil: that
	// endpoint answers 400, console streaming not available.
	Console ConsoleAttacher
}

// RequestObserver is told of each request once it is answered: the route
// pattern it matched ("" when none), its method, the status and the time.
type RequestObserver interface {
	Request(route, method string, status int, took time.Duration)
}

// lockAttempts is Ironic's [conductor]node_locked_retry_attempts.
const lockAttempts = 3

// API is the HTTP handler of the /v1 API.
type API struct {
	cond *engine.Conductor
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	// views holds rendered node views (nil: none kept).
	views *viewCache
	// pages holds whole list answers (pagecache.go), with views only.
	pages *pageCache
	// throttle counts failed logins per client address.
	throttle *identity.Throttle
	// routeKeys are the routes registered ("METHOD /path"), for the test
	// that every route has a policy (access_routes.go).
	routeKeys []string
}

// New builds the API over cond.
func New(cond *engine.Conductor, opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxMinor == 0 {
		opts.MaxMinor = MaxMinor
	}
	a := &API{cond: cond, opts: opts, log: opts.Logger, mux: http.NewServeMux(), views: newViewCache(opts.ViewCacheBytes, cond.Store().NodeCount), throttle: opts.Throttle}
	if a.throttle == nil {
		a.throttle = identity.NewThrottle()
	}
	if a.views != nil {
		a.pages = newPageCache()
	}
	a.routes()
	for pattern, h := range opts.Extra {
		a.mux.Handle(pattern, h)
	}
	return a
}

// handlerFunc is an API handler: it writes a success response itself or
// returns an error that is rendered as Ironic's error body.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route registers h under /v1+path and under the bookmark path (Ironic's
// bookmark links omit /v1). minMinor hides the endpoint below that version
// with Ironic's 404.
func (a *API) route(method, path string, minMinor int, h handlerFunc) {
	wrapped := a.versioned(minMinor, nodeNameGate(path, a.guard(method, path, h)))
	a.mux.Handle(method+" /v1"+path, wrapped)
	a.mux.Handle(method+" "+path, wrapped)
}

// versioned negotiates the microversion, authenticates, and runs h.
func (a *API) versioned(minMinor int, h handlerFunc) http.Handler {
	return a.versionedAuth(minMinor, true, h)
}

// versionedPublic is versioned without authentication (ramdisk endpoints).
func (a *API) versionedPublic(minMinor int, h handlerFunc) http.Handler {
	return a.versionedAuth(minMinor, false, h)
}

func (a *API) versionedAuth(minMinor int, auth bool, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, verr := negotiate(r, a.opts.MaxMinor)
		if verr != nil {
			if verr.withRange {
				setRangeHeaders(w.Header(), a.opts.MaxMinor)
			}
			writeRaw(w, http.StatusNotAcceptable, codeBody(http.StatusNotAcceptable, verr.desc))
			return
		}
		hdr := w.Header()
		setRangeHeaders(hdr, a.opts.MaxMinor)
		hdr.Set(hdrVersion, v.String())
		// The version documents are public in Ironic too (clients discover
		// the version before they authenticate).
		if auth && r.URL.Path != "/v1" && r.URL.Path != "/v1/" && !a.authorized(w, r) {
			return
		}
		if v.Minor < minMinor {
			writeError(w, r, notFoundResource())
			return
		}
		r = r.WithContext(withVersion(r.Context(), v))
		var capped *cappedBody
		if r.Body != nil {
			capped = &cappedBody{orig: r.Body, ReadCloser: http.MaxBytesReader(w, r.Body, MaxBodyBytes)}
			r.Body = capped
		}
		if err := a.retryLocked(w, r, h); err != nil {
			writeError(w, r, err)
		}
		if capped != nil && capped.over {
			lingerDrain(w, capped.orig)
		}
	})
}

// foregroundRead reports whether r is an operator's read, whose queries
// get readers of their own (storage.Foreground): not the agents' lookup,
// which comes by the thousand in a power-on storm.
func foregroundRead(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.TrimRight(r.URL.Path, "/") != "/v1/lookup"
}

// ServeHTTP recovers panics into a logged 500 and turns the mux's plain-text
// 404/405 into Ironic's JSON.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	r = withRequestIDs(rec, r)
	who := &caller{}
	ctx := context.WithValue(r.Context(), callerKey{}, who)
	if foregroundRead(r) {
		ctx = storage.Foreground(ctx)
	}
	r = r.WithContext(ctx)
	route := ""
	defer func() {
		if p := recover(); p != nil {
			a.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			if !rec.wrote {
				writeRaw(rec, http.StatusInternalServerError, faultBody("Server", "An internal error occurred; see the castiron log."))
			}
		}
		if rec.status >= 500 {
			a.log.WarnContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(start))
		} else {
			a.log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(start))
		}
		if isWrite(r.Method) && !agentPath(r.URL.Path) && !who.forwarded {
			a.audit(r, who.id, rec.status)
		}
		if a.opts.Observer != nil {
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			a.opts.Observer.Request(route, r.Method, status, time.Since(start))
		}
	}()
	// Ironic (pecan) ignores a trailing slash, and python-ironicclient sends
	// one with filters: GET /v1/ports/?node=X, GET /v1/nodes/?conductor=Y.
	if p := r.URL.Path; len(p) > len("/v1/") && strings.HasPrefix(p, "/v1/") && strings.HasSuffix(p, "/") {
		r.URL.Path = strings.TrimRight(p, "/")
		r.URL.RawPath = strings.TrimRight(r.URL.RawPath, "/")
	}
	r = stripJSONSuffix(r)
	_, pattern := a.mux.Handler(r)
	// The pattern without its method is the route: a bounded label.
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = path
	} else {
		route = pattern
	}
	if pattern == "" {
		// No route: the mux would answer text 404 or 405 (with Allow).
		probe := &headerProbe{h: http.Header{}}
		a.mux.ServeHTTP(probe, r)
		if allow := probe.h.Get("Allow"); allow != "" {
			rec.Header().Set("Allow", allow)
		}
		status := probe.status
		if status == 0 || (status >= 300 && status < 400 && strings.Contains(r.URL.Path, "//")) {
			// Ironic has no route with an empty path segment: 404, not
			// the mux's redirect to the cleaned path.
			status = http.StatusNotFound
		}
		writeRaw(rec, status, codeBody(status, ""))
		return
	}
	if a.forward(rec, r) {
		who.forwarded = true // the conductor that answered logs it
		return
	}
	a.mux.ServeHTTP(rec, r)
}

// retryLocked runs h, and again while it answers NodeLocked (a handler that
// does has changed nothing), as Ironic's conductor retries taking a node's
// lock: a node held by a short task, such as the power change that
// answered 202 a moment ago, is waited for instead of refused. The body
// read so far is replayed to each try.
func (a *API) retryLocked(w http.ResponseWriter, r *http.Request, h handlerFunc) error {
	interval := a.opts.LockRetry
	if interval <= 0 {
		interval = time.Second
	}
	body := r.Body
	var seen bytes.Buffer
	if body != nil {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(body, &seen), body}
	}
	for attempt := 1; ; attempt++ {
		err := h(w, r)
		if err == nil || !fault.Is(err, fault.NodeLocked) || attempt == lockAttempts {
			return err
		}
		select {
		case <-r.Context().Done():
			return err
		case <-time.After(interval):
		}
		if body != nil {
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(bytes.Clone(seen.Bytes())), io.TeeReader(body, &seen)), body}
		}
	}
}

// cappedBody is a request body behind http.MaxBytesReader that remembers
// whether the cap was hit.
type cappedBody struct {
	io.ReadCloser
	orig io.ReadCloser
	over bool
}

func (c *cappedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		c.over = true
	}
	return n, err
}

// Lingering close, as nginx does it: after a 413 the rest of the body is
// read and dropped for a bounded time, so that a client that writes its
// whole body before reading (Python's http.client does) sees the answer
// instead of a connection reset.
const (
	lingerTime  = 30 * time.Second
	lingerBytes = 256 << 20
)

func lingerDrain(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, body, lingerBytes)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if !s.wrote {
		s.status, s.wrote = http.StatusOK, true
	}
	return s.ResponseWriter.Write(b)
}

// ReadFrom keeps net/http's sendfile path for file bodies (kernel,
// initramfs, images) that ServeContent copies through io.Copy.
func (s *statusRecorder) ReadFrom(src io.Reader) (int64, error) {
	if !s.wrote {
		s.status, s.wrote = http.StatusOK, true
	}
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{s.ResponseWriter}, src)
}

// Unwrap gives http.ResponseController the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush lets streaming handlers (server-sent events) flush through.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// headerProbe captures what the mux would answer for an unrouted request.
type headerProbe struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (p *headerProbe) Header() http.Header         { return p.h }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }
func (p *headerProbe) Write(b []byte) (int, error) { return p.body.Write(b) }

// baseURL is scheme://host of the request, for links (Ironic builds them
// from the request too).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// link is one entry of a resource's "links".
type link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
	Type string `json:"type,omitempty"`
}

// actorContext tags the request's context with the authenticated user.
func actorContext(r *http.Request) context.Context {
	ctx := engine.WithActor(r.Context(), userOf(r))
	if id := identity.From(r.Context()); id != nil && id.ProjectID != "" && !id.System {
		ctx = engine.WithProject(ctx, id.ProjectID)
	}
	return ctx
}
