package keystone

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Start runs a stub on a loopback port for the rest of the test and returns
// it with its URL set.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.SetURL(srv.URL)
	return s
}

// StartGuard runs a Guard in front of next on a loopback port for the rest
// of the test, points the catalog's baremetal endpoint at it, and returns
// it with its URL.
func (s *Server) StartGuard(t testing.TB, next http.Handler) (*Guard, string) {
	t.Helper()
	g := s.Guard(next)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	s.SetEndpoint("baremetal", srv.URL)
	return g, srv.URL
}
