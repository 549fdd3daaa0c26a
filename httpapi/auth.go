package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Authenticator checks a request's credentials and returns the user name.
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

// authorized applies opts.Auth; on failure it answers 401 with Ironic's body.
func (a *API) authorized(w http.ResponseWriter, r *http.Request) bool {
	if a.opts.Auth == nil {
		return true
	}
	user, ok := a.opts.Auth.Authenticate(r)
	if !ok {
		unauthorized(w)
		return false
	}
	*r = *r.WithContext(context.WithValue(r.Context(), userKey{}, user))
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
		if _, ok := auth.Authenticate(r); !ok {
			unauthorized(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Baremetal API"`)
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
