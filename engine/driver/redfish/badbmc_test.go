package redfish

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/redfish/redfishfake"
	"castiron/fault"
)

// Each bad BMC gives one clear error, quickly, never a hang. Timings are
// logged, not asserted beyond generous bounds that only a hang would break.

func TestBadBMCWrongPassword(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	for _, auth := range []string{"auto", "session", "basic"} {
		start := time.Now()
		err := d.Verify(ctxT(t, 10*time.Second), b.Node(map[string]any{"redfish_password": "nope", "redfish_auth_type": auth}))
		if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "redfish_password") {
			t.Fatalf("%s: %v", auth, err)
		}
		t.Logf("%s: %v after %v", auth, err, time.Since(start))
	}
	if b.LiveSessions() != 0 {
		t.Fatalf("a refused login left a session")
	}
}

func TestBadBMCUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	d := newTestDriver(t, Config{})
	n := driver.Node{UUID: "7265646a-0000-4000-8000-000000000001", DriverInfo: map[string]any{
		"redfish_address": "http://" + addr, "redfish_username": "u", "redfish_password": "p"}}
	start := time.Now()
	err = d.Verify(ctxT(t, 10*time.Second), n)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("refused connection took %v", took)
	}
	t.Logf("%v after %v", err, time.Since(start))
}

func TestBadBMCSelfSignedCertificate(t *testing.T) {
	b := redfishfake.Start(t, "idrac9", true)
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	ctx := ctxT(t, 10*time.Second)
	// Verification is on by default.
	err := d.Verify(ctx, b.Node(map[string]any{"redfish_verify_ca": nil}))
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "redfish_verify_ca") {
		t.Fatalf("self-signed certificate, verification on: %v", err)
	}
	t.Logf("%v", err)
	if err := d.Verify(ctx, b.Node(map[string]any{"redfish_verify_ca": "false"})); err != nil {
		t.Fatalf("verification off: %v", err)
	}
	// The BMC's CA as a file, then as a directory.
	dir := t.TempDir()
	ca := filepath.Join(dir, "bmc-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ca, dir} {
		if err := d.Verify(ctx, b.Node(map[string]any{"redfish_verify_ca": path})); err != nil {
			t.Fatalf("CA %s: %v", path, err)
		}
	}
	// A CA that is not the BMC's: a certificate of our own making.
	other := filepath.Join(t.TempDir(), "other.pem")
	if err := os.WriteFile(other, otherCA(t), 0o600); err != nil {
		t.Fatal(err)
	}
	err = d.Verify(ctx, b.Node(map[string]any{"redfish_verify_ca": other}))
	if !errors.Is(err, ErrUntrusted) {
		t.Fatalf("a CA that did not sign the BMC's certificate: %v, want untrusted", err)
	}
}

// otherCA is a self-signed CA certificate (PEM) that signed nothing the
// fake BMC serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: "not the BMC's CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestBadBMCUnknownSystem(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	ctx := ctxT(t, 10*time.Second)
	for _, id := range []string{"/redfish/v1/Systems/nope", "nope"} {
		err := d.Verify(ctx, b.Node(map[string]any{"redfish_system_id": id}))
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "check redfish_system_id") ||
			!strings.Contains(err.Error(), "/redfish/v1/Systems/nope") {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// Two systems and no redfish_system_id: say which exist.
	sys := b.Get("/redfish/v1/Systems")
	sys["Members"] = append(sys["Members"].([]any), map[string]any{"@odata.id": "/redfish/v1/Systems/2"})
	b.Mu.Lock()
	b.Res["/redfish/v1/Systems"] = sys
	b.Mu.Unlock()
	d2 := newTestDriver(t, Config{}) // nothing remembered of the BMC
	defer d2.Close(context.Background())
	err := d2.Verify(ctx, b.Node(nil))
	if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "manages 2 systems") {
		t.Fatalf("two systems: %v", err)
	}
}

func TestBadBMCServerError(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	b.Hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/redfish/v1/Systems/437XR1138R2" {
			redfishfake.Error(w, http.StatusInternalServerError, "Base.1.8.InternalError", "The request failed due to an internal service error.")
			return true
		}
		return false
	}
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	start := time.Now()
	_, err := d.PowerState(ctxT(t, 10*time.Second), b.Node(nil))
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "internal service error") {
		t.Fatalf("%v", err)
	}
	if n := b.Count("GET /redfish/v1/Systems/437XR1138R2"); n != 1 {
		t.Fatalf("a 500 is not retried: %d GETs", n)
	}
	t.Logf("%v after %v", err, time.Since(start))
}

func TestBadBMCHangs(t *testing.T) {
	b := redfishfake.Start(t, "dmtf-rackmount", false)
	b.Hook = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems") {
			<-r.Context().Done() // never answers
			return true
		}
		return false
	}
	d := newTestDriver(t, Config{RequestTimeout: 300 * time.Millisecond})
	defer d.Close(context.Background())
	start := time.Now()
	err := d.Verify(ctxT(t, 10*time.Second), b.Node(nil))
	took := time.Since(start)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("%v", err)
	}
	if took > 3*time.Second {
		t.Fatalf("a hanging BMC held the call %v", took)
	}
	t.Logf("%v after %v", err, took)

	// A TCP peer that accepts and never speaks TLS: the handshake timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	d2 := newTestDriver(t, Config{ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 10 * time.Second})
	start = time.Now()
	err = d2.Verify(ctxT(t, 10*time.Second), driver.Node{UUID: "x", DriverInfo: map[string]any{"redfish_address": ln.Addr().String(), "redfish_username": "u"}})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "no TLS handshake within 300ms") || time.Since(start) > 3*time.Second {
		t.Fatalf("silent TLS peer: %v after %v", err, time.Since(start))
	}
	t.Logf("silent TLS peer: %v after %v", err, time.Since(start))
}

func TestBusyBMCRetried(t *testing.T) {
	b := redfishfake.Start(t, "idrac9", false)
	var busy atomic.Int32
	busy.Store(2)
	b.Hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "ComputerSystem.Reset") && busy.Add(-1) >= 0 {
			code := http.StatusServiceUnavailable
			if busy.Load() == 0 {
				code = http.StatusConflict
				w.Header().Set("Retry-After", "0")
			}
			redfishfake.Error(w, code, "IDRAC.2.8.SYS518", "iDRAC is not ready. The configuration values cannot be accessed.")
			return true
		}
		return false
	}
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	ctx := ctxT(t, 10*time.Second)
	n := b.Node(nil)
	if err := d.SetPowerState(ctx, n, driver.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := b.Count("POST /redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset"); got != 3 {
		t.Fatalf("503, 409, then 204: %d POSTs", got)
	}
	// Busy for good: bounded by Retries, and the BMC's words kept.
	busy.Store(1000)
	start := time.Now()
	err := d.SetPowerState(ctx, n, driver.PowerOff, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "SYS518") {
		t.Fatalf("%v", err)
	}
	t.Logf("%v after %v", err, time.Since(start))
}

func TestPowerTimeout(t *testing.T) {
	b := redfishfake.Start(t, "idrac9", false)
	b.Hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "ComputerSystem.Reset") {
			w.WriteHeader(http.StatusNoContent) // accepted, never done
			return true
		}
		return false
	}
	d := newTestDriver(t, Config{})
	defer d.Close(context.Background())
	start := time.Now()
	err := d.SetPowerState(ctxT(t, 10*time.Second), b.Node(nil), driver.PowerOn, 300*time.Millisecond)
	if !errors.Is(err, ErrPowerTimeout) || !strings.Contains(err.Error(), `(still "power off")`) {
		t.Fatalf("%v", err)
	}
	t.Logf("%v after %v", err, time.Since(start))
}
