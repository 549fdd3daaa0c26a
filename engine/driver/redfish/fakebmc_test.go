package redfish

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver"
)

// fakeBMC is a Redfish service on an httptest server that answers from a
// recorded vendor shape (testdata/shapes/*.json: path -> resource) and acts
// on what a BMC does for this driver: sessions, basic auth, PATCH of Boot,
// IndicatorLED and SecureBootEnable, ComputerSystem.Reset and the
// VirtualMedia actions. It refuses what the shape does not offer (a reset
// type or boot target outside its AllowableValues) as a BMC does (400).
type fakeBMC struct {
	t   testing.TB
	srv *httptest.Server

	mu   sync.Mutex
	res  map[string]map[string]any
	user string
	pass string
	// sessionsPath is where sessions are created ("" : no session service).
	sessionsPath string
	// absoluteLocation answers a login with an absolute Location URL (iLO).
	absoluteLocation bool
	tokens           map[string]string // token -> session path
	next             int
	logins, logouts  int
	// onceReadsContinuous stores BootSourceOverrideEnabled Once as
	// Continuous (sushy-tools' libvirt backend).
	onceReadsContinuous bool
	// hook, when set, may answer a request itself (fault injection).
	hook     func(w http.ResponseWriter, r *http.Request) bool
	requests []string
	resets   []string
	patches  []string
}

// shape is one file of testdata/shapes.
type shape struct {
	Source    string                    `json:"_source"`
	Sessions  string                    `json:"_sessions"`
	Absolute  bool                      `json:"_absolute_location"`
	Resources map[string]map[string]any `json:"resources"`
}

const (
	bmcUser = "admin"
	bmcPass = "s3cret"
)

// newFakeBMC starts a BMC answering with shape name (plain HTTP, or TLS).
func newFakeBMC(t testing.TB, name string, tlsOn bool) *fakeBMC {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "shapes", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var s shape
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b := &fakeBMC{t: t, res: map[string]map[string]any{}, user: bmcUser, pass: bmcPass,
		sessionsPath: s.Sessions, absoluteLocation: s.Absolute, tokens: map[string]string{}}
	for p, r := range s.Resources {
		b.res[norm(p)] = r
	}
	if tlsOn {
		b.srv = httptest.NewTLSServer(b)
	} else {
		b.srv = httptest.NewServer(b)
	}
	t.Cleanup(b.srv.Close)
	return b
}

func norm(p string) string {
	if p != "/" {
		p = strings.TrimRight(p, "/")
	}
	return p
}

// node is a driver.Node for this BMC with the shape's credentials.
func (b *fakeBMC) node(extra map[string]any) driver.Node {
	di := map[string]any{"redfish_address": b.srv.URL, "redfish_username": bmcUser, "redfish_password": bmcPass,
		"redfish_verify_ca": false}
	for k, v := range extra {
		if v == nil {
			delete(di, k)
		} else {
			di[k] = v
		}
	}
	return driver.Node{UUID: "7265646a-0000-4000-8000-000000000001", DriverInfo: di, Properties: map[string]any{}}
}

// get returns a copy of a resource.
func (b *fakeBMC) get(path string) map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	raw, _ := json.Marshal(b.res[norm(path)])
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// set changes a resource's top-level field.
func (b *fakeBMC) set(path, key string, v any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res[norm(path)][key] = v
}

func (b *fakeBMC) count(prefix string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (b *fakeBMC) liveSessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.tokens)
}

func redfishError(w http.ResponseWriter, code int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": "Base.1.8.GeneralError", "message": "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}},
	}})
}

func (b *fakeBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := norm(r.URL.Path)
	b.mu.Lock()
	b.requests = append(b.requests, r.Method+" "+path)
	hook := b.hook
	b.mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Method == http.MethodPost && b.sessionsPath != "" && path == norm(b.sessionsPath) {
		b.login(w, body)
		return
	}
	if path != "/redfish/v1" && !b.authorized(r) {
		redfishError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "There is no valid session established with the implementation.")
		return
	}
	switch r.Method {
	case http.MethodGet:
		res, ok := b.res[path]
		if !ok {
			redfishError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+path+" was not found.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	case http.MethodPatch:
		b.patch(w, path, body)
	case http.MethodPost:
		b.action(w, path, body)
	case http.MethodDelete:
		for tok, p := range b.tokens {
			if norm(p) == path {
				delete(b.tokens, tok)
				b.logouts++
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		redfishError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no such session")
	default:
		redfishError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "not allowed")
	}
}

func (b *fakeBMC) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		_, ok := b.tokens[tok]
		return ok
	}
	u, p, ok := r.BasicAuth()
	return ok && u == b.user && p == b.pass
}

func (b *fakeBMC) login(w http.ResponseWriter, body []byte) {
	var req struct{ UserName, Password string }
	_ = json.Unmarshal(body, &req)
	if req.UserName != b.user || req.Password != b.pass {
		redfishError(w, http.StatusUnauthorized, "Base.1.8.InsufficientPrivilege", "Invalid username or password.")
		return
	}
	b.next++
	b.logins++
	tok := fmt.Sprintf("tok-%d-%d", b.next, len(b.tokens))
	p := fmt.Sprintf("%s/%d", norm(b.sessionsPath), b.next)
	b.tokens[tok] = p
	loc := p
	if b.absoluteLocation {
		loc = b.srv.URL + p + "/"
	}
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", loc)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"@odata.id": p, "Id": fmt.Sprint(b.next), "UserName": req.UserName})
}

func (b *fakeBMC) patch(w http.ResponseWriter, path string, body []byte) {
	res, ok := b.res[path]
	if !ok {
		redfishError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", path)
		return
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		redfishError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", err.Error())
		return
	}
	b.patches = append(b.patches, path+" "+string(body))
	if boot, ok := p["Boot"].(map[string]any); ok {
		cur, _ := res["Boot"].(map[string]any)
		if t, ok := boot["BootSourceOverrideTarget"].(string); ok {
			if allowed, ok := cur["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any); ok && !slices.Contains(allowed, any(t)) {
				redfishError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", "The value "+t+" for the property BootSourceOverrideTarget is not in the list of acceptable values.")
				return
			}
		}
		for k, v := range boot {
			if k == "BootSourceOverrideEnabled" && v == "Once" && b.onceReadsContinuous {
				v = "Continuous"
			}
			cur[k] = v
		}
		delete(p, "Boot")
	}
	for k, v := range p {
		res[k] = v
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *fakeBMC) action(w http.ResponseWriter, path string, body []byte) {
	var p map[string]any
	_ = json.Unmarshal(body, &p)
	for _, res := range b.res {
		acts, _ := res["Actions"].(map[string]any)
		for name, a := range acts {
			a, _ := a.(map[string]any)
			if t, _ := a["target"].(string); norm(t) != path {
				continue
			}
			switch name {
			case "#ComputerSystem.Reset":
				rt, _ := p["ResetType"].(string)
				if allowed, ok := a["ResetType@Redfish.AllowableValues"].([]any); ok && !slices.Contains(allowed, any(rt)) {
					redfishError(w, http.StatusBadRequest, "Base.1.8.ActionParameterNotSupported", "The parameter ResetType for the action ComputerSystem.Reset is not supported on the target resource.")
					return
				}
				b.resets = append(b.resets, rt)
				switch rt {
				case "On", "ForceOn", "ForceRestart", "GracefulRestart", "PowerCycle":
					res["PowerState"] = "On"
				case "ForceOff", "GracefulShutdown":
					res["PowerState"] = "Off"
				}
			case "#VirtualMedia.InsertMedia":
				res["Image"], res["Inserted"] = p["Image"], true
			case "#VirtualMedia.EjectMedia":
				res["Image"], res["Inserted"] = "", false
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	redfishError(w, http.StatusNotFound, "Base.1.8.ActionNotSupported", "no action at "+path)
}

// newTestDriver logs through t.Log and uses short timeouts.
func newTestDriver(t testing.TB, cfg Config) *Driver {
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 10 * time.Millisecond
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	return New(cfg)
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
