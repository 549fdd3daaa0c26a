package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"castiron/engine"
	"castiron/fault"
)

// statuses is the one place fault kinds become HTTP statuses; any other
// kind is a 500.
var statuses = map[fault.Kind]int{
	fault.Invalid:          http.StatusBadRequest,
	fault.NotImplemented:   http.StatusBadRequest,
	fault.Forbidden:        http.StatusForbidden,
	fault.NotFound:         http.StatusNotFound,
	fault.MethodNotAllowed: http.StatusMethodNotAllowed,
	fault.NotAcceptable:    http.StatusNotAcceptable,
	fault.Conflict:         http.StatusConflict,
	fault.NodeLocked:       http.StatusConflict,
	fault.TooLarge:         http.StatusRequestEntityTooLarge,
	fault.Unavailable:      http.StatusServiceUnavailable,
	fault.StorageFull:      http.StatusServiceUnavailable,
}

func statusOf(k fault.Kind) int {
	if s, ok := statuses[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// faultBody is Ironic's error body: a JSON document inside a JSON string.
// It is built with Python's separators so that it is byte-identical to
// Ironic's for clients that show it raw.
func faultBody(faultcode, msg string) []byte {
	inner := `{"faultcode": ` + jsonString(faultcode) + `, "faultstring": ` + jsonString(msg) + `, "debuginfo": null}`
	return []byte(`{"error_message": ` + jsonString(inner) + `}`)
}

// codeBody is the other shape Ironic uses, for routing and version errors.
func codeBody(code int, desc string) []byte {
	inner := `{"code": ` + strconv.Itoa(code) + `, "title": ` + jsonString(http.StatusText(code)) + `, "description": ` + jsonString(desc) + `}`
	return []byte(`{"error_message": ` + jsonString(inner) + `}`)
}

// jsonString encodes s as a JSON string without HTML escaping (as Python).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers err with Ironic's body and the status of its kind.
// Unclassified errors are logged and answered 500 without their text.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		// The client went away (or the server is stopping) mid-request:
		// nobody reads an answer, and it is not castiron's failure. 499
		// is nginx's "client closed request", for the access log only.
		slog.InfoContext(r.Context(), "request abandoned by the client", "method", r.Method, "path", r.URL.Path, "err", err)
		writeRaw(w, 499, faultBody("Client", "The client closed the request."))
		return
	}
	err = engine.Word(err)
	k := fault.KindOf(err)
	status := statusOf(k)
	msg := err.Error()
	code := "Client"
	if status >= 500 {
		code = "Server"
		var fe *fault.Error
		if !errors.As(err, &fe) {
			slog.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
			msg = "An internal error occurred; see the castiron log."
		}
	}
	writeRaw(w, status, faultBody(code, msg))
}

func errInvalid(format string, args ...any) error { return fault.New(fault.Invalid, format, args...) }

func errNotAcceptable() error {
	return fault.New(fault.NotAcceptable, "Request not acceptable.")
}

// notFoundResource is Ironic's answer for an endpoint hidden by the version.
func notFoundResource() error {
	return fault.New(fault.NotFound, "Resource could not be found.")
}

func errDriverNotFound(name string) error {
	return fault.New(fault.NotFound, "Could not find the following driver(s) or hardware type(s): %s.", name)
}

// errNotImplemented marks an Ironic endpoint castiron does not serve yet: a
// clear 4xx instead of pretending.
func errNotImplemented(what string) error {
	return fault.New(fault.NotImplemented, "%s is not implemented by castiron yet.", what)
}
