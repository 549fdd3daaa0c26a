package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi/identity"
)

// Authenticator checks a request's credentials and returns the user name.
// One that is also an identity.Identifier (HTPasswd, BasicUsers,
// identity.Keystone) gives the caller's roles and scope, which policy
// enforcement uses.
type Authenticator interface {
	Authenticate(r *http.Request) (user string, ok bool)
}

type userKey struct{}

func userOf(r *http.Request) string {
	if u, ok := r.Context().Value(userKey{}).(string); ok {
		return u
	}
	return "anonymous"
}

// identify runs auth: an Identifier's own answer, else an unrestricted
// caller named by Authenticate.
func identify(auth Authenticator, r *http.Request) (*identity.Identity, error) {
	if idf, ok := auth.(identity.Identifier); ok {
		return idf.Identify(r)
	}
	user, ok := auth.Authenticate(r)
	if !ok {
		return nil, identity.ErrUnauthenticated
	}
	return &identity.Identity{User: user, Unrestricted: true}, nil
}

// challenge is auth's WWW-Authenticate header.
func challenge(auth Authenticator) string {
	if idf, ok := auth.(identity.Identifier); ok {
		return idf.Challenge()
	}
	return basicChallenge
}

// hasCredentials reports whether the request tried to log in at all (a
// browser's first request without credentials is not a failed login).
func hasCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || identity.Token(r) != ""
}

// clientAddr is the address failed logins are counted against: the peer,
// never a header the client chooses.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// authorized applies opts.Auth; on failure it answers 401 with Ironic's
// body (503 when the identity service cannot answer). Repeated failures
// from one address are slowed down first (identity.Throttle).
func (a *API) authorized(w http.ResponseWriter, r *http.Request) bool {
	if a.opts.Auth == nil {
		return true
	}
	addr := clientAddr(r)
	if !a.throttle.Wait(r.Context(), addr) {
		return false // the client went away while slowed down
	}
	id, err := identify(a.opts.Auth, r)
	if err != nil {
		var down *identity.UnavailableError
		if errors.As(err, &down) {
			a.log.WarnContext(r.Context(), "identity service unavailable: request refused", "method", r.Method, "path", r.URL.Path, "err", err)
			writeRaw(w, http.StatusServiceUnavailable, codeBody(http.StatusServiceUnavailable, "The identity service is unavailable; try again later."))
			return false
		}
		if hasCredentials(r) {
			a.throttle.Failed(addr)
			a.log.InfoContext(r.Context(), "authentication failed", "client", addr, "method", r.Method, "path", r.URL.Path)
		}
		unauthorizedAs(w, challenge(a.opts.Auth))
		return false
	}
	a.throttle.Succeeded(addr)
	if who, ok := r.Context().Value(callerKey{}).(*caller); ok {
		who.id = id
	}
	ctx := identity.With(r.Context(), id)
	ctx = context.WithValue(ctx, userKey{}, id.Actor())
	*r = *r.WithContext(ctx)
	return true
}

// RequireAuth puts h behind auth (nil: noauth), answering 401 with Ironic's
// body and realm as the API does; for endpoints beside the API such as
// /metrics.
func RequireAuth(auth Authenticator, h http.Handler) http.Handler {
	if auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := identify(auth, r); err != nil {
			var down *identity.UnavailableError
			if errors.As(err, &down) {
				writeRaw(w, http.StatusServiceUnavailable, codeBody(http.StatusServiceUnavailable, "The identity service is unavailable; try again later."))
				return
			}
			unauthorizedAs(w, challenge(auth))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) { unauthorizedAs(w, basicChallenge) }

func unauthorizedAs(w http.ResponseWriter, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	writeRaw(w, http.StatusUnauthorized, codeBody(http.StatusUnauthorized, "The request you have made requires authentication."))
}

// HTPasswd is Ironic's http_basic auth strategy: an Apache htpasswd file with
// bcrypt hashes only (as Ironic, which refuses other hash types).
type HTPasswd struct {
	users map[string][]byte
	// cache remembers verified user:password pairs, since bcrypt costs
	// ~50 ms a check and clients send Basic auth on every request.
	mu    sync.Mutex
	cache map[string]string
}

// LoadHTPasswd reads an htpasswd file.
func LoadHTPasswd(path string) (*HTPasswd, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &HTPasswd{users: map[string][]byte{}, cache: map[string]string{}}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		user, hash, ok := strings.Cut(text, ":")
		if !ok || !strings.HasPrefix(hash, "$2") {
			return nil, fmt.Errorf("%s:%d: only bcrypt entries (user:$2y$...) are supported", path, line)
		}
		h.users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(h.users) == 0 {
		return nil, fmt.Errorf("%s: no users", path)
	}
	return h, nil
}

// Authenticate checks HTTP Basic credentials against the file.
func (h *HTPasswd) Authenticate(r *http.Request) (string, bool) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	hash, known := h.users[user]
	if !known {
		return "", false
	}
	h.mu.Lock()
	cached, hit := h.cache[user]
	h.mu.Unlock()
	if hit && cached == pass {
		return user, true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil {
		return "", false
	}
	h.mu.Lock()
	h.cache[user] = pass
	h.mu.Unlock()
	return user, true
}

// caller is filled in by authorized for the audit line ServeHTTP writes
// once the request is answered.
type caller struct {
	id        *identity.Identity
	forwarded bool // sent on to another conductor, which audits it
}

type callerKey struct{}

// isWrite reports whether a method changes something.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// agentPath is a ramdisk agent's call: not an operator's write, and
// frequent (heartbeats), so not audited.
func agentPath(p string) bool {
	return strings.HasPrefix(p, "/v1/heartbeat/") || p == "/v1/continue_inspection"
}

// audit logs a write request: who (user, project, roles; "noauth" without
// authentication), what and the answer; the logger adds the request id
// from the context (appliance's requestIDHandler).
func (a *API) audit(r *http.Request, id *identity.Identity, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	user, project, roles, scope := "noauth", "", []string(nil), ""
	if id != nil {
		user, project, roles, scope = id.User, id.ProjectID, id.Roles, id.Scope()
		if a.opts.Auth != nil && id.Unrestricted {
			scope = "unrestricted"
		}
	} else if a.opts.Auth != nil {
		user = "unauthenticated"
	}
	a.log.InfoContext(r.Context(), "write request", "method", r.Method, "path", r.URL.Path, "status", status,
		"user", user, "project", project, "roles", roles, "scope", scope, "client", clientAddr(r))
}
