package trust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Lifetimes of what the Authority makes. A server certificate is issued at
// every start (and after a rotation), so it can be short; the CA lives
// until it is rotated, as long as the ramdisks that carry it.
const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	serverLifetime = 365 * 24 * time.Hour
)

// Authority is castiron's own CA for --tls-auto: DATA-DIR/tls/ca.pem and
// ca.key (ECDSA P-256), made on first use.
type Authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	// ModTime is ca.pem's modification time when loaded: a rotation
	// changes it.
	ModTime time.Time
}

func caPaths(dataDir string) (certPath, keyPath string) {
	dir := filepath.Join(dataDir, "tls")
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
}

// CAModTime is ca.pem's modification time (zero when there is none), for
// noticing a rotation cheaply.
func CAModTime(dataDir string) time.Time {
	certPath, _ := caPaths(dataDir)
	st, err := os.Stat(certPath)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// OpenAuthority loads the data dir's CA, making one when there is none.
func OpenAuthority(dataDir string) (*Authority, error) {
	certPath, keyPath := caPaths(dataDir)
	a, err := loadAuthority(certPath, keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		if err := RotateAuthority(dataDir); err != nil {
			return nil, err
		}
		a, err = loadAuthority(certPath, keyPath)
	}
	return a, err
}

// RotateAuthority replaces the data dir's CA with a new one (key first,
// then certificate, each written atomically). Ramdisks that carry the old
// CA no longer trust castiron afterwards: the iPXE path hands every boot the
// current CA, an initramfs or ISO that has it built in must be rebuilt.
func RotateAuthority(dataDir string) error {
	certPath, keyPath := caPaths(dataDir)
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "castiron provisioning CA " + now.UTC().Format("2006-01-02T15:04:05Z")},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func loadAuthority(certPath, keyPath string) (*Authority, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", certPath, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("CA key %s is not ECDSA", keyPath)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", certPath)
	}
	st, err := os.Stat(certPath)
	if err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, certPEM: certPEM, ModTime: st.ModTime()}, nil
}

// CertPEM is the CA's certificate: the bundle ramdisks carry.
func (a *Authority) CertPEM() []byte { return a.certPEM }

// Issue makes a server certificate for hosts (IP addresses and DNS names),
// with the CA in its chain.
func (a *Authority) Issue(hosts []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	sn, err := serial()
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	notAfter := now.Add(serverLifetime)
	if a.cert.NotAfter.Before(notAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: "castiron"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// serial is a random 127-bit certificate serial number.
func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// WriteBundle writes the CA bundle ramdisks trust to BundlePath.
func WriteBundle(dataDir string, bundle []byte) error {
	if _, err := Pool(bundle); err != nil {
		return err
	}
	p := BundlePath(dataDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return writeAtomic(p, bundle, 0o644)
}

// writeAtomic replaces path by data (temp file, fsync, rename).
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
