package appliance

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"castiron/ramdisk/trust"
)

// TestTLSSourceAuto: --tls-auto makes a CA, issues a certificate for the
// provisioning addresses and writes the bundle ramdisks trust; after
// `castiron tls rotate` the next handshake gets a certificate of the new CA
// and the bundle follows; without TLS no bundle is left behind.
func TestTLSSourceAuto(t *testing.T) {
	dir := t.TempDir()
	c := &serveConfig{dataDir: dir, listen: "0.0.0.0:6385", tlsAuto: true}
	site := provisioningSite{serverIP: netip.MustParseAddr("10.205.0.1"), serverIP6: netip.MustParseAddr("fd52:205::1")}
	ts, err := newTLSSource(c, site, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	verify := func(host string) error {
		cert, err := ts.get(nil) // first: a handshake takes up a rotation
		if err != nil {
			return err
		}
		bundle, err := trust.Bundle(dir)
		if err != nil {
			return err
		}
		pool, err := trust.Pool(bundle)
		if err != nil {
			return err
		}
		_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		return err
	}
	for _, h := range []string{"10.205.0.1", "fd52:205::1", "localhost"} {
		if err := verify(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	before, _ := trust.Bundle(dir)
	time.Sleep(10 * time.Millisecond)
	if err := TLS([]string{"rotate", "--data-dir", dir}); err != nil {
		t.Fatal(err)
	}
	ts.checked = time.Time{} // skip the wait between checks
	if err := verify("10.205.0.1"); err != nil {
		t.Errorf("after rotation: %v", err)
	}
	if after, _ := trust.Bundle(dir); bytes.Equal(before, after) {
		t.Error("bundle unchanged by the rotation")
	}

	c.tlsAuto = false
	if ts, err := newTLSSource(c, site, slog.New(slog.DiscardHandler)); ts != nil || err != nil {
		t.Fatalf("without TLS: %v %v", ts, err)
	}
	if _, err := os.Stat(trust.BundlePath(dir)); !os.IsNotExist(err) {
		t.Errorf("bundle left behind without TLS: %v", err)
	}
}
