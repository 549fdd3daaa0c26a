package engine

import (
	"context"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// Volume connectors and targets (API 1.32). As in Ironic, creating one needs
// only an existing node; changing or deleting one needs its node (the new
// one, when the change moves it) unlocked and powered off
// (conductor/manager.py update_volume_* and destroy_volume_*). Ironic since
// 2025 also deletes them in enroll, manageable and adopt failed whatever the
// power state; castiron keeps the rule of Ironic 21.4, which the stock
// ironic-tempest-plugin checks (a powered-on enroll node refuses).

// volumeChangeable is the conductor-side check of an update or deletion:
// the node's lock (NodeLocked) and its power state (InvalidStateRequested).
func volumeChangeable(n *storage.Node, action string) error {
	if n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	if deref(n.PowerState) != driver.PowerOff {
		return fault.InvalidState(action, n.UUID, powerStateWord(n))
	}
	return nil
}

// CreateVolumeConnector stores a new connector of an existing node (looked
// up by c.NodeUUID; an unknown node is NodeNotFound).
func (c *Conductor) CreateVolumeConnector(ctx context.Context, vc *storage.VolumeConnector) error {
	n, err := c.store.GetNode(ctx, vc.NodeUUID)
	if err != nil {
		return err
	}
	vc.NodeUUID = n.UUID
	vc.CreatedAt = c.now()
	if vc.Extra == nil {
		vc.Extra = storage.JSONObject{}
	}
	if err := c.store.CreateVolumeConnector(ctx, vc); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "volume connector created", "node", n.UUID, "verb", "volume-connector-create", "connector", vc.UUID, "type", vc.Type)
	return nil
}

// UpdateVolumeConnector applies change to a connector, then checks the node
// it ends up on: unlocked and powered off.
func (c *Conductor) UpdateVolumeConnector(ctx context.Context, connUUID string, change func(vc *storage.VolumeConnector) error) (*storage.VolumeConnector, error) {
	out, err := c.store.UpdateVolumeConnector(ctx, connUUID, func(vc *storage.VolumeConnector) error {
		if err := change(vc); err != nil {
			return err
		}
		n, err := c.store.GetNode(ctx, vc.NodeUUID)
		if err != nil {
			return err
		}
		vc.NodeUUID = n.UUID
		if vc.Extra == nil {
			vc.Extra = storage.JSONObject{}
		}
		return volumeChangeable(n, "volume connector update")
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "volume connector updated", "node", out.NodeUUID, "verb", "volume-connector-update", "connector", out.UUID)
	return out, nil
}

// DeleteVolumeConnector removes a connector whose node allows it.
func (c *Conductor) DeleteVolumeConnector(ctx context.Context, connUUID string) error {
	vc, err := c.store.GetVolumeConnector(ctx, connUUID)
	if err != nil {
		return err
	}
	n, err := c.store.GetNode(ctx, vc.NodeUUID)
	if err != nil {
		return err
	}
	if err := volumeChangeable(n, "volume connector deletion"); err != nil {
		return err
	}
	if err := c.store.DeleteVolumeConnector(ctx, vc.UUID); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "volume connector deleted", "node", n.UUID, "verb", "volume-connector-delete", "connector", vc.UUID)
	return nil
}

// CreateVolumeTarget stores a new target of an existing node.
func (c *Conductor) CreateVolumeTarget(ctx context.Context, vt *storage.VolumeTarget) error {
	n, err := c.store.GetNode(ctx, vt.NodeUUID)
	if err != nil {
		return err
	}
	vt.NodeUUID = n.UUID
	vt.CreatedAt = c.now()
	for _, m := range []*storage.JSONObject{&vt.Properties, &vt.Extra} {
		if *m == nil {
			*m = storage.JSONObject{}
		}
	}
	if err := c.store.CreateVolumeTarget(ctx, vt); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "volume target created", "node", n.UUID, "verb", "volume-target-create", "target", vt.UUID, "boot_index", vt.BootIndex)
	return nil
}

// UpdateVolumeTarget applies change to a target, then checks the node it
// ends up on: unlocked and powered off.
func (c *Conductor) UpdateVolumeTarget(ctx context.Context, targetUUID string, change func(vt *storage.VolumeTarget) error) (*storage.VolumeTarget, error) {
	out, err := c.store.UpdateVolumeTarget(ctx, targetUUID, func(vt *storage.VolumeTarget) error {
		if err := change(vt); err != nil {
			return err
		}
		n, err := c.store.GetNode(ctx, vt.NodeUUID)
		if err != nil {
			return err
		}
		vt.NodeUUID = n.UUID
		for _, m := range []*storage.JSONObject{&vt.Properties, &vt.Extra} {
			if *m == nil {
				*m = storage.JSONObject{}
			}
		}
		return volumeChangeable(n, "volume target update")
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "volume target updated", "node", out.NodeUUID, "verb", "volume-target-update", "target", out.UUID)
	return out, nil
}

// DeleteVolumeTarget removes a target whose node allows it.
func (c *Conductor) DeleteVolumeTarget(ctx context.Context, targetUUID string) error {
	vt, err := c.store.GetVolumeTarget(ctx, targetUUID)
	if err != nil {
		return err
	}
	n, err := c.store.GetNode(ctx, vt.NodeUUID)
	if err != nil {
		return err
	}
	if err := volumeChangeable(n, "volume target deletion"); err != nil {
		return err
	}
	if err := c.store.DeleteVolumeTarget(ctx, vt.UUID); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "volume target deleted", "node", n.UUID, "verb", "volume-target-delete", "target", vt.UUID)
	return nil
}
