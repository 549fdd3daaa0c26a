package redfish

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/schemas"
)

// maxBody bounds what one Redfish answer may hold; real ones are a few KiB.
const maxBody = 16 << 20

// conn is one operation's view of an endpoint: gofish's schemas.Client
// bound to the operation's context, so every resource gofish decodes and
// every action it posts runs under that context.
type conn struct {
	ep  *endpoint
	ctx context.Context
}

var _ schemas.Client = (*conn)(nil)

func (c *conn) GetSettings() schemas.ClientSettings { return schemas.ClientSettings{} }
func (c *conn) Get(u string) (*http.Response, error) {
	return c.do(http.MethodGet, u, nil, nil)
}
func (c *conn) GetWithHeaders(u string, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodGet, u, nil, h)
}
func (c *conn) Post(u string, p any) (*http.Response, error) {
	return c.do(http.MethodPost, u, p, nil)
}
func (c *conn) PostWithHeaders(u string, p any, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodPost, u, p, h)
}
func (c *conn) Patch(u string, p any) (*http.Response, error) {
	return c.do(http.MethodPatch, u, p, nil)
}
func (c *conn) PatchWithHeaders(u string, p any, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodPatch, u, p, h)
}
func (c *conn) Put(u string, p any) (*http.Response, error) {
	return c.do(http.MethodPut, u, p, nil)
}
func (c *conn) PutWithHeaders(u string, p any, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodPut, u, p, h)
}
func (c *conn) Delete(u string) (*http.Response, error) {
	return c.do(http.MethodDelete, u, nil, nil)
}
func (c *conn) DeleteWithHeaders(u string, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodDelete, u, nil, h)
}

// Multipart uploads (firmware) are not something this driver does.
func (c *conn) PostMultipart(u string, _ map[string]io.Reader) (*http.Response, error) {
	return nil, fmt.Errorf("redfish: multipart POST %s is not supported", u)
}
func (c *conn) PostMultipartWithHeaders(u string, _ map[string]io.Reader, _ map[string]string) (*http.Response, error) {
	return nil, fmt.Errorf("redfish: multipart POST %s is not supported", u)
}

// do sends one request with authentication and the driver's retry policy:
// a 401 on a session token logs in again and retries once; 503 (busy) and
// 409 (conflict: a BMC still settling after the previous action) are retried
// with exponential backoff, honouring Retry-After. The answer is read
// whole, so the per-request timeout can end before gofish decodes it.
func (c *conn) do(method, path string, payload any, headers map[string]string) (*http.Response, error) {
	var body []byte
	if rb, ok := payload.(rawBody); ok {
		// A body that is not JSON (a multipart firmware push).
		body = rb.data
		headers = map[string]string{"Content-Type": rb.contentType}
	} else if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, err
		}
		body = b
	}
	target := c.ep.url(path)
	cfg := c.ep.cfg
	delay := cfg.RetryDelay
	reauthed := false
	for attempt := 0; ; attempt++ {
		auth, err := c.ep.authorization(c.ctx)
		if err != nil {
			return nil, err
		}
		resp, data, err := c.roundTrip(method, target, body, headers, auth)
		if err != nil {
			return nil, c.ep.transportError(c.ctx, method, path, err)
		}
		switch code := resp.StatusCode; {
		case code >= 200 && code < 300 || code == http.StatusNotModified:
			resp.Body = io.NopCloser(bytes.NewReader(data))
			if code == http.StatusNotModified {
				return resp, schemas.ErrNotModified
			}
			return resp, nil
		case code == http.StatusUnauthorized && auth.token != "" && !reauthed:
			// The BMC dropped our session (timeout, BMC reboot, someone
			// deleted it): log in again once.
			reauthed = true
			if err := c.ep.relogin(c.ctx, auth.token); err != nil {
				return nil, err
			}
			continue
		case code == http.StatusUnauthorized && auth.basic && c.ep.auth == authAuto && !reauthed:
			// Basic authentication was the fallback after a login the
			// BMC refused, perhaps only for a moment (a 503 while it
			// booted); a BMC that refuses it has a session service after
			// all: log in again once, or this endpoint fails until evicted.
			reauthed = true
			c.ep.forgetBasic()
			continue
		case (code == http.StatusServiceUnavailable || code == http.StatusConflict) && attempt < cfg.Retries:
			wait := min(retryAfter(resp, delay), cfg.MaxRetryDelay)
			c.ep.log.DebugContext(c.ctx, "redfish: BMC busy, retrying", "bmc", c.ep.address, "method", method,
				"path", path, "status", code, "wait", wait, "attempt", attempt+1)
			t := time.NewTimer(wait)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return nil, c.ep.statusError(method, path, resp, data)
			case <-t.C:
			}
			delay = min(2*delay, cfg.MaxRetryDelay)
			continue
		default:
			return nil, c.ep.statusError(method, path, resp, data)
		}
	}
}

// rawBody is a request body sent as is, with its content type.
type rawBody struct {
	data        []byte
	contentType string
}

// roundTrip sends one request bounded by the per-request timeout and reads
// the answer whole.
func (c *conn) roundTrip(method, target string, body []byte, headers map[string]string, auth authHeader) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.ep.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	req.Header.Set("User-Agent", "castiron")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if k != "" {
			req.Header.Set(k, v)
		}
	}
	auth.apply(req)
	resp, err := c.ep.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, err
	}
	return resp, data, nil
}

// retryAfter is the Retry-After header in seconds, or def.
func retryAfter(resp *http.Response, def time.Duration) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	return def
}

// url resolves a resource path (or an absolute URL some BMCs put in
// @odata.id) against the BMC. gofish asks for the service root as
// /redfish/v1/; a non-default root prefix replaces it.
func (e *endpoint) url(path string) string {
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return path
	}
	if e.root != defaultRoot && strings.HasPrefix(path, defaultRoot) && (len(path) == len(defaultRoot) || path[len(defaultRoot)] == '/') {
		path = e.root + path[len(defaultRoot):]
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return e.base + path
}

// newHTTPClient builds the endpoint's HTTP client over the driver's
// transport for the endpoint's TLS settings: connection and TLS handshake
// bounded by ConnectTimeout, certificates verified unless
// redfish_verify_ca is false, against the CA file or directory it names.
func (d *Driver) newHTTPClient(inf *info) (*http.Client, error) {
	tr, err := d.transport(inf)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport: tr,
		// A BMC redirecting elsewhere would take our credentials along.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// maxIdleConns bounds the idle BMC connections kept over all BMCs of one
// TLS setting: a connection costs two goroutines and their buffers (~30
// KiB), so 10,000 BMCs each keeping theirs took castiron from 96 to 513
// MiB (bench/fleet, BMC=redfish); the least recently used is closed, and
// a read that finds none dials again (the session, a header, is kept).
const maxIdleConns = 256

// transport is the shared transport of the endpoints with inf's TLS
// settings (almost always one for the whole fleet), so that idle
// connections are bounded fleet-wide rather than per BMC.
func (d *Driver) transport(inf *info) (*http.Transport, error) {
	key := fmt.Sprintf("%t|%s", inf.verify, inf.caPath)
	d.transports.mu.Lock()
	defer d.transports.mu.Unlock()
	if tr, ok := d.transports.m[key]; ok {
		return tr, nil
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case inf.caPath != "":
		pool, err := loadCAs(inf.caPath)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = pool
	case !inf.verify:
		tlsCfg.InsecureSkipVerify = true //nolint:gosec // the operator asked for it (redfish_verify_ca=false)
	}
	dialer := &net.Dialer{Timeout: d.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   d.cfg.ConnectTimeout,
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       60 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	if d.transports.m == nil {
		d.transports.m = map[string]*http.Transport{}
	}
	d.transports.m[key] = tr
	return tr, nil
}

// loadCAs reads PEM certificates from a file, or from every file of a
// directory (as requests' verify=<dir> does).
func loadCAs(path string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("redfish_verify_ca: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("redfish_verify_ca: %w", err)
		}
		files = files[:0]
		for _, e := range entries {
			if !e.IsDir() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	found := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("redfish_verify_ca: %w", err)
		}
		found = pool.AppendCertsFromPEM(b) || found
	}
	if !found {
		return nil, fmt.Errorf("redfish_verify_ca: no PEM certificate in %s", path)
	}
	return pool, nil
}

// isTLSTrust reports a certificate the client refused to trust.
func isTLSTrust(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &ve)
}

// getJSON reads a resource into v (for the few reads gofish's typed
// resources do not cover: collections' member lists).
func getJSON(c *conn, path string, v any) error {
	resp, err := c.Get(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("Redfish BMC %s: %s is not valid JSON: %w", c.ep.address, path, err)
	}
	return nil
}
