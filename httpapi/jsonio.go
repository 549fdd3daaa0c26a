package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"castiron/engine"
	"castiron/fault"
	"castiron/fault/pyrepr"
)

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	writeRaw(w, status, body)
	return nil
}

// accepted answers Ironic's 202 (writeAccepted) unless err.
func accepted(w http.ResponseWriter, err error, location string) error {
	if err != nil {
		return err
	}
	writeAccepted(w, location)
	return nil
}

// writeAccepted is Ironic's 202: empty body, Location of the state resource.
func writeAccepted(w http.ResponseWriter, location string) {
	if location != "" {
		w.Header().Set("Location", location)
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
}

// readBody reads the whole (capped) body.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fault.New(fault.TooLarge, "Request body is larger than %d bytes.", tooBig.Limit)
	}
	return b, err
}

// decodeObject parses a JSON object body for resource; Ironic answers 500 to
// malformed JSON, castiron 400 with the parser's message.
func decodeObject(r *http.Request, resource string) (map[string]any, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(b)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errInvalid("Schema error for %s: %s is not of type 'object'", resource, pyrepr.Repr(v))
	}
	return normalizeNumbers(obj).(map[string]any), nil
}

// decodeString is decodeObject and the body's string key (nil when it is
// absent or null).
func decodeString(r *http.Request, resource, key string) (map[string]any, *string, error) {
	body, err := decodeObject(r, resource)
	if err != nil {
		return nil, nil, err
	}
	s, err := getString(body, key, resource)
	return body, s, err
}

// decodeAny parses any JSON body (a patch is a list).
func decodeAny(r *http.Request) (any, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	v, err := decodeJSON(b)
	if err != nil {
		return nil, err
	}
	return normalizeNumbers(v), nil
}

// decodeJSON parses one JSON value (numbers as json.Number).
func decodeJSON(b []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, errInvalid("Malformed JSON in request body: %v", err)
	}
	if dec.More() {
		return nil, errInvalid("Malformed JSON in request body: trailing data after the JSON value")
	}
	return v, nil
}

// normalizeNumbers turns json.Number into int64 where integral, else float64,
// so stored JSON keeps integers as integers.
func normalizeNumbers(v any) any { return engine.PlainNumbers(v) }

// Typed getters for decoded bodies; each returns a 400 with Ironic-like
// schema wording on a wrong type.

func getString(obj map[string]any, key, resource string) (*string, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errInvalid("Schema error for %s: %s is not of type 'string'", resource, pyrepr.Repr(v))
	}
	return &s, nil
}

func getBool(obj map[string]any, key, resource string) (*bool, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil, nil
	}
	switch t := v.(type) {
	case bool:
		return &t, nil
	case string:
		if b, err := strconv.ParseBool(t); err == nil {
			return &b, nil
		}
	}
	return nil, errInvalid("Schema error for %s: %s is not of type 'boolean'", resource, pyrepr.Repr(v))
}

func getStepList(obj map[string]any, key string) ([]map[string]any, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errInvalid("Invalid %s: %s is not of type 'array'", key, pyrepr.Repr(v))
	}
	out := make([]map[string]any, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, errInvalid("Invalid %s: %s is not of type 'object'", key, pyrepr.Repr(item))
		}
		out = append(out, m)
	}
	return out, nil
}
