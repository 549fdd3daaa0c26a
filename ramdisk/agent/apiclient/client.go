// Package apiclient talks to castiron's (Ironic's) ramdisk API: lookup,
// heartbeat and the inspection callback. Each call is one HTTP request with
// its own timeout; retrying is the caller's policy (see Backoff), because
// which answers are worth retrying differs per call.
package apiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"castiron/ramdisk/protocol"
	"castiron/ramdisk/trust"
)

const (
	// APIVersion is sent on every request: 1.84 makes continue_inspection
	// answer with the lookup body (node UUID and agent token).
	APIVersion = "1.84"
	// RequestTimeout bounds one request, connection included.
	RequestTimeout = 30 * time.Second
	// maxBody bounds what is read of an answer.
	maxBody = 1 << 20
)

// Client calls the API at BaseURL (ipa-api-url, e.g. http://10.0.0.1:6385).
type Client struct {
	BaseURL   string
	UserAgent string
	HTTP      *http.Client
	// strict: only HTTPS to servers the CA vouches for (RequireTLS).
	strict bool
}

// RequireTLS makes every call go over HTTPS, trusting only cfg's CA, and
// refuses plain-HTTP URLs (BaseURL now, a callback URL when it is called)
// and redirects away from HTTPS.
func (c *Client) RequireTLS(cfg *tls.Config) error {
	if c.BaseURL != "" {
		if err := trust.RequireHTTPS(c.BaseURL); err != nil {
			return err
		}
	}
	trust.Strict(c.HTTP, cfg)
	c.strict = true
	return nil
}

// New returns a client with its own transport (no proxy from the
// environment: the ramdisk talks to the provisioning network directly).
func New(baseURL, userAgent string) *Client {
	return &Client{
		BaseURL:   strings.TrimRight(baseURL, "/"),
		UserAgent: userAgent,
		HTTP: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        2,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}},
	}
}

// StatusError is an answer with an unexpected HTTP status.
type StatusError struct {
	Op   string // "lookup", "heartbeat", "inspection"
	Code int
	Body string // the start of the answer, for the log
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Code, e.Body)
}

// Retryable says whether err is worth trying again: network failures,
// timeouts, 5xx, 408 and 429. Any other 4xx will not change by itself.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusRequestTimeout || se.Code == http.StatusTooManyRequests
	}
	// A cancelled caller is not a transient failure of the server.
	return !errors.Is(err, context.Canceled)
}

// StatusCode returns the HTTP status of a StatusError, 0 otherwise.
func StatusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// Lookup finds this machine's node by its MAC addresses (and the UUID from
// the kernel command line, when known): GET /v1/lookup.
func (c *Client) Lookup(ctx context.Context, macs []string, nodeUUID string) (*protocol.LookupResponse, error) {
	q := url.Values{"addresses": {strings.Join(macs, ",")}}
	if nodeUUID != "" {
		q.Set("node_uuid", nodeUUID)
	}
	code, body, err := c.do(ctx, http.MethodGet, c.BaseURL+"/v1/lookup?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	if code != http.StatusOK {
		return nil, &StatusError{Op: "lookup", Code: code, Body: excerpt(body)}
	}
	var lr protocol.LookupResponse
	if err := json.Unmarshal(body, &lr); err != nil || lr.Node.UUID == "" {
		// A proxy's error page or a half-started server: try again later.
		return nil, &StatusError{Op: "lookup", Code: http.StatusBadGateway, Body: "invalid answer: " + excerpt(body)}
	}
	return &lr, nil
}

// Heartbeat posts hb for the node and returns castiron's instruction. A
// stock Ironic answers 202 with no body, which means "wait".
func (c *Client) Heartbeat(ctx context.Context, nodeUUID string, hb protocol.Heartbeat) (*protocol.Instruction, error) {
	payload, err := json.Marshal(hb)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	code, body, err := c.do(ctx, http.MethodPost, c.BaseURL+"/v1/heartbeat/"+url.PathEscape(nodeUUID), payload)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if code < 200 || code > 299 {
		return nil, &StatusError{Op: "heartbeat", Code: code, Body: excerpt(body)}
	}
	var in protocol.Instruction
	if err := json.Unmarshal(body, &in); err != nil || in.Command == "" {
		return &protocol.Instruction{Command: protocol.CmdWait}, nil
	}
	return &in, nil
}

// InspectionResult is the answer to the inspection callback. Ironic >= 1.84
// (and castiron) answer with the lookup body, so Lookup is set; an older
// (ironic-inspector style) answer only names the node.
type InspectionResult struct {
	NodeUUID string
	Lookup   *protocol.LookupResponse
}

// ContinueInspection posts the inventory to the inspection callback URL
// (ipa-inspection-callback-url, a full URL).
func (c *Client) ContinueInspection(ctx context.Context, callbackURL string, data protocol.InspectionData) (*InspectionResult, error) {
	payload, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("inspection: %w", err)
	}
	code, body, err := c.do(ctx, http.MethodPost, callbackURL, payload)
	if err != nil {
		return nil, fmt.Errorf("inspection: %w", err)
	}
	if code < 200 || code > 299 {
		return nil, &StatusError{Op: "inspection", Code: code, Body: excerpt(body)}
	}
	var answer struct {
		protocol.LookupResponse
		UUID string `json:"uuid"` // the 1.1-style answer
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return &InspectionResult{}, nil // accepted; the node is found by lookup
	}
	if answer.Node.UUID != "" {
		return &InspectionResult{NodeUUID: answer.Node.UUID, Lookup: &answer.LookupResponse}, nil
	}
	return &InspectionResult{NodeUUID: answer.UUID}, nil
}

func (c *Client) do(ctx context.Context, method, target string, payload []byte) (int, []byte, error) {
	if c.strict {
		if err := trust.RequireHTTPS(target); err != nil {
			return 0, nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", APIVersion)
	req.Header.Set("Accept", "application/json")
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("reading answer: %w", err)
	}
	return resp.StatusCode, b, nil
}

// excerpt keeps error bodies short enough for a console line.
func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
