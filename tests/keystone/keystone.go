// Package keystone is a small in-memory Keystone v3 identity service for
// tests: version discovery, password / application credential / token
// authentication with project, domain and system scope, a service catalog
// whose baremetal endpoint the test chooses, token validation and
// revocation, and Keystone's error bodies. The stock clients (the openstack
// CLI through keystoneauth, tempest, gophercloud) talk to it unchanged.
//
// It is a test fixture, not an identity service: everything lives in memory,
// passwords are compared in clear, and the only policy is who may validate
// or revoke a token (identity:validate_token).
package keystone

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultDomainID and DefaultDomainName are Keystone's built-in domain.
const (
	DefaultDomainID   = "default"
	DefaultDomainName = "Default"
	DefaultRegion     = "RegionOne"
)

// Domain is an identity domain.
type Domain struct {
	ID, Name string
}

// Project is a project (tenant) in a domain.
type Project struct {
	ID, Name, DomainID string
}

// User is a user with a password, its role names per project id, and its
// system-scope role names.
type User struct {
	ID, Name, DomainID, Password string
	// DefaultProjectID scopes a token that asks for no scope, as Keystone does.
	DefaultProjectID string
	ProjectRoles     map[string][]string // project id -> role names
	SystemRoles      []string
}

// AppCredential is an application credential: a secret bound to one user and
// one project, carrying a subset of the user's roles there.
type AppCredential struct {
	ID, Name, Secret, UserID, ProjectID string
	Roles                               []string // empty: all the user's roles on the project
}

// Config is the stub's initial content. Users, projects and application
// credentials may also be added later with the Add methods.
type Config struct {
	Region   string        // default RegionOne
	TokenTTL time.Duration // default 1 h
	// Endpoints maps a service type to its URL in the catalog (every
	// interface, one region); "identity" is always the stub itself.
	Endpoints map[string]string
}

// Server is the identity service. It is an http.Handler; Start runs it on a
// loopback listener.
type Server struct {
	mu        sync.Mutex
	self      string // base URL as clients reach it, no trailing slash
	region    string
	ttl       time.Duration
	endpoints map[string]string
	domains   map[string]Domain
	projects  map[string]Project
	users     map[string]*User
	appCreds  map[string]AppCredential
	roles     map[string]string // role name -> id
	tokens    map[string]*token
	mux       *http.ServeMux
	now       func() time.Time
	// delay and unavailable simulate a slow or failing Keystone.
	delay       time.Duration
	unavailable bool
}

// New returns a stub with the Default domain and nothing else. Set the
// base URL with SetURL before serving (Start does it).
func New(cfg Config) *Server {
	s := &Server{
		region:    cfg.Region,
		ttl:       cfg.TokenTTL,
		endpoints: map[string]string{},
		domains:   map[string]Domain{DefaultDomainID: {ID: DefaultDomainID, Name: DefaultDomainName}},
		projects:  map[string]Project{},
		users:     map[string]*User{},
		appCreds:  map[string]AppCredential{},
		roles:     map[string]string{},
		tokens:    map[string]*token{},
		now:       time.Now,
	}
	if s.region == "" {
		s.region = DefaultRegion
	}
	if s.ttl <= 0 {
		s.ttl = time.Hour
	}
	for k, v := range cfg.Endpoints {
		s.endpoints[k] = v
	}
	s.routes()
	return s
}

// SetURL sets the base URL clients reach the stub at (the identity endpoint
// in catalogs and version documents).
func (s *Server) SetURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.self = strings.TrimRight(u, "/")
}

// URL is the base URL (no /v3): the auth_url of clouds.yaml.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.self
}

// SetEndpoint points a service type's catalog entry at url; tokens issued
// after the call carry it. An empty url removes the service.
func (s *Server) SetEndpoint(serviceType, url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if url == "" {
		delete(s.endpoints, serviceType)
		return
	}
	s.endpoints[serviceType] = url
}

// stableID derives an id from a kind and a name, so ids stay the same from
// run to run (handy in scripts and expectations).
func stableID(kind, name string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + name))
	return hex.EncodeToString(h[:16])
}

// AddDomain adds a domain; an empty id is derived from the name.
func (s *Server) AddDomain(d Domain) Domain {
	if d.ID == "" {
		d.ID = stableID("domain", d.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domains[d.ID] = d
	return d
}

// AddProject adds a project; an empty id is derived from domain and name, an
// empty domain is Default.
func (s *Server) AddProject(p Project) Project {
	if p.DomainID == "" {
		p.DomainID = DefaultDomainID
	}
	if p.ID == "" {
		p.ID = stableID("project", p.DomainID+"/"+p.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.projects[p.ID] = p
	return p
}

// AddUser adds a user; an empty id is derived from domain and name, an empty
// domain is Default.
func (s *Server) AddUser(u User) User {
	if u.DomainID == "" {
		u.DomainID = DefaultDomainID
	}
	if u.ID == "" {
		u.ID = stableID("user", u.DomainID+"/"+u.Name)
	}
	cp := u
	cp.ProjectRoles = map[string][]string{}
	for p, r := range u.ProjectRoles {
		cp.ProjectRoles[p] = append([]string(nil), r...)
	}
	cp.SystemRoles = append([]string(nil), u.SystemRoles...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[cp.ID] = &cp
	return cp
}

// AddAppCredential adds an application credential; an empty id is derived
// from the user and the name.
func (s *Server) AddAppCredential(a AppCredential) AppCredential {
	if a.ID == "" {
		a.ID = stableID("appcred", a.UserID+"/"+a.Name)
	}
	if a.Name == "" {
		a.Name = a.ID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appCreds[a.ID] = a
	return a
}

// SetPassword changes a user's password (tests of a rotated password).
func (s *Server) SetPassword(userID, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[userID]
	if !ok {
		return fmt.Errorf("no user %q", userID)
	}
	u.Password = password
	return nil
}

// roleID returns a role's id, creating it on first use (called with mu held).
func (s *Server) roleID(name string) string {
	id, ok := s.roles[name]
	if !ok {
		id = stableID("role", name)
		s.roles[name] = id
	}
	return id
}

// Admin is the usual test cloud: user admin with the given password in the
// Default domain, project admin, roles admin, member and reader on the
// project and on the system (devstack gives admin the same).
type Admin struct {
	User    User
	Project Project
}

// AddAdmin creates the admin project and user.
func (s *Server) AddAdmin(password string) Admin {
	p := s.AddProject(Project{Name: "admin"})
	roles := []string{"admin", "manager", "member", "reader"}
	u := s.AddUser(User{Name: "admin", Password: password, DefaultProjectID: p.ID, ProjectRoles: map[string][]string{p.ID: roles}, SystemRoles: roles})
	return Admin{User: u, Project: p}
}

func newTokenID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return "gAAAAA" + hex.EncodeToString(b)
}

// RevokeTokens revokes every token of a user, as Keystone does when a user
// is disabled, and returns how many were live (tests of token renewal).
func (s *Server) RevokeTokens(userID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tokens {
		if t.userID == userID && !t.revoked {
			t.revoked = true
			n++
		}
	}
	return n
}
