package trust

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAuthority(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "tls", "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", st, err)
	}
	again, err := OpenAuthority(dir)
	if err != nil || !bytes.Equal(again.CertPEM(), a.CertPEM()) {
		t.Fatalf("reopened CA differs: %v", err)
	}
	pool, err := Pool(a.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := a.Issue([]string{"10.205.0.1", "fd52:205::1", "castiron.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"10.205.0.1", "fd52:205::1", "castiron.example"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.205.0.2"}); err == nil {
		t.Error("certificate valid for an address it was not issued for")
	}

	// Rotation: a new CA; what the old one issued is not trusted by it.
	before := CAModTime(dir)
	time.Sleep(10 * time.Millisecond)
	if err := RotateAuthority(dir); err != nil {
		t.Fatal(err)
	}
	rotated, err := OpenAuthority(dir)
	if err != nil || bytes.Equal(rotated.CertPEM(), a.CertPEM()) || !CAModTime(dir).After(before) {
		t.Fatalf("rotation did not replace the CA: %v", err)
	}
	newPool, _ := Pool(rotated.CertPEM())
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: newPool, DNSName: "10.205.0.1"}); err == nil {
		t.Error("the rotated CA trusts a certificate of the old one")
	}
}

func TestBundleAndAgentConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := Bundle(dir); !os.IsNotExist(err) {
		t.Fatalf("no bundle yet: %v", err)
	}
	if cfg, err := LoadAgentConfig(filepath.Join(dir, "absent.pem")); cfg != nil || err != nil {
		t.Fatalf("absent bundle: %v %v (TLS must simply be off)", cfg, err)
	}
	if err := WriteBundle(dir, []byte("not a certificate")); err == nil {
		t.Fatal("garbage bundle written")
	}
	a, err := OpenAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteBundle(dir, a.CertPEM()); err != nil {
		t.Fatal(err)
	}
	if b, err := Bundle(dir); err != nil || !bytes.Equal(b, a.CertPEM()) {
		t.Fatalf("bundle %q %v", b, err)
	}
	cfg, err := LoadAgentConfig(BundlePath(dir))
	if err != nil || cfg == nil || cfg.RootCAs == nil {
		t.Fatalf("agent config %v %v", cfg, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("junk"), 0o644)
	if _, err := LoadAgentConfig(bad); err == nil {
		t.Fatal("junk bundle accepted")
	}
}
