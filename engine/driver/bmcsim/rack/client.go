package rack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client enrolls a rack's machines in castiron and takes them through the
// provision states, over castiron's /v1 API (what an operator's client
// does).
type Client struct {
	URL  string // castiron's API, e.g. http://127.0.0.1:6385
	HTTP *http.Client
	// Poll is how often Wait reads the node [250ms].
	Poll time.Duration
	// Timeout bounds each Wait [5m].
	Timeout time.Duration
}

// APIError is an answer other than the one expected.
type APIError struct {
	Method, Path string
	Code         int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, strings.TrimSpace(e.Body))
}

// lockedRetries: a 409 "locked" answer (a conductor task still holds the
// node, e.g. the power off after inspection) is retried this many times,
// half a second apart, as Ironic's clients retry NodeLocked.
const lockedRetries = 120

// Do sends one request with the newest microversion and decodes the JSON
// answer into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any, want int) error {
	var raw []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		raw = b
	}
	for try := 0; ; try++ {
		err := c.do(ctx, method, path, raw, out, want)
		var ae *APIError
		if try >= lockedRetries || !errors.As(err, &ae) || ae.Code != http.StatusConflict || !strings.Contains(ae.Body, "is locked by host") {
			return err
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return err
		}
	}
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any, want int) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return &APIError{Method: method, Path: path, Code: resp.StatusCode, Body: string(raw)}
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Enroll creates m's node (named after the machine, agent inspection,
// iPXE boot, direct deploy; extra fields win) and its ports, the first
// PXE-enabled, and returns its UUID.
func (c *Client) Enroll(ctx context.Context, m *Machine, extra map[string]any) (string, error) {
	drv, info := m.DriverInfo()
	body := map[string]any{
		"name": m.Name, "driver": drv, "driver_info": info,
		"boot_interface": "ipxe", "inspect_interface": "agent", "deploy_interface": "direct",
	}
	for k, v := range extra {
		body[k] = v
	}
	var n struct{ UUID string }
	if err := c.Do(ctx, "POST", "/v1/nodes", body, &n, http.StatusCreated); err != nil {
		return "", err
	}
	for i, mac := range m.MACs {
		if err := c.Do(ctx, "POST", "/v1/ports", map[string]any{"node_uuid": n.UUID, "address": mac, "pxe_enabled": i == 0}, nil, http.StatusCreated); err != nil {
			return n.UUID, err
		}
	}
	return n.UUID, nil
}

// Stable is the state a provision verb ends in.
var Stable = map[string]string{
	"manage": "manageable", "inspect": "manageable", "provide": "available",
	"active": "active", "deleted": "available", "rebuild": "active", "clean": "manageable",
}

// Provision asks for target and waits for the state it ends in.
func (c *Client) Provision(ctx context.Context, uuid, target string, extra map[string]any) error {
	body := map[string]any{"target": target}
	for k, v := range extra {
		body[k] = v
	}
	if err := c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", body, nil, http.StatusAccepted); err != nil {
		return err
	}
	return c.Wait(ctx, uuid, Stable[target])
}

// Node is the part of a node Wait reads.
type Node struct {
	UUID           string `json:"uuid"`
	Name           string `json:"name"`
	ProvisionState string `json:"provision_state"`
	PowerState     string `json:"power_state"`
	LastError      string `json:"last_error"`
}

// Wait polls the node until it is in want; a failure state (… failed) or
// the timeout is an error naming last_error.
func (c *Client) Wait(ctx context.Context, uuid, want string) error {
	poll, timeout := c.Poll, c.Timeout
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var n Node
	for {
		err := c.Do(ctx, "GET", "/v1/nodes/"+uuid+"?fields=uuid,name,provision_state,power_state,last_error", nil, &n, http.StatusOK)
		switch {
		case err == nil && n.ProvisionState == want:
			return nil
		case err == nil && strings.HasSuffix(n.ProvisionState, "failed"):
			return fmt.Errorf("node %s (%s) is %s, not %s: %s", n.Name, uuid, n.ProvisionState, want, n.LastError)
		case ctx.Err() != nil:
			return fmt.Errorf("node %s (%s) is %s after %v, not %s: %s", n.Name, uuid, n.ProvisionState, timeout, want, n.LastError)
		}
		if !sleep(ctx, poll) {
			return fmt.Errorf("node %s (%s) is %s, not %s: %v", n.Name, uuid, n.ProvisionState, want, ctx.Err())
		}
	}
}

// ToAvailable takes an enrolled node through manage, inspect and provide
// (automated cleaning).
func (c *Client) ToAvailable(ctx context.Context, uuid string) error {
	for _, v := range []string{"manage", "inspect", "provide"} {
		if err := c.Provision(ctx, uuid, v, nil); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
	}
	return nil
}

// Deploy sets the image and deploys the node.
func (c *Client) Deploy(ctx context.Context, uuid, imageSource, checksum string) error {
	patch := []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": imageSource},
		{"op": "add", "path": "/instance_info/image_checksum", "value": checksum},
	}
	if err := c.Do(ctx, "PATCH", "/v1/nodes/"+uuid, patch, nil, http.StatusOK); err != nil {
		return err
	}
	return c.Provision(ctx, uuid, "active", nil)
}
