package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"castiron/engine/fault"
)

// nodeSQL is the generated SQL of the nodes table.
type nodeSQL struct {
	table[Node]
	byUUID     string
	byName     string
	byInstance string
	update     string
}

func newNodeSQL() nodeSQL {
	t := newTable("nodes", "id", func(n *Node) *int64 { return &n.ID }, []column[Node]{
		fixedCol("uuid", func(n *Node) any { return &n.UUID }),
		col("name", func(n *Node) any { return &n.Name }),
		col("driver", func(n *Node) any { return &n.Driver }),
		col("bios_interface", func(n *Node) any { return &n.BIOSInterface }),
		col("boot_interface", func(n *Node) any { return &n.BootInterface }),
		col("console_interface", func(n *Node) any { return &n.ConsoleInterface }),
		col("deploy_interface", func(n *Node) any { return &n.DeployInterface }),
		col("firmware_interface", func(n *Node) any { return &n.FirmwareInterface }),
		col("inspect_interface", func(n *Node) any { return &n.InspectInterface }),
		col("management_interface", func(n *Node) any { return &n.ManagementInterface }),
		col("network_interface", func(n *Node) any { return &n.NetworkInterface }),
		col("power_interface", func(n *Node) any { return &n.PowerInterface }),
		col("raid_interface", func(n *Node) any { return &n.RAIDInterface }),
		col("rescue_interface", func(n *Node) any { return &n.RescueInterface }),
		col("storage_interface", func(n *Node) any { return &n.StorageInterface }),
		col("vendor_interface", func(n *Node) any { return &n.VendorInterface }),
		col("provision_state", func(n *Node) any { return &n.ProvisionState }),
		col("target_provision_state", func(n *Node) any { return &n.TargetProvisionState }),
		col("power_state", func(n *Node) any { return &n.PowerState }),
		col("target_power_state", func(n *Node) any { return &n.TargetPowerState }),
		col("provision_updated_at", func(n *Node) any { return nullTimeCol{&n.ProvisionUpdatedAt} }),
		col("inspection_started_at", func(n *Node) any { return nullTimeCol{&n.InspectionStartedAt} }),
		col("inspection_finished_at", func(n *Node) any { return nullTimeCol{&n.InspectionFinishedAt} }),
		col("last_error", func(n *Node) any { return &n.LastError }),
		col("reservation", func(n *Node) any { return &n.Reservation }),
		col("maintenance", func(n *Node) any { return &n.Maintenance }),
		col("maintenance_reason", func(n *Node) any { return &n.MaintenanceReason }),
		col("fault", func(n *Node) any { return &n.Fault }),
		col("console_enabled", func(n *Node) any { return &n.ConsoleEnabled }),
		col("conductor_group", func(n *Node) any { return &n.ConductorGroup }),
		col("resource_class", func(n *Node) any { return &n.ResourceClass }),
		col("owner", func(n *Node) any { return &n.Owner }),
		col("lessee", func(n *Node) any { return &n.Lessee }),
		col("description", func(n *Node) any { return &n.Description }),
		col("instance_uuid", func(n *Node) any { return &n.InstanceUUID }),
		col("chassis_uuid", func(n *Node) any { return &n.ChassisUUID }),
		col("allocation_uuid", func(n *Node) any { return &n.AllocationUUID }),
		col("automated_clean", func(n *Node) any { return &n.AutomatedClean }),
		col("protected", func(n *Node) any { return &n.Protected }),
		col("protected_reason", func(n *Node) any { return &n.ProtectedReason }),
		col("retired", func(n *Node) any { return &n.Retired }),
		col("retired_reason", func(n *Node) any { return &n.RetiredReason }),
		col("boot_mode", func(n *Node) any { return &n.BootMode }),
		col("secure_boot", func(n *Node) any { return &n.SecureBoot }),
		col("shard", func(n *Node) any { return &n.Shard }),
		col("parent_node", func(n *Node) any { return &n.ParentNode }),
		docCol("properties", func(n *Node) any { return objectCol{&n.Properties} }),
		docCol("driver_info", func(n *Node) any { return objectCol{&n.DriverInfo} }),
		docCol("driver_internal_info", func(n *Node) any { return objectCol{&n.DriverInternalInfo} }),
		docCol("instance_info", func(n *Node) any { return objectCol{&n.InstanceInfo} }),
		docCol("extra", func(n *Node) any { return objectCol{&n.Extra} }),
		docCol("clean_step", func(n *Node) any { return objectCol{&n.CleanStep} }),
		docCol("deploy_step", func(n *Node) any { return objectCol{&n.DeployStep} }),
		docCol("service_step", func(n *Node) any { return objectCol{&n.ServiceStep} }),
		docCol("raid_config", func(n *Node) any { return objectCol{&n.RAIDConfig} }),
		docCol("target_raid_config", func(n *Node) any { return objectCol{&n.TargetRAIDConfig} }),
		docCol("network_data", func(n *Node) any { return objectCol{&n.NetworkData} }),
		docCol("traits", func(n *Node) any { return listCol{&n.Traits} }),
		fixedCol("created_at", func(n *Node) any { return timeCol{&n.CreatedAt} }),
		col("updated_at", func(n *Node) any { return nullTimeCol{&n.UpdatedAt} }),
	})
	return nodeSQL{
		table:      t,
		byUUID:     t.selectFrom() + " WHERE uuid = ?",
		byName:     t.selectFrom() + " WHERE name = ?",
		byInstance: t.selectFrom() + " WHERE instance_uuid = ?",
		update:     "UPDATE nodes SET " + t.updateSet + " WHERE id = ?",
	}
}

// canonicalUUID returns the lower-case hyphenated form of ident when it is a
// UUID in any spelling Ironic accepts.
func canonicalUUID(ident string) (string, bool) {
	u, err := uuid.Parse(ident)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// uuidKey is the stored form of a UUID argument: canonical when it parses,
// as given otherwise (it then simply matches nothing).
func uuidKey(s string) string {
	if u, ok := canonicalUUID(s); ok {
		return u
	}
	return s
}

// normalizeNode gives n the shape it has after a round trip, so the caller's
// copy equals what a later read returns.
func normalizeNode(n *Node) {
	n.CreatedAt = normTime(n.CreatedAt)
	n.UpdatedAt = normTimePtr(n.UpdatedAt)
	n.ProvisionUpdatedAt = normTimePtr(n.ProvisionUpdatedAt)
	n.InspectionStartedAt = normTimePtr(n.InspectionStartedAt)
	n.InspectionFinishedAt = normTimePtr(n.InspectionFinishedAt)
	for _, m := range []*JSONObject{
		&n.Properties, &n.DriverInfo, &n.DriverInternalInfo, &n.InstanceInfo,
		&n.Extra, &n.CleanStep, &n.DeployStep, &n.ServiceStep, &n.RAIDConfig,
		&n.TargetRAIDConfig, &n.NetworkData,
	} {
		if *m == nil {
			*m = JSONObject{}
		}
	}
	if n.Traits == nil {
		n.Traits = []string{}
	}
}

// nodeWriteError turns a constraint violation into Ironic's Conflict.
func nodeWriteError(err error, n *Node) error {
	if v, ok := violationOf(err); ok {
		switch v.unique {
		case "nodes.uuid":
			return fault.New(fault.Conflict, "A node with UUID %s already exists.", n.UUID)
		case "nodes.name":
			return fault.New(fault.Conflict, "A node with name %s already exists.", deref(n.Name))
		case "nodes.instance_uuid":
			// Ironic's InstanceAssociated, which has no final period.
			return fault.New(fault.Conflict, "Instance %s is already associated with a node, it cannot be associated with this other node %s",
				deref(n.InstanceUUID), n.UUID)
		}
	}
	return fmt.Errorf("storage: write node %s: %w", n.UUID, err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CreateNode inserts n and fills n.ID. An empty UUID or CreatedAt is filled
// in; the UUID is stored in canonical lower-case form.
func (s *SQLite) CreateNode(ctx context.Context, n *Node) error {
	if n.UUID == "" {
		n.UUID = uuid.NewString()
	} else if u, ok := canonicalUUID(n.UUID); ok {
		n.UUID = u
	} else {
		return fault.New(fault.Invalid, "Expected a UUID but received %s.", n.UUID)
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	normalizeNode(n)
	err := s.w.QueryRowContext(ctx, s.nodes.insert, s.nodes.insertArgs(n)...).Scan(&n.ID)
	if err != nil {
		return nodeWriteError(err, n)
	}
	return nil
}

// getNode looks ident up as a UUID when it is one, else as a name.
func (s *SQLite) getNode(ctx context.Context, q queryer, ident string) (*Node, error) {
	if u, ok := canonicalUUID(ident); ok {
		return s.nodes.getOne(ctx, q, fault.NodeNotFound(ident), s.nodes.byUUID, u)
	}
	return s.nodes.getOne(ctx, q, fault.NodeNotFound(ident), s.nodes.byName, ident)
}

// GetNode finds a node by UUID, or by name when ident is not a UUID.
func (s *SQLite) GetNode(ctx context.Context, ident string) (*Node, error) {
	return s.getNode(ctx, s.r, ident)
}

// GetNodeByInstance finds a node by instance_uuid.
func (s *SQLite) GetNodeByInstance(ctx context.Context, instanceUUID string) (*Node, error) {
	return s.nodes.getOne(ctx, s.r, fault.New(fault.NotFound, "Instance %s could not be found.", instanceUUID),
		s.nodes.byInstance, instanceUUID)
}

// ListNodes returns the nodes matching q, one page of them when q.Limit is
// set. The filters follow Ironic's node list filters.
func (s *SQLite) ListNodes(ctx context.Context, q NodeQuery) ([]*Node, error) {
	f := &filter{}
	eq := func(col string, v *string) {
		if v != nil {
			f.add(col+" = ?", *v)
		}
	}
	is := func(col string, v *bool) {
		if v != nil {
			f.add(col+" = ?", *v)
		}
	}
	eq("provision_state", q.ProvisionState)
	is("maintenance", q.Maintenance)
	eq("driver", q.Driver)
	if q.Associated != nil {
		f.nullness("instance_uuid", *q.Associated)
	}
	eq("instance_uuid", q.InstanceUUID)
	eq("chassis_uuid", q.ChassisUUID)
	if q.ConductorGroups != nil {
		f.in("conductor_group", q.ConductorGroups)
	}
	eq("fault", q.Fault)
	eq("resource_class", q.ResourceClass)
	eq("owner", q.Owner)
	eq("lessee", q.Lessee)
	if q.DescriptionContains != nil {
		// LIKE is case-insensitive for ASCII in SQLite, as on Ironic's
		// MySQL; a PostgreSQL store would use ILIKE.
		f.add(`description LIKE ? ESCAPE '\'`, "%"+escapeLike(*q.DescriptionContains)+"%")
	}
	is("retired", q.Retired)
	if q.Shards != nil {
		f.in("shard", q.Shards)
	}
	if q.Sharded != nil {
		f.nullness("shard", *q.Sharded)
	}
	// Ironic drops parent_node when include_children is set; here an
	// explicit parent always filters, which is what a caller asking for
	// both means.
	switch {
	case q.ParentNode != nil:
		f.add("parent_node = ?", *q.ParentNode)
	case !q.IncludeChildren:
		f.add("parent_node IS NULL")
	}
	if q.Reserved != nil {
		f.nullness("reservation", *q.Reserved)
	}
	return s.nodes.paged(ctx, s.r, f, q.Page, pageSpec{
		defaultSort:    "id",
		markerCol:      "uuid",
		markerNotFound: fault.NodeNotFound,
	})
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// UpdateNode reads the node, applies fn and writes it back in one write
// transaction, with fn's event if any. It returns the node as written.
// fn runs while the writer connection is held: it must be quick and must
// not write through the store itself.
func (s *SQLite) UpdateNode(ctx context.Context, ident string, fn NodeUpdate) (*Node, error) {
	var out *Node
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		n, err := s.getNode(ctx, tx, ident)
		if err != nil {
			return err
		}
		id, nodeUUID, created := n.ID, n.UUID, n.CreatedAt
		ev, err := fn(n)
		if err != nil {
			return err
		}
		if n.ID != id || n.UUID != nodeUUID {
			// Ports and history reference the uuid.
			return fmt.Errorf("storage: update node %s: id and uuid cannot change", nodeUUID)
		}
		n.CreatedAt = created
		now := time.Now()
		n.UpdatedAt = &now
		normalizeNode(n)
		if _, err := tx.ExecContext(ctx, s.nodes.update, s.nodes.updateArgs(n, n.ID)...); err != nil {
			return nodeWriteError(err, n)
		}
		if ev != nil {
			ev.NodeUUID = n.UUID
			if err := s.insertEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		out = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteNode removes a node; its ports and history go with it through
// ON DELETE CASCADE.
func (s *SQLite) DeleteNode(ctx context.Context, nodeUUID string) error {
	res, err := s.w.ExecContext(ctx, "DELETE FROM nodes WHERE uuid = ?", uuidKey(nodeUUID))
	if err != nil {
		return fmt.Errorf("storage: delete node %s: %w", nodeUUID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("storage: delete node %s: %w", nodeUUID, err)
	} else if n == 0 {
		return fault.NodeNotFound(nodeUUID)
	}
	return nil
}

// ReleaseAllReservations clears every reservation held by host and returns
// the UUIDs of the nodes it held.
func (s *SQLite) ReleaseAllReservations(ctx context.Context, host string) ([]string, error) {
	rows, err := s.w.QueryContext(ctx,
		"UPDATE nodes SET reservation = NULL, updated_at = ? WHERE reservation = ? RETURNING uuid",
		formatTime(time.Now()), host)
	if err != nil {
		return nil, fmt.Errorf("storage: release reservations of %s: %w", host, err)
	}
	defer rows.Close()
	uuids := []string{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("storage: release reservations of %s: %w", host, err)
		}
		uuids = append(uuids, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: release reservations of %s: %w", host, err)
	}
	return uuids, nil
}
