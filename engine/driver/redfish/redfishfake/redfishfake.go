// Package redfishfake is a Redfish BMC on an httptest server that answers
// from recorded vendor shapes (shapes/*.json, each saying where it comes
// from) and acts on what a BMC does for castiron's redfish driver. It is
// test support only; nothing in the binary imports it.
package redfishfake

import (
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"castiron/engine/driver"
)

// BMC is a Redfish service on an httptest server that answers from a
// recorded vendor shape (testdata/shapes/*.json: path -> resource) and acts
// on what a BMC does for this driver: sessions, basic auth, PATCH of Boot,
// IndicatorLED and SecureBootEnable, ComputerSystem.Reset and the
// VirtualMedia actions. It refuses what the shape does not offer (a reset
// type or boot target outside its AllowableValues) as a BMC does (400).
type BMC struct {
	t   testing.TB
	Srv *httptest.Server

	Mu   sync.Mutex
	Res  map[string]map[string]any
	user string
	pass string
	// sessionsPath is where sessions are created ("" : no session service).
	SessionsPath string
	// absoluteLocation answers a login with an absolute Location URL (iLO).
	absoluteLocation bool
	Tokens           map[string]string // token -> session path
	next             int
	Logins, Logouts  int
	// onceReadsContinuous stores BootSourceOverrideEnabled Once as
	// Continuous (sushy-tools' libvirt backend).
	OnceReadsContinuous bool
	// Hook, when set, may answer a request itself (fault injection).
	Hook     func(w http.ResponseWriter, r *http.Request) bool
	Requests []string
	Resets   []string
	Patches  []string
}

//go:embed shapes/*.json
var shapes embed.FS

// shape is one file of testdata/shapes.
type shape struct {
	Source    string                    `json:"_source"`
	Sessions  string                    `json:"_sessions"`
	Absolute  bool                      `json:"_absolute_location"`
	Resources map[string]map[string]any `json:"resources"`
}

const (
	User = "admin"
	Pass = "s3cret"
)

// Start starts a BMC answering with shape name (plain HTTP, or TLS).
func Start(t testing.TB, name string, tlsOn bool) *BMC {
	t.Helper()
	raw, err := shapes.ReadFile("shapes/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var s shape
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b := &BMC{t: t, Res: map[string]map[string]any{}, user: User, pass: Pass,
		SessionsPath: s.Sessions, absoluteLocation: s.Absolute, Tokens: map[string]string{}}
	for p, r := range s.Resources {
		b.Res[Norm(p)] = r
	}
	if tlsOn {
		b.Srv = httptest.NewTLSServer(b)
	} else {
		b.Srv = httptest.NewServer(b)
	}
	t.Cleanup(b.Srv.Close)
	return b
}

func Norm(p string) string {
	if p != "/" {
		p = strings.TrimRight(p, "/")
	}
	return p
}

// Node is a driver.Node for this BMC with the shape's credentials.
func (b *BMC) Node(extra map[string]any) driver.Node {
	di := map[string]any{"redfish_address": b.Srv.URL, "redfish_username": User, "redfish_password": Pass,
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

// Get returns a copy of a resource.
func (b *BMC) Get(path string) map[string]any {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	raw, _ := json.Marshal(b.Res[Norm(path)])
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// Set changes a resource's top-level field.
func (b *BMC) Set(path, key string, v any) {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	b.Res[Norm(path)][key] = v
}

func (b *BMC) Count(prefix string) int {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	n := 0
	for _, r := range b.Requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (b *BMC) LiveSessions() int {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	return len(b.Tokens)
}

func Error(w http.ResponseWriter, code int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": "Base.1.8.GeneralError", "message": "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}},
	}})
}

func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := Norm(r.URL.Path)
	b.Mu.Lock()
	b.Requests = append(b.Requests, r.Method+" "+path)
	hook := b.Hook
	b.Mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	b.Mu.Lock()
	defer b.Mu.Unlock()
	if r.Method == http.MethodPost && b.SessionsPath != "" && path == Norm(b.SessionsPath) {
		b.login(w, body)
		return
	}
	if path != "/redfish/v1" && !b.authorized(r) {
		Error(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "There is no valid session established with the implementation.")
		return
	}
	switch r.Method {
	case http.MethodGet:
		res, ok := b.Res[path]
		if !ok {
			Error(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+path+" was not found.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	case http.MethodPatch:
		b.patch(w, path, body)
	case http.MethodPost:
		b.action(w, path, body)
	case http.MethodDelete:
		for tok, p := range b.Tokens {
			if Norm(p) == path {
				delete(b.Tokens, tok)
				b.Logouts++
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		Error(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no such session")
	default:
		Error(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "not allowed")
	}
}

func (b *BMC) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		_, ok := b.Tokens[tok]
		return ok
	}
	u, p, ok := r.BasicAuth()
	return ok && u == b.user && p == b.pass
}

func (b *BMC) login(w http.ResponseWriter, body []byte) {
	var req struct{ UserName, Password string }
	_ = json.Unmarshal(body, &req)
	if req.UserName != b.user || req.Password != b.pass {
		Error(w, http.StatusUnauthorized, "Base.1.8.InsufficientPrivilege", "Invalid username or password.")
		return
	}
	b.next++
	b.Logins++
	tok := fmt.Sprintf("tok-%d-%d", b.next, len(b.Tokens))
	p := fmt.Sprintf("%s/%d", Norm(b.SessionsPath), b.next)
	b.Tokens[tok] = p
	loc := p
	if b.absoluteLocation {
		loc = b.Srv.URL + p + "/"
	}
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", loc)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"@odata.id": p, "Id": fmt.Sprint(b.next), "UserName": req.UserName})
}

func (b *BMC) patch(w http.ResponseWriter, path string, body []byte) {
	res, ok := b.Res[path]
	if !ok {
		Error(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", path)
		return
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		Error(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", err.Error())
		return
	}
	b.Patches = append(b.Patches, path+" "+string(body))
	if boot, ok := p["Boot"].(map[string]any); ok {
		cur, _ := res["Boot"].(map[string]any)
		if t, ok := boot["BootSourceOverrideTarget"].(string); ok {
			if allowed, ok := cur["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any); ok && !slices.Contains(allowed, any(t)) {
				Error(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", "The value "+t+" for the property BootSourceOverrideTarget is not in the list of acceptable values.")
				return
			}
		}
		for k, v := range boot {
			if k == "BootSourceOverrideEnabled" && v == "Once" && b.OnceReadsContinuous {
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

func (b *BMC) action(w http.ResponseWriter, path string, body []byte) {
	var p map[string]any
	_ = json.Unmarshal(body, &p)
	for _, res := range b.Res {
		acts, _ := res["Actions"].(map[string]any)
		for name, a := range acts {
			a, _ := a.(map[string]any)
			if t, _ := a["target"].(string); Norm(t) != path {
				continue
			}
			switch name {
			case "#ComputerSystem.Reset":
				rt, _ := p["ResetType"].(string)
				if allowed, ok := a["ResetType@Redfish.AllowableValues"].([]any); ok && !slices.Contains(allowed, any(rt)) {
					Error(w, http.StatusBadRequest, "Base.1.8.ActionParameterNotSupported", "The parameter ResetType for the action ComputerSystem.Reset is not supported on the target resource.")
					return
				}
				b.Resets = append(b.Resets, rt)
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
	Error(w, http.StatusNotFound, "Base.1.8.ActionNotSupported", "no action at "+path)
}
