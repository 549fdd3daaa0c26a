package client

import (
	"context"
	"encoding/json"
	"net/url"
)

// Node is the part of Ironic's node resource the workflows use; Raw keeps the
// whole JSON object as the server sent it.
type Node struct {
	UUID                 string         `json:"uuid"`
	Name                 string         `json:"name"`
	Driver               string         `json:"driver"`
	ProvisionState       string         `json:"provision_state"`
	TargetProvisionState string         `json:"target_provision_state"`
	PowerState           string         `json:"power_state"`
	Maintenance          bool           `json:"maintenance"`
	LastError            string         `json:"last_error"`
	ResourceClass        string         `json:"resource_class"`
	InstanceUUID         string         `json:"instance_uuid"`
	Conductor            string         `json:"conductor"`
	DriverInfo           map[string]any `json:"driver_info"`
	Properties           map[string]any `json:"properties"`
	Extra                map[string]any `json:"extra"`
	DriverInternalInfo   map[string]any `json:"driver_internal_info"`

	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw object next to the typed fields.
func (n *Node) UnmarshalJSON(b []byte) error {
	type plain Node
	if err := json.Unmarshal(b, (*plain)(n)); err != nil {
		return err
	}
	n.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// Discovered reports whether castiron's discovery made the node (its
// driver_internal_info.auto_discovered).
func (n *Node) Discovered() bool {
	auto, _ := n.DriverInternalInfo["auto_discovered"].(bool)
	return auto
}

// Label is the node's name, or its UUID when it has none.
func (n *Node) Label() string {
	if n.Name != "" {
		return n.Name
	}
	return n.UUID
}

// PatchOp is one RFC 6902 operation as Ironic's PATCH endpoints take them.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// ListNodes returns every node (GET /v1/nodes/detail, all pages); q adds
// filters such as provision_state.
func (c *Client) ListNodes(ctx context.Context, q url.Values) ([]Node, error) {
	if q == nil {
		q = url.Values{}
	}
	if q.Get("limit") == "" {
		q.Set("limit", "1000")
	}
	var out []Node
	err := c.listAll(ctx, "/v1/nodes/detail?"+q.Encode(), "nodes", func(raw json.RawMessage) error {
		var n Node
		if err := json.Unmarshal(raw, &n); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

// GetNode is GET /v1/nodes/{uuid or name}.
func (c *Client) GetNode(ctx context.Context, ident string) (*Node, error) {
	var n Node
	if _, err := c.do(ctx, "GET", "/v1/nodes/"+url.PathEscape(ident), nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// CreateNode is POST /v1/nodes with the given fields.
func (c *Client) CreateNode(ctx context.Context, fields map[string]any) (*Node, error) {
	var n Node
	if _, err := c.do(ctx, "POST", "/v1/nodes", fields, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// PatchNode is PATCH /v1/nodes/{ident}. When ops change the driver, the
// interfaces are reset to the new driver's defaults (reset_interfaces, API
// 1.45), as `openstack baremetal node set --driver X --reset-interfaces` does.
func (c *Client) PatchNode(ctx context.Context, ident string, ops []PatchOp) (*Node, error) {
	path := "/v1/nodes/" + url.PathEscape(ident)
	for _, op := range ops {
		if op.Path == "/driver" && c.minor >= 45 {
			path += "?reset_interfaces=true"
			break
		}
	}
	var n Node
	if _, err := c.do(ctx, "PATCH", path, ops, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// SetProvisionState is PUT /v1/nodes/{ident}/states/provision with target
// (manage, provide, inspect, abort, ...); the server answers 202 and the
// transition runs in the background.
func (c *Client) SetProvisionState(ctx context.Context, ident, target string) error {
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(ident)+"/states/provision",
		map[string]any{"target": target}, nil)
	return err
}
