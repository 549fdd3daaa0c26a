package redfishsim

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault is one injected misbehaviour, for fault tests.
type Fault struct {
	Method string // "" : any
	Path   string // substring of the request path ("" : any)
	// Status answers this HTTP status with a Redfish error body (0: the
	// request is served normally after Delay).
	Status int
	// Delay holds the answer (beyond a client's timeout: a hanging BMC).
	Delay time.Duration
	// Drop closes the connection without an answer.
	Drop bool
	// RetryAfter sets the Retry-After header of a Status answer (seconds).
	RetryAfter int
	// Times is how many matching requests it hits (0: every one).
	Times int
}

type faultRule struct {
	Fault
	left int
	id   int
}

// InjectFault adds f; the returned func removes it.
func (s *Server) InjectFault(f Fault) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	r := &faultRule{Fault: f, left: f.Times, id: s.nextID}
	s.faults = append(s.faults, r)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.faults {
			if x.id == r.id {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
				return
			}
		}
	}
}

// matchFault finds the first rule for r and uses up one of its times.
func (s *Server) matchFault(r *http.Request) *faultRule {
	for i, f := range s.faults {
		if (f.Method != "" && f.Method != r.Method) || !strings.Contains(r.URL.Path, f.Path) {
			continue
		}
		if f.Times > 0 {
			f.left--
			if f.left <= 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		return f
	}
	return nil
}

// apply carries the fault out; true when it answered the request.
func (f *faultRule) apply(w http.ResponseWriter, r *http.Request) bool {
	if f.Delay > 0 && !sleep(r.Context(), f.Delay) {
		return true
	}
	if f.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return true
			}
		}
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	if f.Status == 0 {
		return false
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	redfishError(w, f.Status, "InternalError", "Injected fault: HTTP "+strconv.Itoa(f.Status)+" for "+r.Method+" "+r.URL.Path+".")
	return true
}
