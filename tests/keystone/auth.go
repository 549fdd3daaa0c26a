package keystone

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// authRequest is the body of POST /v3/auth/tokens.
type authRequest struct {
	Auth *struct {
		Identity *struct {
			Methods  []string `json:"methods"`
			Password *struct {
				User *userRef `json:"user"`
			} `json:"password"`
			Token *struct {
				ID string `json:"id"`
			} `json:"token"`
			AppCred *struct {
				ID     string   `json:"id"`
				Name   string   `json:"name"`
				Secret string   `json:"secret"`
				User   *userRef `json:"user"`
			} `json:"application_credential"`
		} `json:"identity"`
		// Scope is an object, or the string "unscoped".
		Scope json.RawMessage `json:"scope"`
	} `json:"auth"`
}

type ref struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type userRef struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Password string `json:"password"`
	Domain   *ref   `json:"domain"`
}

type scopeRequest struct {
	Project *struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Domain *ref   `json:"domain"`
	} `json:"project"`
	Domain *ref `json:"domain"`
	System *struct {
		All bool `json:"all"`
	} `json:"system"`
}

// token is an issued token.
type token struct {
	id, auditID string
	methods     []string
	userID      string
	projectID   string // project scope
	domainID    string // domain scope
	system      bool   // system scope
	roles       []string
	appCred     *AppCredential
	issued      time.Time
	expires     time.Time
	revoked     bool
}

// errUnauthorized is Keystone's generic 401: it never says which part of
// the credentials was wrong.
var errUnauthorized = &apiError{401, "The request you have made requires authentication."}

// authenticate checks an auth request and issues a token (called with mu held).
func (s *Server) authenticate(req *authRequest) (*token, error) {
	if req.Auth == nil {
		return nil, badRequest("Expecting to find auth in request body.")
	}
	id := req.Auth.Identity
	if id == nil {
		return nil, badRequest("Expecting to find identity in auth.")
	}
	if len(id.Methods) == 0 {
		return nil, badRequest("Invalid input for field 'identity': 'methods' is a required property")
	}
	t := &token{methods: append([]string(nil), id.Methods...)}
	var userID string
	var rescoped *token
	setUser := func(uid string) error {
		if userID != "" && userID != uid {
			// Every method must identify the same user.
			return errUnauthorized
		}
		userID = uid
		return nil
	}
	for _, m := range id.Methods {
		var uid string
		var err error
		switch m {
		case "password":
			if id.Password == nil || id.Password.User == nil {
				return nil, badRequest("Expecting to find user in password.")
			}
			uid, err = s.checkPassword(id.Password.User)
		case "token":
			if id.Token == nil || id.Token.ID == "" {
				return nil, badRequest("Expecting to find id in token.")
			}
			rescoped = s.liveToken(id.Token.ID)
			if rescoped == nil {
				return nil, errUnauthorized
			}
			if rescoped.appCred != nil {
				// Keystone refuses to rescope an application credential token.
				return nil, &apiError{403, "You are not authorized to perform the requested action: rescoping an application credential token."}
			}
			uid = rescoped.userID
		case "application_credential":
			if id.AppCred == nil {
				return nil, badRequest("Expecting to find application_credential in identity.")
			}
			var ac AppCredential
			ac, err = s.checkAppCred(id.AppCred.ID, id.AppCred.Name, id.AppCred.Secret, id.AppCred.User)
			if err == nil {
				t.appCred = &ac
				uid = ac.UserID
			}
		default:
			return nil, &apiError{401, "Attempted to authenticate with an unsupported method."}
		}
		if err != nil {
			return nil, err
		}
		if err := setUser(uid); err != nil {
			return nil, err
		}
	}
	t.userID = userID
	if err := s.scope(t, req.Auth.Scope, rescoped); err != nil {
		return nil, err
	}
	t.roles = withImplied(t.roles)
	t.id = newTokenID()
	t.auditID = newTokenID()[6:28]
	t.issued = s.now().UTC()
	t.expires = t.issued.Add(s.ttl)
	if rescoped != nil && rescoped.expires.Before(t.expires) {
		t.expires = rescoped.expires // a rescoped token never outlives its parent
	}
	s.tokens[t.id] = t
	return t, nil
}

// findUser resolves a user by id, or by name within a domain given by id or
// name (called with mu held).
func (s *Server) findUser(u *userRef) (*User, error) {
	if u.ID != "" {
		if usr, ok := s.users[u.ID]; ok {
			return usr, nil
		}
		return nil, errUnauthorized
	}
	if u.Name == "" {
		return nil, badRequest("Expecting to find id or name in user.")
	}
	if u.Domain == nil || (u.Domain.ID == "" && u.Domain.Name == "") {
		return nil, badRequest("Expecting to find domain in user.")
	}
	d, ok := s.findDomain(u.Domain)
	if !ok {
		return nil, errUnauthorized
	}
	for _, usr := range s.users {
		if usr.Name == u.Name && usr.DomainID == d.ID {
			return usr, nil
		}
	}
	return nil, errUnauthorized
}

func (s *Server) findDomain(r *ref) (Domain, bool) {
	if r.ID != "" {
		d, ok := s.domains[r.ID]
		return d, ok
	}
	for _, d := range s.domains {
		if d.Name == r.Name {
			return d, true
		}
	}
	return Domain{}, false
}

func secretEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) checkPassword(u *userRef) (string, error) {
	usr, err := s.findUser(u)
	if err != nil {
		return "", err
	}
	if !secretEqual(usr.Password, u.Password) {
		return "", errUnauthorized
	}
	return usr.ID, nil
}

// checkAppCred resolves an application credential by id, or by name with
// its user, and checks the secret.
func (s *Server) checkAppCred(id, name, secret string, u *userRef) (AppCredential, error) {
	var ac AppCredential
	var ok bool
	switch {
	case id != "":
		ac, ok = s.appCreds[id]
	case name != "":
		if u == nil {
			return ac, badRequest("Expecting to find user in application_credential.")
		}
		usr, err := s.findUser(u)
		if err != nil {
			return ac, err
		}
		for _, a := range s.appCreds {
			if a.Name == name && a.UserID == usr.ID {
				ac, ok = a, true
				break
			}
		}
	default:
		return ac, badRequest("Expecting to find id or name in application_credential.")
	}
	if !ok || !secretEqual(ac.Secret, secret) {
		return ac, errUnauthorized
	}
	if _, ok := s.users[ac.UserID]; !ok {
		return ac, errUnauthorized
	}
	return ac, nil
}

// scope fills the token's scope and roles from the request's scope, the
// application credential, the token being rescoped, or the user's default
// project (called with mu held).
func (s *Server) scope(t *token, raw json.RawMessage, parent *token) error {
	usr := s.users[t.userID]
	var sc scopeRequest
	explicit := len(raw) > 0 && string(raw) != "null"
	if explicit {
		var word string
		if json.Unmarshal(raw, &word) == nil {
			if word != "unscoped" {
				return badRequest(fmt.Sprintf("Invalid input for field 'scope': %q is not valid", word))
			}
			if t.appCred != nil {
				return &apiError{401, "Application credentials cannot request a scope."}
			}
			return nil
		}
		if err := json.Unmarshal(raw, &sc); err != nil {
			return badRequest("Invalid input for field 'scope': " + err.Error())
		}
	}
	if t.appCred != nil {
		if explicit && (sc.Domain != nil || sc.System != nil || (sc.Project != nil && sc.Project.ID != t.appCred.ProjectID)) {
			return &apiError{401, "Application credentials cannot request a scope."}
		}
		have := usr.ProjectRoles[t.appCred.ProjectID]
		roles := t.appCred.Roles
		if len(roles) == 0 {
			roles = have
		}
		for _, r := range roles {
			if !slices.Contains(have, r) {
				// The user lost the role since the credential was made.
				return errUnauthorized
			}
		}
		if len(roles) == 0 {
			return errUnauthorized
		}
		t.projectID, t.roles = t.appCred.ProjectID, roles
		return nil
	}
	switch {
	case sc.Project != nil:
		if sc.Project.ID == "" && sc.Project.Name == "" {
			return badRequest("Expecting to find id or name in project.")
		}
		if sc.Project.ID == "" && (sc.Project.Domain == nil || (sc.Project.Domain.ID == "" && sc.Project.Domain.Name == "")) {
			return badRequest("Expecting to find domain in project.")
		}
		p, ok := s.findProject(sc.Project.ID, sc.Project.Name, sc.Project.Domain)
		if !ok {
			return errUnauthorized
		}
		roles := usr.ProjectRoles[p.ID]
		if len(roles) == 0 {
			return &apiError{401, fmt.Sprintf("User %s has no access to project %s", usr.ID, p.ID)}
		}
		t.projectID, t.roles = p.ID, roles
	case sc.Domain != nil:
		d, ok := s.findDomain(sc.Domain)
		if !ok {
			return errUnauthorized
		}
		// The stub keeps no domain role assignments: only a user's own
		// domain may be scoped, with its system roles.
		if d.ID != usr.DomainID || len(usr.SystemRoles) == 0 {
			return &apiError{401, fmt.Sprintf("User %s has no access to domain %s", usr.ID, d.ID)}
		}
		t.domainID, t.roles = d.ID, usr.SystemRoles
	case sc.System != nil:
		if !sc.System.All || len(usr.SystemRoles) == 0 {
			return &apiError{401, fmt.Sprintf("User %s has no access to the system", usr.ID)}
		}
		t.system, t.roles = true, usr.SystemRoles
	case parent != nil:
		// A token rescoped without a scope keeps the parent's scope.
		t.projectID, t.domainID, t.system, t.roles = parent.projectID, parent.domainID, parent.system, parent.roles
	case usr.DefaultProjectID != "" && len(usr.ProjectRoles[usr.DefaultProjectID]) > 0:
		t.projectID, t.roles = usr.DefaultProjectID, usr.ProjectRoles[usr.DefaultProjectID]
	}
	return nil
}

func (s *Server) findProject(id, name string, dom *ref) (Project, bool) {
	if id != "" {
		p, ok := s.projects[id]
		return p, ok
	}
	d, ok := s.findDomain(dom)
	if !ok {
		return Project{}, false
	}
	for _, p := range s.projects {
		if p.Name == name && p.DomainID == d.ID {
			return p, true
		}
	}
	return Project{}, false
}

// liveToken returns a token that exists, is not revoked and has not
// expired (called with mu held).
func (s *Server) liveToken(id string) *token {
	t, ok := s.tokens[id]
	if !ok || t.revoked || !s.now().Before(t.expires) {
		return nil
	}
	if _, ok := s.users[t.userID]; !ok {
		return nil
	}
	return t
}

// impliedRoles are the role implications keystone-manage bootstrap
// creates (since 2023.2, which added manager): admin implies manager,
// manager implies member, member implies reader. A token lists the
// roles assigned and the roles they imply, as Keystone's does.
var impliedRoles = map[string]string{"admin": "manager", "manager": "member", "member": "reader"}

func withImplied(roles []string) []string {
	if len(roles) == 0 {
		return roles
	}
	out := append([]string(nil), roles...)
	for i := 0; i < len(out); i++ {
		if imp, ok := impliedRoles[out[i]]; ok && !slices.Contains(out, imp) {
			out = append(out, imp)
		}
	}
	return out
}

// mayValidate is Keystone's identity:validate_token (and revoke_token)
// default: "(role:reader and system_scope:all) or rule:service_role or
// rule:token_subject": a system reader, a service (role service), or the
// token's own user.
func mayValidate(caller, subject *token) bool {
	return caller.userID == subject.userID || slices.Contains(caller.roles, "service") ||
		(caller.system && slices.Contains(caller.roles, "reader"))
}
