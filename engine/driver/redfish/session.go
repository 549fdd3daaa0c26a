package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/stmcginnis/gofish/schemas"
)

// logoutTimeout bounds deleting a session: it runs on a context detached
// from the caller's, so a cancelled operation or a shutdown still frees the
// BMC's session slot (BMCs have only a handful).
const logoutTimeout = 3 * time.Second

// endpoint is one authenticated Redfish service: a BMC address, user,
// password and trust settings (info.key). It holds the HTTP client (and so
// its kept-alive connections) and at most one session, shared by every
// operation on every node that uses the same key.
type endpoint struct {
	cfg     Config
	log     *slog.Logger
	base    string
	root    string
	address string
	user    string
	pass    string
	auth    string // authBasic, authSession, authAuto
	http    *http.Client

	// lock serialises logins (a channel so that waiting honours ctx).
	lock chan struct{}
	mu   sync.Mutex // guards the fields below
	// token and sessionURI are the current session; basic is set once
	// "auto" found no usable session service.
	token      string
	sessionURI string
	basic      bool
	// system is the only system's path, found when redfish_system_id is
	// unset; sysLock makes one operation look it up while others wait.
	system   string
	sysLock  chan struct{}
	lastUsed time.Time
}

// authHeader is what one request carries.
type authHeader struct {
	token      string
	user, pass string
	basic      bool
}

func (a authHeader) apply(r *http.Request) {
	switch {
	case a.token != "":
		r.Header.Set("X-Auth-Token", a.token)
	case a.basic:
		r.SetBasicAuth(a.user, a.pass)
	}
}

// authorization returns the credentials for the next request, logging in
// first when the endpoint uses sessions and has none.
func (e *endpoint) authorization(ctx context.Context) (authHeader, error) {
	if e.user == "" && e.pass == "" {
		return authHeader{}, nil // Ironic sends no credentials either
	}
	if a, ok := e.current(); ok {
		return a, nil
	}
	if err := e.acquire(ctx); err != nil {
		return authHeader{}, e.transportError(ctx, http.MethodPost, "(session login)", err)
	}
	defer e.release()
	if a, ok := e.current(); ok { // another operation logged in meanwhile
		return a, nil
	}
	if err := e.login(ctx); err != nil {
		return authHeader{}, err
	}
	a, _ := e.current()
	return a, nil
}

// current is the ready authorization, if any.
func (e *endpoint) current() (authHeader, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.auth == authBasic || e.basic:
		return authHeader{user: e.user, pass: e.pass, basic: true}, true
	case e.token != "":
		return authHeader{token: e.token}, true
	}
	return authHeader{}, false
}

func (e *endpoint) acquire(ctx context.Context) error {
	select {
	case e.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *endpoint) release() { <-e.lock }

// relogin replaces a session the BMC no longer accepts (401 on stale), unless
// another operation already did.
func (e *endpoint) relogin(ctx context.Context, stale string) error {
	if err := e.acquire(ctx); err != nil {
		return e.transportError(ctx, http.MethodPost, "(session login)", err)
	}
	defer e.release()
	e.mu.Lock()
	if e.token != stale {
		e.mu.Unlock()
		return nil
	}
	e.token, e.sessionURI = "", ""
	e.mu.Unlock()
	e.log.InfoContext(ctx, "redfish: session expired, logging in again", "bmc", e.address, "user", e.user)
	return e.login(ctx)
}

// forgetBasic drops the "auto" fallback to basic authentication, so that
// the next request logs in.
func (e *endpoint) forgetBasic() {
	e.mu.Lock()
	e.basic = false
	e.mu.Unlock()
}

// login creates a session (POST to the service root's Links.Sessions). With
// "auto", a BMC without a usable session service, or one that refuses the
// login, gets basic authentication from then on, as sushy's
// SessionOrBasicAuth does; a network failure is an error either way.
func (e *endpoint) login(ctx context.Context) error {
	c := &conn{ep: e, ctx: ctx}
	sessions := e.root + "/SessionService/Sessions"
	resp, data, err := c.roundTrip(http.MethodGet, e.url(e.root+"/"), nil, nil, authHeader{})
	if err != nil {
		return e.transportError(ctx, http.MethodGet, e.root+"/", err)
	}
	var root struct {
		Links struct {
			Sessions struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(data, &root) == nil && root.Links.Sessions.ID != "" {
		sessions = root.Links.Sessions.ID
	}
	payload, _ := json.Marshal(map[string]string{"UserName": e.user, "Password": e.pass})
	resp, data, err = c.roundTrip(http.MethodPost, e.url(sessions), payload, nil, authHeader{})
	if err != nil {
		return e.transportError(ctx, http.MethodPost, sessions, err)
	}
	token := resp.Header.Get("X-Auth-Token")
	if resp.StatusCode/100 == 2 && token != "" {
		uri := resp.Header.Get("Location")
		if uri == "" {
			var s struct {
				ID string `json:"@odata.id"`
			}
			_ = json.Unmarshal(data, &s)
			uri = s.ID
		}
		e.mu.Lock()
		e.token, e.sessionURI = token, uri
		e.mu.Unlock()
		e.log.DebugContext(ctx, "redfish: session created", "bmc", e.address, "user", e.user, "session", uri)
		return nil
	}
	if e.auth == authAuto {
		e.log.InfoContext(ctx, "redfish: no session from the BMC, using basic authentication",
			"bmc", e.address, "user", e.user, "status", resp.StatusCode)
		e.mu.Lock()
		e.basic = true
		e.mu.Unlock()
		return nil
	}
	if resp.StatusCode/100 == 2 {
		return &bmcError{msg: "Redfish BMC " + e.address + " created a session without an X-Auth-Token header"}
	}
	causes := []error{schemas.ConstructError(resp.StatusCode, data)}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		causes = append(causes, ErrAuthentication)
	}
	return &bmcError{
		msg: fmt.Sprintf("Redfish BMC %s refused a session for user %q (POST %s: HTTP %d: %s): check redfish_username and redfish_password, or set redfish_auth_type to basic or auto if the BMC has no SessionService",
			e.address, e.user, sessions, resp.StatusCode, bmcMessage(data)),
		causes: causes,
	}
}

// logout deletes the session, if any, on a context of its own.
func (e *endpoint) logout(ctx context.Context) {
	e.mu.Lock()
	token, uri := e.token, e.sessionURI
	e.token, e.sessionURI = "", ""
	e.mu.Unlock()
	if token == "" || uri == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	c := &conn{ep: e, ctx: dctx}
	resp, _, err := c.roundTrip(http.MethodDelete, e.url(uri), nil, nil, authHeader{token: token})
	switch {
	case err != nil:
		e.log.WarnContext(ctx, "redfish: could not delete session", "bmc", e.address, "session", uri, "err", err)
	case resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnauthorized:
		e.log.WarnContext(ctx, "redfish: could not delete session", "bmc", e.address, "session", uri, "status", resp.StatusCode)
	default:
		e.log.DebugContext(ctx, "redfish: session deleted", "bmc", e.address, "session", uri)
	}
	// The transport is shared by the fleet: its idle connections to this
	// BMC are closed by its LRU and idle timeout, not here.
}

// sessionCache holds the endpoints by key, least recently used first out:
// at most Config.MaxSessions, each dropped (and its session deleted) after
// Config.SessionIdle without use.
type sessionCache struct {
	mu sync.Mutex
	m  map[string]*endpoint
}

// get returns the endpoint for inf, creating it if needed, and the
// endpoints that fell out of the cache (their sessions are the caller's to
// delete, outside the lock).
func (d *Driver) endpoint(inf *info) (*endpoint, []*endpoint, error) {
	now := time.Now()
	key := inf.key()
	d.cache.mu.Lock()
	defer d.cache.mu.Unlock()
	if d.cache.m == nil {
		d.cache.m = map[string]*endpoint{}
	}
	var out []*endpoint
	for k, e := range d.cache.m {
		if k != key && now.Sub(e.lastUsed) > d.cfg.SessionIdle {
			out = append(out, e)
			delete(d.cache.m, k)
		}
	}
	if e, ok := d.cache.m[key]; ok {
		e.lastUsed = now
		return e, out, nil
	}
	hc, err := d.newHTTPClient(inf)
	if err != nil {
		return nil, out, err
	}
	e := &endpoint{cfg: d.cfg, log: d.log, base: inf.base, root: inf.root, address: inf.address(),
		user: inf.username, pass: inf.password, auth: inf.authType, http: hc,
		lock: make(chan struct{}, 1), sysLock: make(chan struct{}, 1), lastUsed: now}
	d.cache.m[key] = e
	if len(d.cache.m) > d.cfg.MaxSessions {
		all := make([]*endpoint, 0, len(d.cache.m))
		keys := map[*endpoint]string{}
		for k, v := range d.cache.m {
			all = append(all, v)
			keys[v] = k
		}
		sort.Slice(all, func(i, j int) bool { return all[i].lastUsed.Before(all[j].lastUsed) })
		for _, v := range all[:len(all)-d.cfg.MaxSessions] {
			delete(d.cache.m, keys[v])
			out = append(out, v)
		}
	}
	return e, out, nil
}

// Close deletes every session the driver holds on any BMC (call it at
// shutdown). The driver stays usable: a later call logs in again.
func (d *Driver) Close(ctx context.Context) error {
	d.cache.mu.Lock()
	all := make([]*endpoint, 0, len(d.cache.m))
	for _, e := range d.cache.m {
		all = append(all, e)
	}
	d.cache.m = nil
	d.cache.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() { defer wg.Done(); e.logout(ctx) }()
	}
	wg.Wait()
	d.transports.mu.Lock()
	for _, tr := range d.transports.m {
		tr.CloseIdleConnections()
	}
	d.transports.mu.Unlock()
	return nil
}

// Sessions reports how many BMC sessions the driver holds now (for tests
// and metrics).
func (d *Driver) Sessions() int {
	d.cache.mu.Lock()
	defer d.cache.mu.Unlock()
	n := 0
	for _, e := range d.cache.m {
		e.mu.Lock()
		if e.token != "" {
			n++
		}
		e.mu.Unlock()
	}
	return n
}
