// Package trusttest gives tests an HTTPS server whose certificate a fresh
// castiron CA issued, and the agent's TLS configuration trusting that CA.
package trusttest

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"castiron/ramdisk/trust"
)

// Server starts h on https://127.0.0.1:port with a certificate of a new CA
// (in a temp data dir) and returns it with the agent configuration that
// trusts that CA, as loaded from its bundle.
func Server(t testing.TB, h http.Handler) (*httptest.Server, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca, err := trust.OpenAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if err := trust.WriteBundle(dir, ca.CertPEM()); err != nil {
		t.Fatal(err)
	}
	cfg, err := trust.LoadAgentConfig(trust.BundlePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return srv, cfg
}
