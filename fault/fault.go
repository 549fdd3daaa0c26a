// Package fault holds the few typed errors that cross package boundaries.
// httpapi maps each Kind to one HTTP status in one place; storage, engine and
// drivers only say which kind of failure happened.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the API.
type Kind int

const (
	// Internal is anything unexpected (HTTP 500).
	Internal Kind = iota
	// Invalid is bad input or a request that is wrong for the current state (400).
	Invalid
	// Forbidden is a request refused by policy, e.g. a protected node (403).
	Forbidden
	// NotFound is an unknown resource (404).
	NotFound
	// MethodNotAllowed is a verb the resource does not take (405).
	MethodNotAllowed
	// NotAcceptable is a microversion too low for a field or endpoint (406).
	NotAcceptable
	// Conflict is a duplicate or a resource in use (409).
	Conflict
	// NodeLocked is a node reserved by a running task (409).
	NodeLocked
	// Unavailable is a temporary refusal, e.g. no conductor (503).
	Unavailable
	// NotImplemented is a capability castiron does not serve yet (it answers 400
	// with a clear message rather than pretending to work).
	NotImplemented
	// TooLarge is a request body over the cap (413).
	TooLarge
	// StorageFull is a write refused because castiron's database has no
	// space left on its disk (503): nothing of it was written, reads go on,
	// writes succeed again once space is freed.
	StorageFull
)

// Error is a classified error with an operator-facing message.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // optional cause
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// FaultKind implements Classified.
func (e *Error) FaultKind() Kind { return e.Kind }

// Classified is an error that knows its kind: *Error, and the neutral errors
// of lower layers (storage's "duplicate", "not found", ...), which engine
// words as Ironic does.
type Classified interface {
	error
	FaultKind() Kind
}

// New makes a classified error with a formatted message.
func New(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Wrap classifies err, keeping it as the cause.
func Wrap(k Kind, err error, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: err}
}

// KindOf reports the kind of err; unclassified errors are Internal.
func KindOf(err error) Kind {
	var c Classified
	if errors.As(err, &c) {
		return c.FaultKind()
	}
	return Internal
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Helpers for the common messages, worded as Ironic words them.

// NodeNotFound is Ironic's NodeNotFound message.
func NodeNotFound(ident string) error {
	return New(NotFound, "Node %s could not be found.", ident)
}

// PortNotFound is Ironic's PortNotFound message.
func PortNotFound(ident string) error {
	return New(NotFound, "Port %s could not be found.", ident)
}

// Locked is Ironic's NodeLocked message.
func Locked(node, host string) error {
	return New(NodeLocked, "Node %s is locked by host %s, please retry after the current operation is completed.", node, host)
}

// InvalidState is Ironic's InvalidStateRequested message.
func InvalidState(action, node, state string) error {
	return New(Invalid, "The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", action, node, state)
}

// NoSpace is the error of a write refused for want of disk space (the
// database's file system is full), with err as its cause.
func NoSpace(err error) error {
	return &Error{Kind: StorageFull, Err: err,
		Msg: "castiron cannot store this change: the disk of its database is full. Nothing was changed; reads still work. Free space on the data directory's file system and retry."}
}
