// Package client is a small typed client for the public OpenStack Ironic /v1
// REST API. It uses nothing castiron-specific, so everything built on it also
// works against a real Ironic endpoint. Requests go through gophercloud v2,
// which speaks Keystone (password, application credential, token), HTTP
// basic or no auth (auth.go); cloudconfig turns the openstack CLI's options,
// OS_* variables and clouds.yaml into a Config.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
)

// MaxMinor is the newest microversion this client speaks (1.MaxMinor).
const MaxMinor = 89

const (
	hdrVersion    = "X-OpenStack-Ironic-API-Version"
	hdrMaxVersion = "X-OpenStack-Ironic-API-Maximum-Version"
)

// Client talks to one Ironic endpoint at a negotiated microversion. Every
// request goes through a gophercloud service client, which adds the
// credentials (a Keystone token, renewed when it expires, or HTTP basic).
type Client struct {
	sc    *gophercloud.ServiceClient
	base  string // scheme://host[:port][/prefix], no trailing /v1
	minor int
}

// New connects (authenticating first for Keystone auth types) and
// negotiates the microversion with the server: min(server max, MaxMinor).
func New(ctx context.Context, cfg Config) (*Client, error) {
	sc, err := serviceClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(strings.TrimRight(sc.Endpoint, "/"), "/v1")
	if u, err := url.Parse(base); err != nil || u.Host == "" {
		return nil, fmt.Errorf("invalid API URL %q", sc.Endpoint)
	}
	c := &Client{sc: sc, base: base, minor: 1}
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
	opts := &gophercloud.RequestOpts{
		// Ironic answers 200, 201, 202 or 204 as the verb goes; anything
		// else is an *Error below.
		OkCodes:          []int{200, 201, 202, 204},
		KeepResponseBody: true,
		MoreHeaders:      map[string]string{},
	}
	if body != nil {
		opts.JSONBody = body
	}
	if ver != "" {
		opts.MoreHeaders[hdrVersion] = ver
	}
	res, err := c.sc.Request(ctx, method, c.base+path, opts)
	if err != nil {
		var ue gophercloud.ErrUnexpectedResponseCode
		if errors.As(err, &ue) {
			return ue.ResponseHeader, decodeError(method, path, ue.Actual, ue.Body)
		}
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.Header, err
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
