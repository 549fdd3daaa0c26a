package keystone

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// Guard stands in front of a service as keystonemiddleware does in front of
// Ironic: every request outside the public routes must carry an
// X-Auth-Token that the stub issued and that is still valid; the request
// then reaches the service with the identity headers keystonemiddleware
// sets. Tests read what it let through to prove a client really sent tokens.
type Guard struct {
	ks   *Server
	next http.Handler
	// Public says which requests pass without a token; nil: Ironic's public
	// routes (version discovery and the ramdisk's lookup/heartbeat).
	Public func(*http.Request) bool

	mu     sync.Mutex
	passed []Passed
	denied int
}

// Passed is one request the guard let through with a valid token.
type Passed struct {
	Method, Path string
	Token        TokenInfo
}

// Guard wraps next (the service) with token validation against s.
func (s *Server) Guard(next http.Handler) *Guard {
	return &Guard{ks: s, next: next}
}

// GuardProxy is a Guard in front of a reverse proxy to target (a running
// service such as `castiron serve`).
func (s *Server) GuardProxy(target *url.URL) *Guard {
	return s.Guard(httputil.NewSingleHostReverseProxy(target))
}

// IronicPublic reports the routes Ironic serves without authentication.
func IronicPublic(r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	return p == "" || p == "/v1" || p == "/v1/lookup" || p == "/v1/continue_inspection" ||
		strings.HasPrefix(p, "/v1/heartbeat/")
}

// identityHeaders are the headers keystonemiddleware owns: it removes any a
// client sent before setting them from the validated token.
var identityHeaders = []string{"X-Identity-Status", "X-User-Id", "X-User-Name", "X-Project-Id",
	"X-Project-Name", "X-Roles", "X-System-Scope", "X-Service-Catalog"}

func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, h := range identityHeaders {
		r.Header.Del(h)
	}
	public := g.Public
	if public == nil {
		public = IronicPublic
	}
	info, ok := g.ks.Validate(r.Header.Get("X-Auth-Token"))
	if !ok && !public(r) {
		g.mu.Lock()
		g.denied++
		g.mu.Unlock()
		g.ks.fail(w, errUnauthorized)
		return
	}
	if ok {
		g.mu.Lock()
		g.passed = append(g.passed, Passed{Method: r.Method, Path: r.URL.Path, Token: info})
		g.mu.Unlock()
		r.Header.Set("X-Identity-Status", "Confirmed")
		r.Header.Set("X-User-Id", info.UserID)
		r.Header.Set("X-User-Name", info.UserName)
		r.Header.Set("X-Roles", strings.Join(info.Roles, ","))
		if info.ProjectID != "" {
			r.Header.Set("X-Project-Id", info.ProjectID)
			r.Header.Set("X-Project-Name", info.ProjectName)
		}
		if info.System {
			r.Header.Set("X-System-Scope", "all")
		}
	} else {
		r.Header.Set("X-Identity-Status", "Invalid")
	}
	g.next.ServeHTTP(w, r)
}

// Passed returns the requests let through with a valid token, in order.
func (g *Guard) Passed() []Passed {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Passed(nil), g.passed...)
}

// Denied is the number of requests refused for a missing or invalid token.
func (g *Guard) Denied() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.denied
}

// String summarizes the guard's counts for test messages.
func (g *Guard) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strconv.Itoa(len(g.passed)) + " passed with a token, " + strconv.Itoa(g.denied) + " denied"
}
