// Package trust is what lets castiron's ramdisk agent tell castiron from
// anything else answering on the provisioning network: the CA bundle the
// ramdisk carries (in the initramfs, as an extra initrd iPXE loads, or on a
// virtual-media ISO), the agent's side of loading it, and castiron's own
// CA for --tls-auto (made on first use, kept in the data dir, rotated on
// request).
package trust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
)

// AgentCAPath is where the ramdisk holds the CA bundle. Its presence turns
// TLS on in the agent: castiron must then be reached over HTTPS with a
// certificate this bundle vouches for, and plain HTTP is refused (the API,
// the inspection callback and image downloads alike).
const AgentCAPath = "/etc/castiron/ca.pem"

// BundlePath is the CA bundle ramdisks trust, as castiron serve keeps it in
// its data dir while TLS is on: the generated CA (--tls-auto) or the
// operator's (--tls-ca, else the --tls-cert chain). An ISO or initramfs
// builder puts this file at AgentCAPath.
func BundlePath(dataDir string) string { return filepath.Join(dataDir, "tls", "ca-bundle.pem") }

// Bundle reads BundlePath; fs.ErrNotExist when castiron runs without TLS.
func Bundle(dataDir string) ([]byte, error) { return os.ReadFile(BundlePath(dataDir)) }

// ErrNoCertificates: a bundle holds no PEM certificate.
var ErrNoCertificates = errors.New("no PEM certificates")

// Pool parses a PEM bundle.
func Pool(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, ErrNoCertificates
	}
	return pool, nil
}

// LoadAgentConfig is the agent's TLS client configuration from the bundle
// at path: nil (and no error) when there is none, i.e. TLS is off.
func LoadAgentConfig(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", path, err)
	}
	pool, err := Pool(b)
	if err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", path, err)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ErrPlainHTTP is the agent's refusal of a plain-HTTP URL once a CA is set.
var ErrPlainHTTP = errors.New("refusing plain HTTP: this ramdisk trusts castiron's CA and talks to castiron over HTTPS only")

// RequireHTTPS refuses anything but an https URL (ErrPlainHTTP, wrapped
// with the URL).
func RequireHTTPS(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err == nil && u.Scheme == "https" && u.Host != "" {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrPlainHTTP, rawURL)
}

// Strict makes client trust only cfg's CA and never follow a redirect away
// from HTTPS: a rogue answer must not take the agent anywhere castiron's
// certificate does not vouch for. The client gets its own copy of its
// transport (an *http.Transport; any other is replaced by a default one).
func Strict(client *http.Client, cfg *tls.Config) {
	tr, ok := client.Transport.(*http.Transport)
	if ok {
		tr = tr.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
	}
	tr.TLSClientConfig = cfg.Clone()
	client.Transport = tr
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return RequireHTTPS(req.URL.String())
	}
}
