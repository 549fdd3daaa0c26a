package appliance

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"castiron/ramdisk/trust"
)

// caCheckEvery bounds how often a handshake looks for a rotated CA.
const caCheckEvery = 2 * time.Second

// tlsSource serves castiron's certificate on the API and provisioning
// listeners: the operator's (--tls-cert/--tls-key), or one castiron's own CA
// issues at start (--tls-auto) and again after `castiron tls rotate`. It
// keeps the CA bundle ramdisks trust at trust.BundlePath(data dir).
type tlsSource struct {
	dataDir string
	hosts   []string
	log     *slog.Logger
	auto    bool

	mu      sync.Mutex
	cert    *tls.Certificate
	caMod   time.Time
	checked time.Time
}

// tlsEnabled says whether serve speaks TLS.
func tlsEnabled(c *serveConfig) bool { return c.tlsCert != "" || c.tlsKey != "" || c.tlsAuto }

// newTLSSource loads or makes the certificate; nil without TLS (and then no
// bundle is left in the data dir: a ramdisk built with one would refuse
// castiron's plain HTTP).
func newTLSSource(c *serveConfig, site provisioningSite, log *slog.Logger) (*tlsSource, error) {
	if !tlsEnabled(c) {
		if err := os.Remove(trust.BundlePath(c.dataDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, nil
	}
	s := &tlsSource{dataDir: c.dataDir, hosts: certHosts(c, site), log: log, auto: c.tlsCert == "" && c.tlsKey == ""}
	if !s.auto {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		caFile := c.tlsCA
		if caFile == "" {
			caFile = c.tlsCert // self-signed, or the chain up to its CA
		}
		bundle, err := os.ReadFile(caFile)
		if err == nil {
			err = trust.WriteBundle(c.dataDir, bundle)
		}
		if err != nil {
			return nil, fmt.Errorf("CA bundle for the ramdisk (--tls-ca) %s: %w", caFile, err)
		}
		s.cert = &cert
		return s, nil
	}
	if err := s.issue(); err != nil {
		return nil, err
	}
	return s, nil
}

// issue (re)loads the CA, issues a certificate for the hosts and writes
// the bundle.
func (s *tlsSource) issue() error {
	ca, err := trust.OpenAuthority(s.dataDir)
	if err != nil {
		return fmt.Errorf("castiron CA: %w", err)
	}
	cert, err := ca.Issue(s.hosts)
	if err != nil {
		return fmt.Errorf("castiron CA: %w", err)
	}
	if err := trust.WriteBundle(s.dataDir, ca.CertPEM()); err != nil {
		return err
	}
	s.cert, s.caMod = &cert, ca.ModTime
	s.log.Info("TLS certificate issued by castiron's CA", "hosts", s.hosts, "ca_sha256", fingerprint(ca.CertPEM()),
		"bundle", trust.BundlePath(s.dataDir))
	return nil
}

// config is the servers' TLS configuration.
func (s *tlsSource) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.get}
}

func (s *tlsSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.auto && time.Since(s.checked) >= caCheckEvery {
		s.checked = time.Now()
		if mod := trust.CAModTime(s.dataDir); !mod.IsZero() && !mod.Equal(s.caMod) {
			if err := s.issue(); err != nil {
				s.log.Error("rotated CA not taken up; serving the previous certificate", "err", err)
			}
		}
	}
	return s.cert, nil
}

// bundle is the current CA bundle (for the iPXE overlay).
func (s *tlsSource) bundle() ([]byte, error) { return trust.Bundle(s.dataDir) }

// certHosts are the names and addresses castiron's own certificate covers:
// the provisioning addresses, the listen address, the public URL's host,
// this host's name and loopback.
func certHosts(c *serveConfig, site provisioningSite) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	add := func(h string) {
		if h == "" {
			return
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return
		}
		for _, have := range hosts {
			if have == h {
				return
			}
		}
		hosts = append(hosts, h)
	}
	if site.serverIP.IsValid() {
		add(site.serverIP.String())
	}
	if site.serverIP6.IsValid() {
		add(site.serverIP6.String())
	}
	if h, _, err := net.SplitHostPort(c.listen); err == nil {
		add(h)
	}
	if u, err := url.Parse(c.pxe.publicURL); err == nil {
		add(u.Hostname())
	}
	if h, err := os.Hostname(); err == nil {
		add(h)
	}
	return hosts
}

// fingerprint is the SHA-256 of the first certificate of a PEM bundle.
func fingerprint(bundle []byte) string {
	b, _ := pem.Decode(bundle)
	if b == nil {
		return ""
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return ""
	}
	sum := sha256.Sum256(b.Bytes)
	return hex.EncodeToString(sum[:])
}

// TLS is `castiron tls rotate [--data-dir DIR]`: a new CA replaces
// castiron's own (--tls-auto). A running castiron takes it up at its next
// handshake; ramdisks booted through iPXE get it with their next boot, an
// initramfs or ISO with the CA built in must be rebuilt.
func TLS(args []string) error {
	if len(args) == 0 || args[0] != "rotate" {
		return errors.New("usage: castiron tls rotate [--data-dir DIR]")
	}
	fs := flag.NewFlagSet("tls rotate", flag.ContinueOnError)
	dataDir := fs.String("data-dir", envOr("CASTIRON_DATA_DIR", "./castiron-data"), "castiron's data directory")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := trust.RotateAuthority(*dataDir); err != nil {
		return err
	}
	ca, err := trust.OpenAuthority(*dataDir)
	if err != nil {
		return err
	}
	fmt.Printf("new castiron CA in %s (sha256 %s)\n", *dataDir, fingerprint(ca.CertPEM()))
	return nil
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}
