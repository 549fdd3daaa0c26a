package client

import (
	"context"
	"encoding/json"
	"net/url"
)

// Port is the part of Ironic's port resource the workflows use.
type Port struct {
	UUID     string `json:"uuid"`
	Address  string `json:"address"`
	NodeUUID string `json:"node_uuid"`
}

// ListPorts returns every port (GET /v1/ports/detail, all pages).
func (c *Client) ListPorts(ctx context.Context) ([]Port, error) {
	var out []Port
	err := c.listAll(ctx, "/v1/ports/detail?limit=1000", "ports", func(raw json.RawMessage) error {
		var p Port
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// CreatePort is POST /v1/ports; fields must carry node_uuid and address.
func (c *Client) CreatePort(ctx context.Context, fields map[string]any) (*Port, error) {
	var p Port
	if _, err := c.do(ctx, "POST", "/v1/ports", fields, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Conductor is one entry of GET /v1/conductors (API 1.49).
type Conductor struct {
	Hostname       string   `json:"hostname"`
	ConductorGroup string   `json:"conductor_group"`
	Alive          bool     `json:"alive"`
	Drivers        []string `json:"drivers"`

	Raw json.RawMessage `json:"-"`
}

// ListConductors is GET /v1/conductors?detail=True, all pages.
func (c *Client) ListConductors(ctx context.Context) ([]Conductor, error) {
	q := url.Values{"detail": {"True"}, "limit": {"1000"}}
	var out []Conductor
	err := c.listAll(ctx, "/v1/conductors?"+q.Encode(), "conductors", func(raw json.RawMessage) error {
		var cd Conductor
		if err := json.Unmarshal(raw, &cd); err != nil {
			return err
		}
		cd.Raw = raw
		out = append(out, cd)
		return nil
	})
	return out, err
}
