package keystone

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"time"
)

// expiryFormat is Keystone's timestamp format; tempest parses expires_at
// with microseconds and a Z.
const expiryFormat = "2006-01-02T15:04:05.000000Z"

// apiError is an error answered with Keystone's body.
type apiError struct {
	code    int
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(msg string) *apiError { return &apiError{http.StatusBadRequest, msg} }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.versions)
	m.HandleFunc("GET /v3", s.version)
	m.HandleFunc("GET /v3/{$}", s.version)
	m.HandleFunc("POST /v3/auth/tokens", s.issue)
	m.HandleFunc("GET /v3/auth/tokens", s.validate) // and HEAD
	m.HandleFunc("DELETE /v3/auth/tokens", s.revoke)
	m.HandleFunc("GET /v3/auth/catalog", s.authCatalog)
	m.HandleFunc("GET /v3/auth/projects", s.authProjects)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, &apiError{http.StatusNotFound, "The resource could not be found."})
	})
	s.mux = m
}

// ServeHTTP serves the identity API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	delay, unavailable := s.delay, s.unavailable
	s.mu.Unlock()
	if delay > 0 {
		// Read the body first: only then does net/http notice a client
		// that gave up, and end the wait.
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if unavailable {
		s.fail(w, &apiError{http.StatusServiceUnavailable, "The service is temporarily unavailable."})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// SetDelay makes every answer wait d first (a slow Keystone); 0 stops it.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// SetUnavailable makes every request answer 503 (a Keystone whose
// database is down) until called with false.
func (s *Server) SetUnavailable(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = down
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "X-Auth-Token")
	w.WriteHeader(code)
	w.Write(b)
}

var errorTitles = map[int]string{400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 503: "Service Unavailable"}

// fail answers Keystone's error body; a 401 names the identity endpoint as
// keystonemiddleware and keystoneauth expect.
func (s *Server) fail(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = &apiError{http.StatusInternalServerError, err.Error()}
	}
	if e.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Keystone uri="`+s.URL()+`"`)
	}
	title := errorTitles[e.code]
	if title == "" {
		title = http.StatusText(e.code)
	}
	writeJSON(w, e.code, map[string]any{"error": map[string]any{"code": e.code, "message": e.message, "title": title}})
}

func (s *Server) versionEntry() map[string]any {
	return map[string]any{
		"id":      "v3.14",
		"status":  "stable",
		"updated": "2020-04-07T00:00:00Z",
		"links":   []any{map[string]any{"rel": "self", "href": s.URL() + "/v3/"}},
		"media-types": []any{map[string]any{
			"base": "application/json",
			"type": "application/vnd.openstack.identity-v3+json",
		}},
	}
}

// versions is GET /: Keystone answers 300 Multiple Choices with the list.
func (s *Server) versions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{s.versionEntry()}}})
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": s.versionEntry()})
}

// issue is POST /v3/auth/tokens.
func (s *Server) issue(w http.ResponseWriter, r *http.Request) {
	var req authRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		s.fail(w, badRequest("could not read the request body"))
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.fail(w, badRequest("Malformed request body: "+err.Error()))
		return
	}
	s.mu.Lock()
	t, err := s.authenticate(&req)
	var doc map[string]any
	if err == nil {
		doc = s.render(t, !r.URL.Query().Has("nocatalog"))
	}
	s.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("X-Subject-Token", t.id)
	writeJSON(w, http.StatusCreated, doc)
}

// caller returns the live token of X-Auth-Token (called with mu held).
func (s *Server) caller(r *http.Request) *token {
	id := r.Header.Get("X-Auth-Token")
	if id == "" {
		return nil
	}
	return s.liveToken(id)
}

// validate is GET and HEAD /v3/auth/tokens: the caller's X-Auth-Token must
// be valid; X-Subject-Token is the token checked.
func (s *Server) validate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var doc map[string]any
	var err error
	subject := r.Header.Get("X-Subject-Token")
	switch {
	case s.caller(r) == nil:
		err = errUnauthorized
	case subject == "":
		err = badRequest("Expecting to find X-Subject-Token in request headers.")
	default:
		if t := s.liveToken(subject); t == nil {
			err = &apiError{http.StatusNotFound, "Could not find token: " + subject + "."}
		} else if !mayValidate(s.caller(r), t) {
			err = &apiError{http.StatusForbidden, "You are not authorized to perform the requested action: identity:validate_token."}
		} else {
			doc = s.render(t, !r.URL.Query().Has("nocatalog"))
		}
	}
	s.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("X-Subject-Token", subject)
	writeJSON(w, http.StatusOK, doc)
}

// revoke is DELETE /v3/auth/tokens.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var err error
	subject := r.Header.Get("X-Subject-Token")
	switch {
	case s.caller(r) == nil:
		err = errUnauthorized
	case s.liveToken(subject) == nil:
		err = &apiError{http.StatusNotFound, "Could not find token: " + subject + "."}
	case !mayValidate(s.caller(r), s.tokens[subject]):
		err = &apiError{http.StatusForbidden, "You are not authorized to perform the requested action: identity:revoke_token."}
	default:
		s.tokens[subject].revoked = true
	}
	s.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) authCatalog(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t := s.caller(r)
	var cat []any
	if t != nil {
		cat = s.catalog()
	}
	s.mu.Unlock()
	if t == nil {
		s.fail(w, errUnauthorized)
		return
	}
	if t.projectID == "" && t.domainID == "" && !t.system {
		s.fail(w, &apiError{http.StatusForbidden, "Unscoped tokens have no catalog."})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"catalog": cat, "links": map[string]any{"self": s.URL() + "/v3/auth/catalog"}})
}

// authProjects lists the projects the caller's user has roles on.
func (s *Server) authProjects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t := s.caller(r)
	var list []any
	if t != nil {
		ids := make([]string, 0)
		for id := range s.users[t.userID].ProjectRoles {
			if _, ok := s.projects[id]; ok {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			p := s.projects[id]
			list = append(list, map[string]any{"id": p.ID, "name": p.Name, "domain_id": p.DomainID,
				"enabled": true, "is_domain": false, "parent_id": p.DomainID, "description": "",
				"links": map[string]any{"self": s.self + "/v3/projects/" + p.ID}})
		}
	}
	s.mu.Unlock()
	if t == nil {
		s.fail(w, errUnauthorized)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": list, "links": map[string]any{"self": s.URL() + "/v3/auth/projects", "next": nil, "previous": nil}})
}

func (s *Server) domainRef(id string) map[string]any {
	return map[string]any{"id": id, "name": s.domains[id].Name}
}

// render is the token document Keystone answers (called with mu held).
func (s *Server) render(t *token, withCatalog bool) map[string]any {
	u := s.users[t.userID]
	doc := map[string]any{
		"methods":    t.methods,
		"user":       map[string]any{"id": u.ID, "name": u.Name, "domain": s.domainRef(u.DomainID), "password_expires_at": nil},
		"audit_ids":  []string{t.auditID},
		"issued_at":  t.issued.Format(expiryFormat),
		"expires_at": t.expires.Format(expiryFormat),
	}
	scoped := true
	switch {
	case t.projectID != "":
		p := s.projects[t.projectID]
		doc["project"] = map[string]any{"id": p.ID, "name": p.Name, "domain": s.domainRef(p.DomainID)}
		doc["is_domain"] = false
	case t.domainID != "":
		doc["domain"] = s.domainRef(t.domainID)
	case t.system:
		doc["system"] = map[string]any{"all": true}
	default:
		scoped = false
	}
	if scoped {
		roles := make([]any, 0, len(t.roles))
		for _, r := range t.roles {
			roles = append(roles, map[string]any{"id": s.roleID(r), "name": r})
		}
		doc["roles"] = roles
		if withCatalog {
			doc["catalog"] = s.catalog()
		}
	}
	if t.appCred != nil {
		doc["application_credential"] = map[string]any{"id": t.appCred.ID, "name": t.appCred.Name, "restricted": true}
	}
	return map[string]any{"token": doc}
}

var serviceNames = map[string]string{"identity": "keystone", "baremetal": "ironic", "baremetal-introspection": "ironic-inspector"}

// catalog lists identity (the stub) and every configured endpoint, each with
// the public, internal and admin interfaces in one region.
func (s *Server) catalog() []any {
	eps := map[string]string{"identity": s.self + "/v3"}
	for k, v := range s.endpoints {
		eps[k] = v
	}
	types := make([]string, 0, len(eps))
	for k := range eps {
		types = append(types, k)
	}
	sort.Strings(types)
	out := make([]any, 0, len(types))
	for _, typ := range types {
		name := serviceNames[typ]
		if name == "" {
			name = typ
		}
		var list []any
		for _, iface := range []string{"public", "internal", "admin"} {
			list = append(list, map[string]any{
				"id": stableID("endpoint", typ+"/"+iface), "interface": iface,
				"region": s.region, "region_id": s.region, "url": eps[typ],
			})
		}
		out = append(out, map[string]any{"id": stableID("service", typ), "type": typ, "name": name, "endpoints": list})
	}
	return out
}

// TokenInfo is what a service learns from validating a token.
type TokenInfo struct {
	UserID, UserName, ProjectID, ProjectName string
	Roles                                    []string
	System                                   bool
	AppCredentialID                          string
	Expires                                  time.Time
}

// Validate checks a token as keystonemiddleware would, in process.
func (s *Server) Validate(id string) (TokenInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.liveToken(id)
	if t == nil {
		return TokenInfo{}, false
	}
	info := TokenInfo{UserID: t.userID, UserName: s.users[t.userID].Name, ProjectID: t.projectID,
		Roles: append([]string(nil), t.roles...), System: t.system, Expires: t.expires}
	if t.projectID != "" {
		info.ProjectName = s.projects[t.projectID].Name
	}
	if t.appCred != nil {
		info.AppCredentialID = t.appCred.ID
	}
	return info, true
}
