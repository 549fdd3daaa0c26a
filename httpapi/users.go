package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"

	"go.yaml.in/yaml/v3"

	"castiron/httpapi/identity"
)

// BasicUsers is http_basic with roles: the htpasswd file checks passwords
// and a users file gives each user roles and a scope, so Ironic's policies
// apply without Keystone. A user the users file does not name has no
// roles: every rule but the empty one refuses it.
type BasicUsers struct {
	pw    *HTPasswd
	users map[string]userEntry
}

// userEntry is one user of the users file.
type userEntry struct {
	Roles []string `yaml:"roles"`
	// Scope "system" is a system-scoped user (system_scope:all);
	// otherwise Project names its project (the project_id rules compare
	// with nodes' owner and lessee).
	Scope   string `yaml:"scope"`
	Project string `yaml:"project"`
}

// LoadBasicUsers reads the users file (YAML: user -> roles and scope or
// project) for the users of pw.
func LoadBasicUsers(pw *HTPasswd, path string) (*BasicUsers, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	users := map[string]userEntry{}
	if err := dec.Decode(&users); err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	names := make([]string, 0, len(users))
	for n := range users {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		u := users[n]
		switch {
		case u.Scope != "" && u.Scope != "system":
			errs = append(errs, fmt.Errorf("user %s: scope %q (want system, or a project)", n, u.Scope))
		case u.Scope == "system" && u.Project != "":
			errs = append(errs, fmt.Errorf("user %s: both scope system and project %s", n, u.Project))
		case u.Scope == "" && u.Project == "":
			errs = append(errs, fmt.Errorf("user %s: no scope (give scope: system or project: NAME)", n))
		}
		if len(u.Roles) == 0 {
			errs = append(errs, fmt.Errorf("user %s: no roles", n))
		}
		if _, ok := pw.users[n]; !ok {
			errs = append(errs, fmt.Errorf("user %s is not in the htpasswd file", n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return &BasicUsers{pw: pw, users: users}, nil
}

// Authenticate is HTPasswd's.
func (b *BasicUsers) Authenticate(r *http.Request) (string, bool) { return b.pw.Authenticate(r) }

// Identify checks the password and gives the user's roles and scope.
func (b *BasicUsers) Identify(r *http.Request) (*identity.Identity, error) {
	user, ok := b.pw.Authenticate(r)
	if !ok {
		return nil, identity.ErrUnauthenticated
	}
	id := &identity.Identity{User: user}
	id.UserID, id.UserName = user, user
	if u, ok := b.users[user]; ok {
		id.Roles = append([]string(nil), u.Roles...)
		id.System = u.Scope == "system"
		id.ProjectID, id.ProjectName = u.Project, u.Project
	}
	return id, nil
}

// Challenge is Basic with Ironic's realm.
func (b *BasicUsers) Challenge() string { return basicChallenge }

// Identify makes HTPasswd an identity.Identifier: without a users file
// every user may do everything, as in Ironic's http_basic (policy is only
// enforced with Keystone).
func (h *HTPasswd) Identify(r *http.Request) (*identity.Identity, error) {
	user, ok := h.Authenticate(r)
	if !ok {
		return nil, identity.ErrUnauthenticated
	}
	id := &identity.Identity{User: user, Unrestricted: true}
	id.UserID, id.UserName = user, user
	return id, nil
}

// Challenge is Basic with Ironic's realm.
func (h *HTPasswd) Challenge() string { return basicChallenge }

const basicChallenge = `Basic realm="Baremetal API"`
