package engine

import (
	"context"

	"castiron/fault"
	"castiron/storage"
)

// TenantVIFKey is the port internal_info key of the tenant VIF, as Ironic's
// network interfaces store it.
const TenantVIFKey = "tenant_vif_port_id"

// VIFRequest is the body of POST /v1/nodes/{id}/vifs.
type VIFRequest struct {
	ID            string
	PortUUID      string // 1.67: attach to this port
	PortgroupUUID string // 1.67: attach to this portgroup (castiron has none)
}

// vifsKept reports whether the node's network interface keeps VIFs on its
// ports. Ironic's noop interface lists none and attaches and detaches
// nothing; flat (VIFPortIDMixin) records them in port internal_info.
func vifsKept(n *storage.Node) bool { return InterfaceOf(n, "network") != "noop" }

func (c *Conductor) nodePorts(ctx context.Context, n *storage.Node) ([]*storage.Port, error) {
	return c.store.ListPorts(ctx, storage.PortQuery{NodeUUID: &n.UUID})
}

func vifOf(p *storage.Port) string {
	s, _ := p.InternalInfo[TenantVIFKey].(string)
	return s
}

// ListVIFs is GET /v1/nodes/{id}/vifs: the VIF ids attached to the node.
func (c *Conductor) ListVIFs(ctx context.Context, ident string) ([]string, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	out := []string{}
	if !vifsKept(n) {
		return out, nil
	}
	ports, err := c.nodePorts(ctx, n)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if v := vifOf(p); v != "" {
			out = append(out, v)
		}
	}
	return out, nil
}

// AttachVIF is POST /v1/nodes/{id}/vifs: record the VIF on a free port
// (Ironic's get_free_port_like_object without physical networks: the
// requested port, else the first free PXE-enabled port, else the first free
// port).
func (c *Conductor) AttachVIF(ctx context.Context, ident string, req VIFRequest) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	if !vifsKept(n) {
		c.log.InfoContext(ctx, "VIF attached (noop network)", "node", n.UUID, "verb", "vif-attach", "vif", req.ID)
		return nil
	}
	ports, err := c.nodePorts(ctx, n)
	if err != nil {
		return err
	}
	var free []*storage.Port
	for _, p := range ports {
		if req.PortUUID != "" && req.PortUUID != p.UUID {
			continue
		}
		switch vifOf(p) {
		case req.ID:
			return fault.New(fault.Conflict, "Unable to attach VIF because VIF %s is already attached to Ironic Port %s", req.ID, p.UUID)
		case "":
			if p.PortgroupUUID == nil && req.PortgroupUUID == "" {
				free = append(free, p)
			}
		}
	}
	var pick *storage.Port
	for _, p := range free {
		if p.PXEEnabled {
			pick = p
			break
		}
	}
	if pick == nil && len(free) > 0 {
		pick = free[0]
	}
	if pick == nil {
		return fault.New(fault.Invalid, "Unable to attach VIF %s, not enough free physical ports.", req.ID)
	}
	_, err = c.store.UpdatePort(ctx, pick.UUID, func(p *storage.Port) error {
		if v := vifOf(p); v != "" {
			if v == req.ID {
				return fault.New(fault.Conflict, "Unable to attach VIF because VIF %s is already attached to Ironic Port %s", req.ID, p.UUID)
			}
			return fault.New(fault.Invalid, "Unable to attach VIF %s, not enough free physical ports.", req.ID)
		}
		ensurePortMaps(p)
		p.InternalInfo[TenantVIFKey] = req.ID
		return nil
	})
	if err == nil {
		c.log.InfoContext(ctx, "VIF attached", "node", n.UUID, "verb", "vif-attach", "vif", req.ID, "port", pick.UUID)
	}
	return err
}

// DetachVIF is DELETE /v1/nodes/{id}/vifs/{vif}.
func (c *Conductor) DetachVIF(ctx context.Context, ident, vifID string) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	if !vifsKept(n) {
		return nil
	}
	ports, err := c.nodePorts(ctx, n)
	if err != nil {
		return err
	}
	for _, p := range ports {
		if vifOf(p) != vifID {
			continue
		}
		_, err := c.store.UpdatePort(ctx, p.UUID, func(p *storage.Port) error {
			delete(p.InternalInfo, TenantVIFKey)
			return nil
		})
		if err == nil {
			c.log.InfoContext(ctx, "VIF detached", "node", n.UUID, "verb", "vif-detach", "vif", vifID, "port", p.UUID)
		}
		return err
	}
	return fault.New(fault.Invalid, "Unable to detach VIF %s from node %s because it is not attached to it.", vifID, n.UUID)
}
