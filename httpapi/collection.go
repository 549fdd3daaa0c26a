package httpapi

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"castiron/fault/pyrepr"
)

// collResourcePath is the request path without "/v1/" (or the bookmark's "/").
func collResourcePath(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/")
	p = strings.TrimPrefix(p, "v1/")
	return strings.TrimSuffix(p, "/")
}

// collWithQuery returns a copy of r whose query has key set to value, for
// handing a sub-resource list (/v1/chassis/{id}/nodes) to the list handler
// of the resource with that filter.
func collWithQuery(r *http.Request, key, value string) *http.Request {
	r2 := r.Clone(r.Context())
	q := r2.URL.Query()
	q.Set(key, value)
	r2.URL.RawQuery = q.Encode()
	return r2
}

// argUUIDLike is oslo's uuidutils.is_uuid_like.
func argUUIDLike(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil
}

// argLogicalName is Ironic's utils.is_valid_logical_name: RFC 3986
// unreserved characters, at most 255.
func argLogicalName(s string) bool {
	return len(s) <= 255 && nameRE().MatchString(s)
}

// argBool is Ironic's args.boolean (strutils.bool_from_string, strict).
func argBool(name string, v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if b, ok := pyrepr.BoolFromString(t); ok {
			return b, nil
		}
	}
	return false, errInvalid("Invalid %s: Unrecognized value %s, acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", name, pyrepr.Repr(v))
}

// collDetailParam reads ?detail= of a collection as Ironic's
// get_request_return_fields: before 1.43 it is refused with a 400.
func collDetailParam(r *http.Request) (bool, bool, error) {
	qs := r.URL.Query()
	if !qs.Has("detail") {
		return false, false, nil
	}
	b, err := argBool("detail", qs.Get("detail"))
	if err != nil {
		return false, false, err
	}
	if !versionOf(r).AtLeast(43) {
		return false, false, errInvalid("Invalid query parameter ?detail=%s received.", pyrepr.Repr(b))
	}
	return b, true, nil
}

// collMarkerParam checks ?marker= is a UUID (Ironic's args.uuid).
func collMarkerParam(r *http.Request) error {
	if m := r.URL.Query().Get("marker"); m != "" && !argUUIDLike(m) {
		return errInvalid("Expected UUID for marker: %s", m)
	}
	return nil
}

// jsvLogicalName is Ironic's is_valid_logical_name on a decoded JSON value.
func jsvLogicalName(v any) bool {
	s, ok := v.(string)
	return ok && argLogicalName(s)
}
