package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error is a non-2xx answer: the HTTP status and Ironic's faultstring.
type Error struct {
	Method, Path string
	Status       int
	Fault        string // Ironic's faultstring (or the body when it has none)
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Fault)
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// decodeError reads the three error bodies Ironic sends: the usual
// {"error_message": "<JSON string with faultstring>"}, the same with an object
// instead of a string, and the version middleware's {"errors":[{...}]}; and
// Keystone's {"error": {"message": ...}}, which keystonemiddleware in front
// of Ironic also answers.
func decodeError(method, path string, status int, body []byte) error {
	e := &Error{Method: method, Path: path, Status: status, Fault: strings.TrimSpace(string(body))}
	var outer struct {
		ErrorMessage json.RawMessage `json:"error_message"`
		Errors       []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
		} `json:"errors"`
		Keystone *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &outer) != nil {
		return e
	}
	if outer.Keystone != nil && outer.Keystone.Message != "" {
		e.Fault = outer.Keystone.Message
		return e
	}
	if len(outer.Errors) > 0 {
		e.Fault = outer.Errors[0].Description
		if e.Fault == "" {
			e.Fault = outer.Errors[0].Title
		}
		return e
	}
	raw := outer.ErrorMessage
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
		e.Fault = s
	}
	var inner struct {
		Faultstring string `json:"faultstring"`
		Description string `json:"description"`
	}
	if json.Unmarshal(raw, &inner) == nil {
		switch {
		case inner.Faultstring != "":
			e.Fault = inner.Faultstring
		case inner.Description != "":
			e.Fault = inner.Description
		}
	}
	return e
}
