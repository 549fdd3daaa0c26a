// Package fetch downloads an image over HTTP(S) as a stream that survives
// a dropped connection: it asks again from the byte it got to (a Range
// request), or, from a server that ignores ranges, downloads again and
// skips what it already delivered. The reader sees one unbroken stream, so
// a checksum of it is the checksum of the file.
package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"castiron/ramdisk/trust"
)

// Options tune a download.
type Options struct {
	// Client makes the requests (default: one with compression off, so
	// the bytes are the file's, and connect/header timeouts).
	Client *http.Client
	// Retries after a failed request or a broken transfer (default 3).
	Retries int
	// RetryDelay before the first retry, doubled each time (default 1s).
	RetryDelay time.Duration
	// IdleTimeout: a transfer that gets nothing for this long is broken
	// off and resumed (default 60s).
	IdleTimeout time.Duration
	// TLS, when set, is the only trust for downloads (castiron's CA): the
	// URL must be https and no redirect may leave HTTPS.
	TLS *tls.Config
	Log *slog.Logger
}

// HTTPError is a response other than 200 (or 206 to a range request).
type HTTPError struct {
	URL    string
	Status string
	Code   int
}

func (e *HTTPError) Error() string { return fmt.Sprintf("downloading %s: HTTP %s", e.URL, e.Status) }

// Body is the download as an io.ReadCloser.
type Body struct {
	ctx     context.Context
	url     string
	opts    Options
	resp    *http.Response
	cancel  context.CancelFunc // of the current request
	timer   *time.Timer        // idle watchdog of the current request
	size    int64              // Content-Length, -1 if unknown
	off     int64              // bytes delivered
	etag    string
	lastMod string
	retries int
	resumes int
	broken  error // why the transfer broke, to resume on the next Read
}

// NewClient is the default client: no transparent decompression, bounded
// connect and response-header waits, proxies from the environment.
func NewClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{Transport: tr}
}

// Open starts downloading url. It retries failed attempts (not 4xx
// answers) before giving up.
func Open(ctx context.Context, url string, o Options) (*Body, error) {
	if o.Client == nil {
		o.Client = NewClient()
	}
	if o.TLS != nil {
		if err := trust.RequireHTTPS(url); err != nil {
			return nil, fmt.Errorf("image URL: %w", err)
		}
		c := *o.Client
		trust.Strict(&c, o.TLS)
		o.Client = &c
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("image URL %q: only http and https are supported", url)
	}
	b := &Body{ctx: ctx, url: url, opts: o, size: -1}
	for {
		err := b.request(0)
		if err == nil {
			b.size = b.resp.ContentLength
			b.etag = b.resp.Header.Get("ETag")
			b.lastMod = b.resp.Header.Get("Last-Modified")
			return b, nil
		}
		if !b.retry(err) {
			return nil, err
		}
	}
}

// retry waits before another attempt, if err allows one.
func (b *Body) retry(err error) bool {
	var he *HTTPError
	if b.ctx.Err() != nil || (errors.As(err, &he) && he.Code >= 400 && he.Code < 500) || b.retries >= b.opts.Retries {
		return false
	}
	delay := b.opts.RetryDelay << b.retries
	b.retries++
	b.opts.Log.Warn("image download failed, retrying", "url", b.url, "offset", b.off, "error", err, "retry_in", delay)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.ctx.Done():
		return false
	}
}

// request sends a GET, from byte from on.
func (b *Body) request(from int64) error {
	b.closeResp()
	ctx, cancel := context.WithCancel(b.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		cancel()
		return err
	}
	if from > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(from, 10)+"-")
		if strings.HasPrefix(b.etag, `"`) { // strong validators only
			req.Header.Set("If-Range", b.etag)
		} else if b.lastMod != "" {
			req.Header.Set("If-Range", b.lastMod)
		}
	}
	timer := time.AfterFunc(b.opts.IdleTimeout, cancel)
	resp, err := b.opts.Client.Do(req)
	if err != nil {
		timer.Stop()
		cancel()
		if b.ctx.Err() != nil {
			return b.ctx.Err()
		}
		return fmt.Errorf("downloading %s: %w", b.url, err)
	}
	skip := int64(0)
	switch {
	case from > 0 && resp.StatusCode == http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != from {
			resp.Body.Close()
			timer.Stop()
			cancel()
			return fmt.Errorf("downloading %s: asked for bytes from %d, got %q", b.url, from, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		skip = from // the server sent it all again
	default:
		resp.Body.Close()
		timer.Stop()
		cancel()
		return &HTTPError{URL: b.url, Status: resp.Status, Code: resp.StatusCode}
	}
	b.resp, b.cancel, b.timer = resp, cancel, timer
	if skip > 0 {
		b.opts.Log.Info("server ignored the range request; downloading again from the start", "url", b.url, "skip", skip)
		if _, err := io.CopyN(io.Discard, b.watched(), skip); err != nil {
			return fmt.Errorf("downloading %s again: %w", b.url, err)
		}
	}
	return nil
}

// watched is the response body with the idle watchdog reset on progress.
func (b *Body) watched() io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		n, err := b.resp.Body.Read(p)
		if n > 0 {
			b.timer.Reset(b.opts.IdleTimeout)
		}
		return n, err
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func rangeStart(cr string) (int64, bool) {
	// "bytes 100-199/200"
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	dash := strings.IndexByte(rest, '-')
	if dash < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(rest[:dash], 10, 64)
	return n, err == nil
}

// Size is the Content-Length, or -1 when the server did not send one.
func (b *Body) Size() int64 { return b.size }

// Offset is the number of bytes delivered so far.
func (b *Body) Offset() int64 { return b.off }

// Resumes is how many times the transfer was resumed.
func (b *Body) Resumes() int { return b.resumes }

// Read delivers the next bytes, resuming the transfer when it breaks.
func (b *Body) Read(p []byte) (int, error) {
	for {
		err := b.broken
		b.broken = nil
		if err == nil {
			if b.resp == nil {
				return 0, errors.New("download closed")
			}
			var n int
			n, err = b.watched().Read(p)
			b.off += int64(n)
			switch {
			case err == nil:
				return n, nil
			case errors.Is(err, io.EOF) && (b.size < 0 || b.off == b.size):
				return n, io.EOF
			case errors.Is(err, io.EOF):
				err = io.ErrUnexpectedEOF
			}
			if b.ctx.Err() != nil {
				return n, b.ctx.Err()
			}
			if b.size >= 0 && b.off > b.size {
				return n, fmt.Errorf("downloading %s: got more than the %d bytes announced", b.url, b.size)
			}
			if n > 0 { // deliver what came; the next Read resumes
				b.broken = err
				return n, nil
			}
		}
		if !b.retry(err) {
			if b.ctx.Err() != nil {
				return 0, b.ctx.Err()
			}
			return 0, fmt.Errorf("downloading %s: %w after %d bytes", b.url, err, b.off)
		}
		b.resumes++
		b.opts.Log.Info("resuming image download", "url", b.url, "offset", b.off)
		if err := b.request(b.off); err != nil {
			b.broken = err
		}
	}
}

func (b *Body) closeResp() {
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.resp != nil {
		b.resp.Body.Close()
	}
	if b.cancel != nil {
		b.cancel()
	}
	b.resp, b.cancel, b.timer = nil, nil, nil
}

// Close ends the download.
func (b *Body) Close() error {
	b.closeResp()
	return nil
}

// Get downloads a small file whole (a config drive), at most limit bytes.
func Get(ctx context.Context, url string, limit int64, o Options) ([]byte, error) {
	b, err := Open(ctx, url, o)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	data, err := io.ReadAll(io.LimitReader(b, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", url, limit)
	}
	return data, nil
}
