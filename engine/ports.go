package engine

import (
	"context"
	"net"
	"strings"

	"github.com/google/uuid"

	"castiron/fault"
	"castiron/storage"
)

// NormalizeMAC validates a MAC address and returns it lower-case, as Ironic
// stores it.
func NormalizeMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", fault.New(fault.Invalid, "Expected a MAC address but received %s.", s)
	}
	return strings.ToLower(hw.String()), nil
}

// CreatePort stores a new port of an existing node.
func (c *Conductor) CreatePort(ctx context.Context, p *storage.Port) error {
	n, err := c.store.GetNode(ctx, p.NodeUUID)
	if err != nil {
		return err
	}
	if n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	p.NodeUUID = n.UUID
	if p.Address, err = NormalizeMAC(p.Address); err != nil {
		return err
	}
	if p.UUID == "" {
		p.UUID = uuid.NewString()
	}
	if err := c.checkPortPortgroup(ctx, nil, p); err != nil {
		return err
	}
	p.CreatedAt = c.now()
	ensurePortMaps(p)
	if err := c.store.CreatePort(ctx, p); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "port created", "node", n.UUID, "state", n.ProvisionState, "verb", "port-create", "port", p.UUID, "address", p.Address)
	return nil
}

func ensurePortMaps(p *storage.Port) {
	for _, m := range []*storage.JSONObject{&p.LocalLinkConnection, &p.InternalInfo, &p.Extra} {
		if *m == nil {
			*m = storage.JSONObject{}
		}
	}
}

// UpdatePort applies change to a port while its node is not busy.
func (c *Conductor) UpdatePort(ctx context.Context, portUUID string, change func(p *storage.Port) error) (*storage.Port, error) {
	old, err := c.store.GetPort(ctx, portUUID)
	if err != nil {
		return nil, err
	}
	n, err := c.store.GetNode(ctx, old.NodeUUID)
	if err != nil {
		return nil, err
	}
	if n.Reservation != nil {
		return nil, fault.Locked(n.UUID, *n.Reservation)
	}
	return c.store.UpdatePort(ctx, portUUID, func(p *storage.Port) error {
		if err := change(p); err != nil {
			return err
		}
		addr, err := NormalizeMAC(p.Address)
		if err != nil {
			return err
		}
		p.Address = addr
		if p.NodeUUID != old.NodeUUID {
			target, err := c.store.GetNode(ctx, p.NodeUUID)
			if err != nil {
				return err
			}
			p.NodeUUID = target.UUID
		}
		ensurePortMaps(p)
		return c.checkPortPortgroup(ctx, old, p)
	})
}

// DeletePort removes a port while its node is not busy.
func (c *Conductor) DeletePort(ctx context.Context, portUUID string) error {
	p, err := c.store.GetPort(ctx, portUUID)
	if err != nil {
		return err
	}
	n, err := c.store.GetNode(ctx, p.NodeUUID)
	if err == nil && n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	return c.store.DeletePort(ctx, p.UUID)
}
