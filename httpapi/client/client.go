// Package client is a small typed client for the public OpenStack Ironic /v1
// REST API. It uses nothing castiron-specific, so everything built on it also
// works against a real Ironic endpoint.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxMinor is the newest microversion this client speaks (1.MaxMinor).
const MaxMinor = 89

const (
	hdrVersion    = "X-OpenStack-Ironic-API-Version"
	hdrMaxVersion = "X-OpenStack-Ironic-API-Maximum-Version"
)

// Config says where the API is and how to authenticate.
type Config struct {
	URL      string // e.g. http://127.0.0.1:6385 (with or without /v1)
	User     string // http_basic user; empty: no auth (noauth)
	Password string
	HTTP     *http.Client // nil: a client with a 60 s timeout
}

// Client talks to one Ironic endpoint at a negotiated microversion.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing /v1
	user  string
	pass  string
	http  *http.Client
	minor int
}

// New negotiates the microversion with the server: min(server max, MaxMinor).
func New(ctx context.Context, cfg Config) (*Client, error) {
	base := strings.TrimRight(cfg.URL, "/")
	base = strings.TrimSuffix(base, "/v1")
	if _, err := url.Parse(base); err != nil || base == "" {
		return nil, fmt.Errorf("invalid API URL %q", cfg.URL)
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	c := &Client{base: base, user: cfg.User, pass: cfg.Password, http: hc, minor: 1}
	max, err := c.serverMaxMinor(ctx)
	if err != nil {
		return nil, err
	}
	c.minor = min(max, MaxMinor)
	return c, nil
}

// Minor is the negotiated microversion 1.Minor.
func (c *Client) Minor() int { return c.minor }

// Version is the negotiated microversion as "1.N".
func (c *Client) Version() string { return "1." + strconv.Itoa(c.minor) }

// serverMaxMinor reads the server's newest microversion from GET /v1: the
// X-OpenStack-Ironic-API-Maximum-Version header, else the version document.
func (c *Client) serverMaxMinor(ctx context.Context) (int, error) {
	var doc struct {
		Version struct {
			Version string `json:"version"`
		} `json:"version"`
	}
	h, err := c.doVersion(ctx, "GET", "/v1", "", nil, &doc)
	if err != nil {
		return 0, fmt.Errorf("read API version from %s/v1: %w", c.base, err)
	}
	raw := h.Get(hdrMaxVersion)
	if raw == "" {
		raw = doc.Version.Version
	}
	maj, minor, ok := strings.Cut(raw, ".")
	n, err := strconv.Atoi(minor)
	if !ok || maj != "1" || err != nil {
		return 0, fmt.Errorf("%s/v1 announces no usable maximum API version (got %q)", c.base, raw)
	}
	return n, nil
}

// do sends one request at the negotiated version and decodes a JSON answer
// into out (if non-nil). Non-2xx answers become *Error.
func (c *Client) do(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	return c.doVersion(ctx, method, path, c.Version(), body, out)
}

func (c *Client) doVersion(ctx context.Context, method, path, ver string, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if ver != "" {
		req.Header.Set(hdrVersion, ver)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.Header, err
	}
	if res.StatusCode >= 300 {
		return res.Header, decodeError(method, path, res.StatusCode, b)
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return res.Header, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return res.Header, nil
}

// listAll follows Ironic's "next" links until the collection is exhausted,
// calling add with each page's raw items.
func (c *Client) listAll(ctx context.Context, path, key string, add func(json.RawMessage) error) error {
	for path != "" {
		var page map[string]json.RawMessage
		if _, err := c.do(ctx, "GET", path, nil, &page); err != nil {
			return err
		}
		var items []json.RawMessage
		if err := json.Unmarshal(page[key], &items); err != nil {
			return fmt.Errorf("GET %s: %q is not a list", path, key)
		}
		for _, it := range items {
			if err := add(it); err != nil {
				return err
			}
		}
		path = ""
		var next string
		if raw, ok := page["next"]; ok && json.Unmarshal(raw, &next) == nil && next != "" && len(items) > 0 {
			u, err := url.Parse(next)
			if err != nil {
				return fmt.Errorf("bad next link %q", next)
			}
			// The link names the server as it sees itself; keep our base.
			p := u.Path
			if i := strings.Index(p, "/v1/"); i >= 0 {
				p = p[i:]
			}
			path = p + "?" + u.RawQuery
		}
	}
	return nil
}
