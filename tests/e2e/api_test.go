//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"castiron/ramdisk/protocol"
)

// Client is a small Ironic /v1 client for the tests: it always asks for the
// newest microversion and returns castiron's answers without interpretation.
type Client struct {
	Base string // http://10.205.0.1:6385
	HTTP *http.Client
}

// APIError is a non-2xx answer.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, strings.TrimSpace(e.Body))
}

// IsStatus reports whether err is an APIError with that status.
func IsStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// Do sends one request; body (if non-nil) is JSON-encoded, a JSON answer is
// decoded into out (if non-nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		return &APIError{Method: method, Path: path, Status: res.StatusCode, Body: string(b)}
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// Node is the part of a node the tests look at; Raw is the whole object.
type Node struct {
	UUID                 string          `json:"uuid"`
	Name                 string          `json:"name"`
	Driver               string          `json:"driver"`
	ProvisionState       string          `json:"provision_state"`
	TargetProvisionState *string         `json:"target_provision_state"`
	PowerState           *string         `json:"power_state"`
	LastError            *string         `json:"last_error"`
	Properties           map[string]any  `json:"properties"`
	DriverInfo           map[string]any  `json:"driver_info"`
	DriverInternalInfo   map[string]any  `json:"driver_internal_info"`
	InspectInterface     string          `json:"inspect_interface"`
	BootInterface        string          `json:"boot_interface"`
	Conductor            string          `json:"conductor"`
	Raw                  json.RawMessage `json:"-"`
}

// LastErr is last_error or "".
func (n *Node) LastErr() string {
	if n.LastError == nil {
		return ""
	}
	return *n.LastError
}

// Power is power_state or "".
func (n *Node) Power() string {
	if n.PowerState == nil {
		return ""
	}
	return *n.PowerState
}

// Port is the part of a port the tests look at.
type Port struct {
	UUID       string `json:"uuid"`
	Address    string `json:"address"`
	NodeUUID   string `json:"node_uuid"`
	PXEEnabled bool   `json:"pxe_enabled"`
}

// HistoryEvent is one entry of GET /v1/nodes/{id}/history?detail=true.
type HistoryEvent struct {
	UUID      string `json:"uuid"`
	CreatedAt string `json:"created_at"`
	Severity  string `json:"severity"`
	EventType string `json:"event_type"`
	Event     string `json:"event"`
	User      string `json:"user"`
	Conductor string `json:"conductor"`
}

// Time parses created_at (Ironic's "2006-01-02T15:04:05.000000+00:00").
func (h HistoryEvent) Time() time.Time {
	for _, layout := range []string{"2006-01-02T15:04:05.999999-07:00", time.RFC3339Nano, "2006-01-02T15:04:05.999999"} {
		if t, err := time.Parse(layout, h.CreatedAt); err == nil {
			return t
		}
	}
	return time.Time{}
}

// TimelineEvent is one entry of castiron's boot timeline (pxe/boot.Event):
// {"at": "2006-01-02T15:04:05.000000+00:00", "mac", "node_uuid", "event"
// (the kind, e.g. dhcp_discover), "detail"}.
type TimelineEvent struct {
	At       time.Time
	MAC      string
	NodeUUID string
	Kind     string
	Detail   string
}

// UnmarshalJSON accepts the kind as "event" (castiron's API) or "kind".
func (e *TimelineEvent) UnmarshalJSON(b []byte) error {
	var w struct {
		At       string  `json:"at"`
		MAC      string  `json:"mac"`
		NodeUUID *string `json:"node_uuid"`
		Event    string  `json:"event"`
		Kind     string  `json:"kind"`
		Detail   string  `json:"detail"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, w.At)
	if err != nil {
		return fmt.Errorf("boot timeline event time %q: %w", w.At, err)
	}
	*e = TimelineEvent{At: at, MAC: w.MAC, Kind: w.Event, Detail: w.Detail}
	if w.Kind != "" {
		e.Kind = w.Kind
	}
	if w.NodeUUID != nil {
		e.NodeUUID = *w.NodeUUID
	}
	return nil
}

// GetNode is GET /v1/nodes/{ident}.
func (c *Client) GetNode(ctx context.Context, ident string) (*Node, error) {
	var raw json.RawMessage
	if err := c.Do(ctx, "GET", "/v1/nodes/"+url.PathEscape(ident), nil, &raw); err != nil {
		return nil, err
	}
	return decodeNode(raw)
}

// CreateNode is POST /v1/nodes.
func (c *Client) CreateNode(ctx context.Context, fields map[string]any) (*Node, error) {
	var raw json.RawMessage
	if err := c.Do(ctx, "POST", "/v1/nodes", fields, &raw); err != nil {
		return nil, err
	}
	return decodeNode(raw)
}

func decodeNode(raw json.RawMessage) (*Node, error) {
	var n Node
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, err
	}
	n.Raw = raw
	return &n, nil
}

// CreatePort is POST /v1/ports.
func (c *Client) CreatePort(ctx context.Context, nodeUUID, mac string, pxeEnabled bool) (*Port, error) {
	var p Port
	err := c.Do(ctx, "POST", "/v1/ports", map[string]any{
		"node_uuid": nodeUUID, "address": mac, "pxe_enabled": pxeEnabled,
	}, &p)
	return &p, err
}

// Ports is GET /v1/nodes/{ident}/ports/detail.
func (c *Client) Ports(ctx context.Context, ident string) ([]Port, error) {
	var out struct {
		Ports []Port `json:"ports"`
	}
	err := c.Do(ctx, "GET", "/v1/nodes/"+url.PathEscape(ident)+"/ports/detail", nil, &out)
	return out.Ports, err
}

// SetProvisionState is PUT /v1/nodes/{ident}/states/provision.
func (c *Client) SetProvisionState(ctx context.Context, ident, target string) error {
	return c.Do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(ident)+"/states/provision",
		map[string]any{"target": target}, nil)
}

// failedStates end a wait early: the node will not get anywhere else by
// itself.
var failedStates = map[string]bool{
	"inspect failed": true, "clean failed": true, "deploy failed": true,
	"error": true, "rescue failed": true, "unrescue failed": true, "service failed": true,
}

// WaitProvisionState polls the node (every 250 ms) until its
// provision_state is want. It gives up at timeout, and at once when the node
// lands in a failure state other than want (with last_error in the error).
func (c *Client) WaitProvisionState(ctx context.Context, ident, want string, timeout time.Duration) (*Node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *Node
	for {
		n, err := c.GetNode(ctx, ident)
		if err == nil {
			last = n
			if n.ProvisionState == want {
				return n, nil
			}
			if failedStates[n.ProvisionState] {
				return n, fmt.Errorf("node %s is %q (waiting for %q): last_error: %s", ident, n.ProvisionState, want, n.LastErr())
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("node %s: no answer while waiting for %q: %v (last: %v)", ident, want, ctx.Err(), err)
			}
			return last, fmt.Errorf("node %s still %q after %s (waiting for %q): last_error: %s", ident, last.ProvisionState, timeout, want, last.LastErr())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Inventory is GET /v1/nodes/{ident}/inventory (1.81).
func (c *Client) Inventory(ctx context.Context, ident string) (*protocol.Inventory, map[string]any, error) {
	var out struct {
		Inventory  protocol.Inventory `json:"inventory"`
		PluginData map[string]any     `json:"plugin_data"`
	}
	if err := c.Do(ctx, "GET", "/v1/nodes/"+url.PathEscape(ident)+"/inventory", nil, &out); err != nil {
		return nil, nil, err
	}
	return &out.Inventory, out.PluginData, nil
}

// History is GET /v1/nodes/{ident}/history?detail=true (1.78), oldest first.
func (c *Client) History(ctx context.Context, ident string) ([]HistoryEvent, error) {
	var out struct {
		History []HistoryEvent `json:"history"`
	}
	err := c.Do(ctx, "GET", "/v1/nodes/"+url.PathEscape(ident)+"/history?detail=true&limit=1000", nil, &out)
	return out.History, err
}

// BootTimeline is castiron's GET /v1/nodes/{ident}/boot_timeline: the
// DHCP/TFTP/HTTP/agent steps of the node's network boots. ok is false while
// the server does not have the endpoint (404 or 405). The body is
// {"events": [...]} (also accepted: "boot_timeline"/"timeline" keys or a
// bare array), oldest first.
func (c *Client) BootTimeline(ctx context.Context, ident string) (events []TimelineEvent, ok bool, err error) {
	var raw json.RawMessage
	err = c.Do(ctx, "GET", "/v1/nodes/"+url.PathEscape(ident)+"/boot_timeline", nil, &raw)
	if IsStatus(err, http.StatusNotFound) || IsStatus(err, http.StatusMethodNotAllowed) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(raw, &events); err == nil {
		return events, true, nil
	}
	var wrapped map[string]json.RawMessage
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		return nil, true, fmt.Errorf("boot_timeline: %w", err)
	}
	for _, key := range []string{"events", "boot_timeline", "timeline"} {
		if v, found := wrapped[key]; found {
			if err := json.Unmarshal(v, &events); err != nil {
				return nil, true, fmt.Errorf("boot_timeline %q: %w", key, err)
			}
			return events, true, nil
		}
	}
	return nil, true, fmt.Errorf("boot_timeline: no events list in %s", truncate(string(raw), 200))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
