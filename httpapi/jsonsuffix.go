package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"castiron/fault"
)

// Before API 1.91 Ironic served a path ending in ".json" as the path without
// it (its JsonExtensionMiddleware, kept from pecan's content-type guessing),
// and only when the request named a minor version below 91 in
// X-OpenStack-Ironic-API-Version: no header, "latest" or 1.91 and later take
// the path as it is.

type jsonSuffixKey struct{}

// stripJSONSuffix drops the ".json" of such a request's path and remembers
// that it did, for lookupWithSuffix.
func stripJSONSuffix(r *http.Request) *http.Request {
	p := strings.TrimRight(r.URL.Path, "/")
	if !strings.HasSuffix(p, ".json") {
		return r
	}
	_, minor, ok := strings.Cut(strings.TrimSpace(r.Header.Get(hdrVersion)), ".")
	if m, err := strconv.Atoi(minor); !ok || err != nil || m <= 0 || m >= 91 {
		return r
	}
	r = r.WithContext(context.WithValue(r.Context(), jsonSuffixKey{}, true))
	r.URL.Path = strings.TrimSuffix(p, ".json")
	if r.URL.RawPath != "" {
		r.URL.RawPath = strings.TrimSuffix(strings.TrimRight(r.URL.RawPath, "/"), ".json")
	}
	return r
}

// lookupWithSuffix is Ironic's _get_with_suffix: get(ident), and when the
// request's ".json" was dropped and nothing has that name, get(ident+".json").
func lookupWithSuffix[T any](r *http.Request, ident string, get func(context.Context, string) (T, error)) (T, error) {
	v, err := get(r.Context(), ident)
	if err != nil && fault.Is(err, fault.NotFound) {
		if stripped, _ := r.Context().Value(jsonSuffixKey{}).(bool); stripped {
			if v2, err2 := get(r.Context(), ident+".json"); err2 == nil {
				return v2, nil
			}
		}
	}
	return v, err
}

// identWithSuffix is lookupWithSuffix for handlers that hand the path value
// on (node PATCH and DELETE): it becomes ident+".json" when only that
// exists.
func identWithSuffix[T any](r *http.Request, name string, get func(context.Context, string) (T, error)) {
	if stripped, _ := r.Context().Value(jsonSuffixKey{}).(bool); !stripped {
		return
	}
	ident := r.PathValue(name)
	if _, err := get(r.Context(), ident); err != nil && fault.Is(err, fault.NotFound) {
		if _, err := get(r.Context(), ident+".json"); err == nil {
			r.SetPathValue(name, ident+".json")
		}
	}
}
