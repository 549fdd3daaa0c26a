package storage

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// nodeSQL is the generated SQL of the nodes table.
type nodeSQL struct {
	table[Node]
	byInstance string
	// versions reads nodes as NodeVersions, versionBy{UUID,Name} one.
	versions                     table[NodeVersion]
	versionByUUID, versionByName string
}

// NodeVersion is a node as GetNodeVersion and ListNodeVersions read it:
// what a cached view of the node is checked against (its row version) and
// what places it on the hash ring.
type NodeVersion struct {
	id             int64
	UUID           string
	RowVersion     int64
	ConductorGroup string
	Driver         string
}

// Node is v as a Node with only those fields set (what the hash ring
// needs to place it).
func (v *NodeVersion) Node() *Node {
	return &Node{ID: v.id, UUID: v.UUID, RowVersion: v.RowVersion, ConductorGroup: v.ConductorGroup, Driver: v.Driver}
}

func newNodeSQL() nodeSQL {
	t := resourceTable("nodes", func(n *Node) (*int64, *string, *time.Time, **time.Time) {
		return &n.ID, &n.UUID, &n.CreatedAt, &n.UpdatedAt
	}, []column[Node]{
		nullStrCol("name", func(n *Node) **string { return &n.Name }),
		strCol("driver", func(n *Node) *string { return &n.Driver }),
		strCol("bios_interface", func(n *Node) *string { return &n.BIOSInterface }),
		strCol("boot_interface", func(n *Node) *string { return &n.BootInterface }),
		strCol("console_interface", func(n *Node) *string { return &n.ConsoleInterface }),
		strCol("deploy_interface", func(n *Node) *string { return &n.DeployInterface }),
		strCol("firmware_interface", func(n *Node) *string { return &n.FirmwareInterface }),
		strCol("inspect_interface", func(n *Node) *string { return &n.InspectInterface }),
		strCol("management_interface", func(n *Node) *string { return &n.ManagementInterface }),
		strCol("network_interface", func(n *Node) *string { return &n.NetworkInterface }),
		strCol("power_interface", func(n *Node) *string { return &n.PowerInterface }),
		strCol("raid_interface", func(n *Node) *string { return &n.RAIDInterface }),
		strCol("rescue_interface", func(n *Node) *string { return &n.RescueInterface }),
		strCol("storage_interface", func(n *Node) *string { return &n.StorageInterface }),
		strCol("vendor_interface", func(n *Node) *string { return &n.VendorInterface }),
		strCol("provision_state", func(n *Node) *string { return &n.ProvisionState }),
		nullStrCol("target_provision_state", func(n *Node) **string { return &n.TargetProvisionState }),
		nullStrCol("power_state", func(n *Node) **string { return &n.PowerState }),
		nullStrCol("target_power_state", func(n *Node) **string { return &n.TargetPowerState }),
		nullTimeCol("provision_updated_at", func(n *Node) **time.Time { return &n.ProvisionUpdatedAt }),
		nullTimeCol("inspection_started_at", func(n *Node) **time.Time { return &n.InspectionStartedAt }),
		nullTimeCol("inspection_finished_at", func(n *Node) **time.Time { return &n.InspectionFinishedAt }),
		nullStrCol("last_error", func(n *Node) **string { return &n.LastError }),
		nullStrCol("reservation", func(n *Node) **string { return &n.Reservation }),
		boolCol("maintenance", func(n *Node) *bool { return &n.Maintenance }),
		nullStrCol("maintenance_reason", func(n *Node) **string { return &n.MaintenanceReason }),
		nullStrCol("fault", func(n *Node) **string { return &n.Fault }),
		boolCol("console_enabled", func(n *Node) *bool { return &n.ConsoleEnabled }),
		strCol("conductor_group", func(n *Node) *string { return &n.ConductorGroup }),
		nullStrCol("resource_class", func(n *Node) **string { return &n.ResourceClass }),
		nullStrCol("owner", func(n *Node) **string { return &n.Owner }),
		nullStrCol("lessee", func(n *Node) **string { return &n.Lessee }),
		nullStrCol("description", func(n *Node) **string { return &n.Description }),
		nullStrCol("instance_uuid", func(n *Node) **string { return &n.InstanceUUID }),
		nullStrCol("chassis_uuid", func(n *Node) **string { return &n.ChassisUUID }),
		nullStrCol("allocation_uuid", func(n *Node) **string { return &n.AllocationUUID }),
		nullBoolCol("automated_clean", func(n *Node) **bool { return &n.AutomatedClean }),
		boolCol("protected", func(n *Node) *bool { return &n.Protected }),
		nullStrCol("protected_reason", func(n *Node) **string { return &n.ProtectedReason }),
		boolCol("retired", func(n *Node) *bool { return &n.Retired }),
		nullStrCol("retired_reason", func(n *Node) **string { return &n.RetiredReason }),
		nullStrCol("boot_mode", func(n *Node) **string { return &n.BootMode }),
		nullBoolCol("secure_boot", func(n *Node) **bool { return &n.SecureBoot }),
		nullStrCol("shard", func(n *Node) **string { return &n.Shard }),
		nullStrCol("parent_node", func(n *Node) **string { return &n.ParentNode }),
		boolCol("disable_power_off", func(n *Node) *bool { return &n.DisablePowerOff }),
		nullStrCol("instance_name", func(n *Node) **string { return &n.InstanceName }),
		nullStrCol("health", func(n *Node) **string { return &n.Health }),
		objectCol("properties", func(n *Node) *JSONObject { return &n.Properties }),
		objectCol("driver_info", func(n *Node) *JSONObject { return &n.DriverInfo }),
		objectCol("driver_internal_info", func(n *Node) *JSONObject { return &n.DriverInternalInfo }),
		objectCol("instance_info", func(n *Node) *JSONObject { return &n.InstanceInfo }),
		objectCol("extra", func(n *Node) *JSONObject { return &n.Extra }),
		objectCol("clean_step", func(n *Node) *JSONObject { return &n.CleanStep }),
		objectCol("deploy_step", func(n *Node) *JSONObject { return &n.DeployStep }),
		objectCol("service_step", func(n *Node) *JSONObject { return &n.ServiceStep }),
		objectCol("raid_config", func(n *Node) *JSONObject { return &n.RAIDConfig }),
		objectCol("target_raid_config", func(n *Node) *JSONObject { return &n.TargetRAIDConfig }),
		objectCol("network_data", func(n *Node) *JSONObject { return &n.NetworkData }),
		listCol("traits", func(n *Node) *[]string { return &n.Traits }),
		intCol("row_version", func(n *Node) *int64 { return &n.RowVersion }),
	}, record[Node]{
		normalize: normalizeNode,
		named:     true,
		version:   func(n *Node) *int64 { return &n.RowVersion },
		unique: map[string]func(*Node) []string{
			"name":          one(func(n *Node) string { return deref(n.Name) }),
			"instance_uuid": one(func(n *Node) string { return deref(n.InstanceUUID) }),
		},
	})
	versions := newTable("nodes", "id", func(v *NodeVersion) *int64 { return &v.id }, []column[NodeVersion]{
		strCol("uuid", func(v *NodeVersion) *string { return &v.UUID }),
		intCol("row_version", func(v *NodeVersion) *int64 { return &v.RowVersion }),
		strCol("conductor_group", func(v *NodeVersion) *string { return &v.ConductorGroup }),
		strCol("driver", func(v *NodeVersion) *string { return &v.Driver }),
	})
	versions.sortable = t.sortable // it pages as the node list does
	return nodeSQL{
		versions:      versions,
		table:         t,
		byInstance:    t.selectFrom() + " WHERE instance_uuid = ?",
		versionByUUID: versions.selectFrom() + " WHERE uuid = ?",
		versionByName: versions.selectFrom() + " WHERE name = ?",
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
	n.ProvisionUpdatedAt = normTimePtr(n.ProvisionUpdatedAt)
	n.InspectionStartedAt = normTimePtr(n.InspectionStartedAt)
	n.InspectionFinishedAt = normTimePtr(n.InspectionFinishedAt)
	orEmpty(
		&n.Properties, &n.DriverInfo, &n.DriverInternalInfo, &n.InstanceInfo,
		&n.Extra, &n.CleanStep, &n.DeployStep, &n.ServiceStep, &n.RAIDConfig,
		&n.TargetRAIDConfig, &n.NetworkData,
	)
	if n.Traits == nil {
		n.Traits = []string{}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CreateNode inserts n and fills n.ID. An empty UUID or CreatedAt is filled
// in; the UUID is stored in canonical lower-case form.
func (s *DB) CreateNode(ctx context.Context, n *Node) error {
	if err := s.writeStmt(ctx, func(r runner) error { return s.nodes.create(ctx, r, n) }); err != nil {
		return err
	}
	s.stats.note(1)
	return nil
}

// getNode looks ident up as a UUID when it is one, else as a name.
func (s *DB) getNode(ctx context.Context, r runner, ident string) (*Node, error) {
	return s.nodes.get(ctx, r, ident)
}

// GetNode finds a node by UUID, or by name when ident is not a UUID.
func (s *DB) GetNode(ctx context.Context, ident string) (*Node, error) {
	return s.getNode(ctx, s.reader(), ident)
}

// GetNodeVersion finds a node as GetNode does but reads only what a view
// made from an earlier read is checked against: its row version, and what
// places it on the hash ring.
func (s *DB) GetNodeVersion(ctx context.Context, ident string) (*NodeVersion, error) {
	query, key := s.nodes.versionByUUID, ident
	if u, ok := canonicalUUID(ident); ok {
		key = u
	} else {
		query = s.nodes.versionByName
	}
	return s.nodes.versions.getOne(ctx, s.reader(), &NotFoundError{Table: "nodes", Key: ident}, query, key)
}

// GetNodeByInstance finds a node by instance_uuid.
func (s *DB) GetNodeByInstance(ctx context.Context, instanceUUID string) (*Node, error) {
	return s.nodes.getOne(ctx, s.reader(), &NotFoundError{Table: "nodes", Column: "instance_uuid", Key: instanceUUID},
		s.nodes.byInstance, instanceUUID)
}

// ListNodes returns the nodes matching q, one page of them when q.Limit is
// set. The filters follow Ironic's node list filters.
func (s *DB) ListNodes(ctx context.Context, q NodeQuery) ([]*Node, error) {
	return s.nodes.paged(ctx, s.reader(), s.nodeFilter(q), q.Page, pageSpec{
		defaultSort: "id",
		markerCol:   "uuid",
		columns:     withUUID(q.Columns),
	})
}

// ListNodeVersions is ListNodes reading only what GetNodeVersion reads,
// into small values; when q.Columns is set, only those of its columns
// (uuid is always read).
func (s *DB) ListNodeVersions(ctx context.Context, q NodeQuery) ([]*NodeVersion, error) {
	return s.nodes.versions.paged(ctx, s.reader(), s.nodeFilter(q), q.Page, pageSpec{
		defaultSort: "id",
		markerCol:   "uuid",
		columns:     withUUID(q.Columns),
	})
}

// nodeFilter is the WHERE of a node list: Ironic's node list filters.
func (s *DB) nodeFilter(q NodeQuery) *filter {
	f := &filter{}
	eq := func(col string, v *string) {
		if v != nil {
			f.add(col+" = ?", *v)
		}
	}
	// A literal, not a parameter: the flags' partial indexes (migration
	// 0013) cover "col = TRUE", which SQLite cannot prove of "col = ?".
	is := func(col string, v *bool) {
		switch {
		case v == nil:
		case *v:
			f.add(col + " = TRUE")
		default:
			f.add(col + " = FALSE")
		}
	}
	if q.UUIDs != nil {
		f.in("uuid", q.UUIDs)
	}
	eq("provision_state", q.ProvisionState)
	if q.ProvisionStates != nil {
		f.in("provision_state", q.ProvisionStates)
	}
	is("maintenance", q.Maintenance)
	eq("driver", q.Driver)
	if q.Associated != nil {
		f.nullness("instance_uuid", *q.Associated)
	}
	eq("instance_uuid", q.InstanceUUID)
	eq("chassis_uuid", q.ChassisUUID)
	if q.ConductorGroups != nil {
		f.in("conductor_group", q.ConductorGroups)
		if len(q.ConductorGroups) > 0 && !slices.Contains(q.ConductorGroups, "") {
			// Lets the partial index (migration 0013) serve the filter.
			f.add("conductor_group <> ''")
		}
	}
	eq("fault", q.Fault)
	eq("resource_class", q.ResourceClass)
	eq("owner", q.Owner)
	eq("lessee", q.Lessee)
	eq("instance_name", q.InstanceName)
	if q.Project != nil {
		f.add("(owner = ? OR lessee = ?)", *q.Project, *q.Project)
	}
	if q.DescriptionContains != nil {
		// Case-insensitive, as on Ironic's MySQL.
		f.add(`description `+s.r.d.like()+` ? ESCAPE '\'`, "%"+escapeLike(*q.DescriptionContains)+"%")
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
	if q.PowerPending != nil {
		f.nullness("target_power_state", *q.PowerPending)
	}
	return f
}

// withUUID adds uuid to a projection: NodeQuery promises it is always read.
func withUUID(cols []string) []string {
	if len(cols) == 0 || slices.Contains(cols, "uuid") {
		return cols
	}
	return append(append(make([]string, 0, len(cols)+1), cols...), "uuid")
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// UpdateNode reads the node, applies fn and writes it back in one write
// transaction, with fn's event if any. It returns the node as written.
// fn runs while the writer connection is held: it must be quick and must
// not write through the store itself.
func (s *DB) UpdateNode(ctx context.Context, ident string, fn NodeUpdate) (*Node, error) {
	var out *Node
	err := s.writeTx(ctx, func(r runner) error {
		query, _, key := s.nodes.identColumn(ident)
		n, stored, err := s.nodes.getStored(ctx, r, &NotFoundError{Table: "nodes", Key: ident}, query, key)
		if err != nil {
			return err
		}
		var ev *Event
		since := n.ProvisionUpdatedAt
		if err := s.nodes.rewriteStored(ctx, r, n, stored, func(n *Node) (err error) { ev, err = fn(n); return err }); err != nil {
			return err
		}
		if ev != nil {
			ev.NodeUUID = n.UUID
			fillEventState(ev, n, since)
			if err := s.insertEvent(ctx, r, ev); err != nil {
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

// fillEventState gives ev what Ironic's node_history_record reads off the
// node (API 1.115): the provision state and target after the change, and
// the whole seconds since the provision state last changed before it.
func fillEventState(ev *Event, n *Node, since *time.Time) {
	if ev.ToState == "" {
		ev.ToState = n.ProvisionState
	}
	if ev.TargetProvisionState == "" && n.TargetProvisionState != nil {
		ev.TargetProvisionState = *n.TargetProvisionState
	}
	if ev.DurationSeconds == nil && since != nil {
		at := ev.CreatedAt
		if at.IsZero() {
			at = time.Now()
		}
		d := int64(at.Sub(*since) / time.Second)
		ev.DurationSeconds = &d
	}
}

// DeleteNode removes a node; its ports and history go with it through
// ON DELETE CASCADE.
func (s *DB) DeleteNode(ctx context.Context, nodeUUID string) error {
	if err := s.write(ctx, func(r runner) error { return s.nodes.remove(ctx, r, nodeUUID) }); err != nil {
		return err
	}
	s.stats.note(1)
	return nil
}

// ReleaseAllReservations clears every reservation held by host and returns
// the UUIDs of the nodes it held.
func (s *DB) ReleaseAllReservations(ctx context.Context, host string) ([]string, error) {
	var released []string
	err := s.write(ctx, func(r runner) (err error) {
		released, err = queryAll(ctx, r, []string{}, "release reservations of "+host, scanOne[string],
			"UPDATE nodes SET reservation = NULL, updated_at = ?, row_version = row_version + 1 WHERE reservation = ? RETURNING uuid",
			formatTime(time.Now()), host)
		return err
	})
	return released, err
}
