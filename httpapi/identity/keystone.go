package identity

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// KeystoneConfig is Ironic's [keystone_authtoken]: where Keystone is and
// castiron's own service user, whose token validates the callers' tokens.
type KeystoneConfig struct {
	AuthURL           string // e.g. http://keystone:5000 or .../v3
	Username          string
	Password          string
	ProjectName       string
	UserDomainName    string // default "Default"
	ProjectDomainName string // default "Default"
	// CacheTime bounds how long a validated token is trusted without asking
	// Keystone again (keystonemiddleware's token_cache_time, 300 s when
	// zero): a revoked token stops working within it.
	CacheTime time.Duration
	// CacheSize bounds the tokens kept (10000 when zero).
	CacheSize int
	// Timeout bounds each call to Keystone (10 s when zero); a Keystone
	// slower than that answers 503.
	Timeout time.Duration
	// Client is the HTTP client (default: one with Timeout).
	Client *http.Client
}

// Keystone validates X-Auth-Token against Keystone as keystonemiddleware
// does: GET /v3/auth/tokens with the service's own token, the caller's in
// X-Subject-Token; valid tokens are cached until they expire or CacheTime
// passes, whichever is first.
type Keystone struct {
	cfg  KeystoneConfig
	base string // .../v3
	hc   *http.Client
	now  func() time.Time

	svcMu     sync.Mutex
	svcToken  string
	svcExpiry time.Time

	mu    sync.Mutex
	cache map[string]*list.Element
	lru   *list.List // of *cached, most recent first
}

type cached struct {
	token   string
	id      Identity
	expires time.Time // token expiry or cache lifetime, the earlier
}

// NewKeystone checks cfg and returns the validator; nothing is asked of
// Keystone until the first request.
func NewKeystone(cfg KeystoneConfig) (*Keystone, error) {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"--keystone-auth-url", cfg.AuthURL}, {"--keystone-username", cfg.Username},
		{"--keystone-password", cfg.Password}, {"--keystone-project-name", cfg.ProjectName},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("keystone auth needs %s", strings.Join(missing, ", "))
	}
	if cfg.UserDomainName == "" {
		cfg.UserDomainName = "Default"
	}
	if cfg.ProjectDomainName == "" {
		cfg.ProjectDomainName = "Default"
	}
	if cfg.CacheTime <= 0 {
		cfg.CacheTime = 300 * time.Second
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10000
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	hc := cfg.Client
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	base := strings.TrimRight(cfg.AuthURL, "/")
	if !strings.HasSuffix(base, "/v3") {
		base += "/v3"
	}
	return &Keystone{cfg: cfg, base: base, hc: hc, now: time.Now, cache: map[string]*list.Element{}, lru: list.New()}, nil
}

// Challenge names Keystone, as keystonemiddleware's www_authenticate_uri.
func (k *Keystone) Challenge() string {
	return `Keystone uri="` + strings.TrimSuffix(k.base, "/v3") + `"`
}

// Identify validates the request's X-Auth-Token (or, for a browser's
// WebSocket, the token it offers as a subprotocol: WebSocketToken).
func (k *Keystone) Identify(r *http.Request) (*Identity, error) {
	tok := Token(r)
	if tok == "" {
		return nil, ErrUnauthenticated
	}
	if id := k.cached(tok); id != nil {
		return id, nil
	}
	id, expires, err := k.validate(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	k.remember(tok, id, expires)
	return id, nil
}

// Authenticate is the httpapi.Authenticator form (the web UI, /metrics).
func (k *Keystone) Authenticate(r *http.Request) (string, bool) {
	id, err := k.Identify(r)
	if err != nil {
		return "", false
	}
	return id.User, true
}

func (k *Keystone) cached(tok string) *Identity {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.cache[tok]
	if !ok {
		return nil
	}
	c := e.Value.(*cached)
	if !k.now().Before(c.expires) {
		k.lru.Remove(e)
		delete(k.cache, tok)
		return nil
	}
	k.lru.MoveToFront(e)
	id := c.id
	return &id
}

func (k *Keystone) remember(tok string, id *Identity, expires time.Time) {
	if limit := k.now().Add(k.cfg.CacheTime); expires.After(limit) {
		expires = limit
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.cache[tok]; ok {
		k.lru.Remove(e)
	}
	k.cache[tok] = k.lru.PushFront(&cached{token: tok, id: *id, expires: expires})
	for k.lru.Len() > k.cfg.CacheSize {
		old := k.lru.Back()
		k.lru.Remove(old)
		delete(k.cache, old.Value.(*cached).token)
	}
}

// tokenDoc is the part of Keystone's token document castiron reads.
type tokenDoc struct {
	Token struct {
		ExpiresAt string `json:"expires_at"`
		User      struct {
			ID, Name string
			Domain   struct{ ID, Name string }
		} `json:"user"`
		Project *struct {
			ID, Name string
			Domain   struct{ ID, Name string }
		} `json:"project"`
		Domain *struct{ ID, Name string } `json:"domain"`
		System *struct {
			All bool `json:"all"`
		} `json:"system"`
		Roles []struct{ ID, Name string } `json:"roles"`
	} `json:"token"`
}

// validate asks Keystone about tok with the service token, getting a new
// service token once if Keystone no longer takes the old one.
func (k *Keystone) validate(ctx context.Context, tok string) (*Identity, time.Time, error) {
	for attempt := 0; ; attempt++ {
		svc, err := k.serviceToken(ctx, attempt > 0)
		if err != nil {
			return nil, time.Time{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.base+"/auth/tokens?nocatalog", nil)
		if err != nil {
			return nil, time.Time{}, &UnavailableError{err}
		}
		req.Header.Set("X-Auth-Token", svc)
		req.Header.Set("X-Subject-Token", tok)
		req.Header.Set("Accept", "application/json")
		resp, err := k.hc.Do(req)
		if err != nil {
			return nil, time.Time{}, &UnavailableError{err}
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return nil, time.Time{}, &UnavailableError{err}
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			return k.parse(body)
		case resp.StatusCode == http.StatusNotFound:
			return nil, time.Time{}, ErrUnauthenticated // unknown, revoked or expired
		case (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && attempt == 0:
			continue // our service token expired or was revoked
		default:
			return nil, time.Time{}, &UnavailableError{fmt.Errorf("GET %s/auth/tokens: %s", k.base, resp.Status)}
		}
	}
}

func (k *Keystone) parse(body []byte) (*Identity, time.Time, error) {
	var doc tokenDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, time.Time{}, &UnavailableError{fmt.Errorf("token document: %w", err)}
	}
	t := doc.Token
	expires, err := time.Parse(time.RFC3339Nano, t.ExpiresAt)
	if err != nil {
		return nil, time.Time{}, &UnavailableError{fmt.Errorf("token expires_at %q: %w", t.ExpiresAt, err)}
	}
	if !k.now().Before(expires) {
		return nil, time.Time{}, ErrUnauthenticated
	}
	id := &Identity{User: t.User.Name}
	id.UserID, id.UserName, id.UserDomainID = t.User.ID, t.User.Name, t.User.Domain.ID
	if t.Project != nil {
		id.ProjectID, id.ProjectName, id.ProjectDomID = t.Project.ID, t.Project.Name, t.Project.Domain.ID
	}
	if t.Domain != nil {
		id.DomainID = t.Domain.ID
	}
	id.System = t.System != nil && t.System.All
	for _, r := range t.Roles {
		id.Roles = append(id.Roles, r.Name)
	}
	return id, expires, nil
}

// serviceToken returns castiron's own token, getting one when there is
// none, it expires within a minute, or fresh is set.
func (k *Keystone) serviceToken(ctx context.Context, fresh bool) (string, error) {
	k.svcMu.Lock()
	defer k.svcMu.Unlock()
	if !fresh && k.svcToken != "" && k.now().Add(time.Minute).Before(k.svcExpiry) {
		return k.svcToken, nil
	}
	c := k.cfg
	reqBody, _ := json.Marshal(map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": c.Username, "password": c.Password, "domain": map[string]any{"name": c.UserDomainName}}}},
		"scope": map[string]any{"project": map[string]any{"name": c.ProjectName, "domain": map[string]any{"name": c.ProjectDomainName}}},
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.base+"/auth/tokens?nocatalog", bytes.NewReader(reqBody))
	if err != nil {
		return "", &UnavailableError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := k.hc.Do(req)
	if err != nil {
		return "", &UnavailableError{err}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return "", &UnavailableError{err}
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		// Wrong service credentials are the operator's to fix; to callers
		// the identity service is unusable, never open.
		return "", &UnavailableError{fmt.Errorf("castiron's service user %s could not get a token: %s", c.Username, resp.Status)}
	}
	var doc tokenDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", &UnavailableError{fmt.Errorf("service token document: %w", err)}
	}
	exp, err := time.Parse(time.RFC3339Nano, doc.Token.ExpiresAt)
	if err != nil {
		return "", &UnavailableError{fmt.Errorf("service token expires_at: %w", err)}
	}
	tok := resp.Header.Get("X-Subject-Token")
	if tok == "" {
		return "", &UnavailableError{errors.New("Keystone gave no X-Subject-Token")}
	}
	k.svcToken, k.svcExpiry = tok, exp
	return tok, nil
}

// WebSocketTokenPrefix marks the subprotocol that carries a Keystone token
// in a WebSocket handshake: a browser's WebSocket cannot send headers, so
// the web UI offers ["castiron.console", "x-auth-token.<token>"] (the way
// Kubernetes takes bearer tokens from browsers). Keystone's Fernet tokens
// are URL-safe base64 without padding: valid subprotocol characters.
const WebSocketTokenPrefix = "x-auth-token."

// Token is the request's Keystone token: X-Auth-Token, else, in a
// WebSocket handshake, the token offered as a subprotocol.
func Token(r *http.Request) string {
	if t := r.Header.Get("X-Auth-Token"); t != "" {
		return t
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return ""
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if t, ok := strings.CutPrefix(strings.TrimSpace(p), WebSocketTokenPrefix); ok && t != "" {
				return t
			}
		}
	}
	return ""
}
