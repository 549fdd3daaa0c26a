package engine

import (
	"context"
	"unicode/utf8"

	"github.com/google/uuid"

	"castiron/fault"
	"castiron/storage"
)

// MaxChassisDescription is the length of Ironic's chassis.description column.
const MaxChassisDescription = 255

func chassisValid(ch *storage.Chassis) error {
	if ch.Description != nil && utf8.RuneCountInString(*ch.Description) > MaxChassisDescription {
		return fault.New(fault.Invalid, "Chassis description is longer than %d characters.", MaxChassisDescription)
	}
	if ch.Extra == nil {
		ch.Extra = storage.JSONObject{}
	}
	return nil
}

// CreateChassis stores a new chassis.
func (c *Conductor) CreateChassis(ctx context.Context, ch *storage.Chassis) error {
	if err := chassisValid(ch); err != nil {
		return err
	}
	if ch.UUID == "" {
		ch.UUID = uuid.NewString()
	}
	ch.CreatedAt = c.now()
	if err := c.store.CreateChassis(ctx, ch); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "chassis created", "chassis", ch.UUID, "verb", "chassis-create", "user", actorOf(ctx))
	return nil
}

// UpdateChassis applies change to a chassis. Its UUID is its identity
// (nodes name it): changing it is refused as Ironic's update_chassis does.
func (c *Conductor) UpdateChassis(ctx context.Context, chassisUUID string, change func(ch *storage.Chassis) error) (*storage.Chassis, error) {
	out, err := c.store.UpdateChassis(ctx, chassisUUID, func(ch *storage.Chassis) error {
		id := ch.UUID
		if err := change(ch); err != nil {
			return err
		}
		if ch.UUID != id {
			return fault.New(fault.Invalid, "Cannot overwrite UUID for an existing Chassis.")
		}
		return chassisValid(ch)
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "chassis updated", "chassis", out.UUID, "verb", "chassis-update", "user", actorOf(ctx))
	return out, nil
}

// DeleteChassis removes a chassis that no node names (Ironic's
// ChassisNotEmpty otherwise, 400).
func (c *Conductor) DeleteChassis(ctx context.Context, chassisUUID string) error {
	ch, err := c.store.GetChassis(ctx, chassisUUID)
	if err != nil {
		return err
	}
	if err := c.store.DeleteChassis(ctx, ch.UUID); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "chassis deleted", "chassis", ch.UUID, "verb", "chassis-delete", "user", actorOf(ctx))
	return nil
}

// checkNodeChassis is called by CreateNode (before == nil) and UpdateNode
// when a node may name a chassis: a chassis_uuid that is set and changed must
// name an existing chassis, and is stored in that chassis' canonical
// spelling. An unknown chassis is Ironic's ChassisNotFound turned into a
// 400, as node.py's _replace_chassis_uuid_with_id does. In UpdateNode it
// runs while the node's write transaction holds the writer, so a chassis
// cannot be deleted between the check and the write.
func (c *Conductor) checkNodeChassis(ctx context.Context, before *string, n *storage.Node) error {
	if n.ChassisUUID == nil || *n.ChassisUUID == "" {
		n.ChassisUUID = nil
		return nil
	}
	if before != nil && *before == *n.ChassisUUID {
		return nil
	}
	ch, err := c.store.GetChassis(ctx, *n.ChassisUUID)
	if fault.Is(err, fault.NotFound) {
		return fault.New(fault.Invalid, "%s", Word(err).Error())
	}
	if err != nil {
		return err
	}
	n.ChassisUUID = &ch.UUID
	return nil
}
