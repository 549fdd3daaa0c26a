package httpapi

import (
	"context"
	"net/http"
	"regexp"

	"github.com/google/uuid"
	"sync"
)

// Request ids as Ironic hands them out: "req-<uuid>" in Openstack-Request-Id
// (Ironic up to 33.x; 21.4 answers only that) and X-Openstack-Request-Id
// (Ironic 34.0 on, through oslo.middleware's RequestId, which keeps the old
// name as a compat header). A valid id the client sends in
// X-Openstack-Request-Id is its global request id; the local one is always
// new.
const (
	hdrRequestID       = "Openstack-Request-Id"
	hdrRequestIDOslo   = "X-Openstack-Request-Id"
	requestIDPrefix    = "req-"
	globalRequestIDLen = len(requestIDPrefix) + 36
)

var globalRequestIDRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
})

type requestIDsKey struct{}

// RequestIDs are the ids of the request a context belongs to.
type RequestIDs struct {
	Local  string // req-<uuid>, made by castiron
	Global string // the client's, when it sent a valid one
}

// RequestIDsOf returns the ids of the API request ctx belongs to (also in
// the conductor tasks the request started); zero outside a request.
func RequestIDsOf(ctx context.Context) RequestIDs {
	ids, _ := ctx.Value(requestIDsKey{}).(RequestIDs)
	return ids
}

// withRequestIDs gives r its ids and answers them in both headers.
func withRequestIDs(w http.ResponseWriter, r *http.Request) *http.Request {
	ids := RequestIDs{Local: requestIDPrefix + uuid.NewString()}
	if g := r.Header.Get(hdrRequestIDOslo); len(g) == globalRequestIDLen && globalRequestIDRE().MatchString(g) {
		ids.Global = g
	}
	h := w.Header()
	h.Set(hdrRequestID, ids.Local)
	h.Set(hdrRequestIDOslo, ids.Local)
	return r.WithContext(context.WithValue(r.Context(), requestIDsKey{}, ids))
}
