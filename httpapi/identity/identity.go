// Package identity says who a request comes from: the identity an
// authenticator finds (user, roles, scope), the errors that refuse a
// request (no or bad credentials: 401; identity service down: 503), and
// Keystone token validation as keystonemiddleware's auth_token does it.
package identity

import (
	"context"
	"errors"
	"net/http"

	"castiron/httpapi/policy"
)

// Identity is an authenticated caller.
type Identity struct {
	// User is the name shown in logs and the UI (node history records
	// the user id: Actor).
	User string
	policy.Creds
	// Unrestricted skips policy: Ironic enforces policy only with
	// auth_strategy keystone, so an htpasswd user without a users file may
	// do everything, as before.
	Unrestricted bool
}

// Actor is how node history names the caller: its user ID, as Ironic's
// node_history.user holds the request context's user_id (a Keystone
// user's ID; an http_basic user's name). The project goes in a column of
// its own.
func (id *Identity) Actor() string {
	if id.UserID != "" {
		return id.UserID
	}
	return id.User
}

// ErrUnauthenticated refuses a request without valid credentials (401).
var ErrUnauthenticated = errors.New("The request you have made requires authentication.")

// UnavailableError is an identity service that cannot answer (503): the
// request is refused, never let in.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "identity service unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Identifier authenticates a request and says who made it.
type Identifier interface {
	// Identify returns the caller, or ErrUnauthenticated, or an
	// *UnavailableError.
	Identify(r *http.Request) (*Identity, error)
	// Challenge is the WWW-Authenticate header of a 401.
	Challenge() string
}

type key struct{}

// With tags ctx with the caller.
func With(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From is the caller ctx was tagged with; nil under noauth.
func From(ctx context.Context) *Identity {
	id, _ := ctx.Value(key{}).(*Identity)
	return id
}
