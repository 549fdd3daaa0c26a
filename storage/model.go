package storage

import "time"

// JSONObject is a free-form dictionary stored as a JSON column
// (properties, driver_info, extra, ...). Never nil once loaded.
type JSONObject = map[string]any

// Node is a bare-metal node as stored. Field names follow Ironic's; the API
// layer decides which of them a given microversion may see.
type Node struct {
	ID   int64 // internal row id; creation order, Ironic's default sort key
	UUID string
	Name *string

	Driver string
	// Hardware interfaces, named as Ironic names them.
	BIOSInterface       string
	BootInterface       string
	ConsoleInterface    string
	DeployInterface     string
	FirmwareInterface   string
	InspectInterface    string
	ManagementInterface string
	NetworkInterface    string
	PowerInterface      string
	RAIDInterface       string
	RescueInterface     string
	StorageInterface    string
	VendorInterface     string

	ProvisionState       string
	TargetProvisionState *string
	PowerState           *string
	TargetPowerState     *string
	ProvisionUpdatedAt   *time.Time
	InspectionStartedAt  *time.Time
	InspectionFinishedAt *time.Time
	LastError            *string
	Reservation          *string // hostname of the conductor working on it
	Maintenance          bool
	MaintenanceReason    *string
	Fault                *string
	ConsoleEnabled       bool

	ConductorGroup  string
	ResourceClass   *string
	Owner           *string
	Lessee          *string
	Description     *string
	InstanceUUID    *string
	ChassisUUID     *string
	AllocationUUID  *string
	AutomatedClean  *bool
	Protected       bool
	ProtectedReason *string
	Retired         bool
	RetiredReason   *string
	BootMode        *string
	SecureBoot      *bool
	Shard           *string
	ParentNode      *string // uuid of the parent node
	// DisablePowerOff (API 1.95): castiron never powers the node off; it
	// reboots where it would power off and on.
	DisablePowerOff bool
	// InstanceName (1.104): the instance's name, filled from
	// instance_info.display_name when unset, cleared on undeploy.
	InstanceName *string
	// Health (1.109): OK, Warning or Critical as the BMC last reported it
	// during power sync; nil when unknown.
	Health *string

	Properties         JSONObject
	DriverInfo         JSONObject
	DriverInternalInfo JSONObject
	InstanceInfo       JSONObject
	Extra              JSONObject
	CleanStep          JSONObject
	DeployStep         JSONObject
	ServiceStep        JSONObject
	RAIDConfig         JSONObject
	TargetRAIDConfig   JSONObject
	NetworkData        JSONObject
	Traits             []string

	CreatedAt time.Time
	UpdatedAt *time.Time
	// RowVersion changes with every write of the row (random at insert,
	// one more per update): a cached view of the node is current while
	// the stored row version equals the one it was made from.
	RowVersion int64
}

// Port is a NIC of a node, identified by its MAC address.
type Port struct {
	ID                  int64
	UUID                string
	Name                *string
	NodeUUID            string
	PortgroupUUID       *string
	Address             string // lower-case MAC
	LocalLinkConnection JSONObject
	PXEEnabled          bool
	PhysicalNetwork     *string
	InternalInfo        JSONObject
	Extra               JSONObject
	IsSmartNIC          bool
	Description         *string // API 1.97
	Vendor              *string // API 1.100
	Category            *string // API 1.101
	// AvailableForDynamicPortgroup (1.111) defaults to true.
	AvailableForDynamicPortgroup bool
	CreatedAt                    time.Time
	UpdatedAt                    *time.Time
}

// Conductor is a conductor service's registration and heartbeat.
type Conductor struct {
	Hostname       string
	ConductorGroup string
	Drivers        []string
	APIURL         string // how other conductors reach its API; "" unknown
	Online         bool
	CreatedAt      time.Time
	UpdatedAt      *time.Time // last heartbeat
}

// Event is one entry of a node's history: a state change or an error.
type Event struct {
	UUID      string
	NodeUUID  string
	CreatedAt time.Time
	Conductor string
	EventType string // Ironic's event_type: provisioning, transition, ...
	Severity  string // INFO or ERROR
	Event     string // the message
	User      string // API user or "agent"/"conductor"
	Project   string // the user's project (API 1.113); "" none
	Verb      string // the verb or internal event that caused it
	FromState string
	ToState   string // the node's provision state after it (API 1.115 "state")
	// TargetProvisionState is the node's target after the event and
	// DurationSeconds the time it had spent since its provision state last
	// changed (API 1.115); UpdateNode fills both.
	TargetProvisionState string
	DurationSeconds      *int64
}

// SortDir is asc or desc.
type SortDir string

const (
	Asc  SortDir = "asc"
	Desc SortDir = "desc"
)

// Page is the pagination part of a list query.
type Page struct {
	Limit   int    // 0 = no limit
	Marker  string // uuid of the last item of the previous page
	SortKey string // a column name from the resource's sortable set; "" = id
	SortDir SortDir
}

// NodeQuery filters a node list. Nil pointers mean "no filter".
type NodeQuery struct {
	Page
	UUIDs           []string // non-nil: only these nodes (canonical uuids)
	ProvisionState  *string
	ProvisionStates []string // non-nil: only nodes in one of these states
	Maintenance     *bool
	Driver          *string
	Associated      *bool // instance_uuid set or not
	InstanceUUID    *string
	ChassisUUID     *string
	ConductorGroups []string // non-nil: only nodes in these groups
	Fault           *string
	ResourceClass   *string
	Owner           *string
	Lessee          *string
	// Project, when set, keeps the nodes it owns or leases (Ironic's
	// "project" filter, which policy applies to a project-scoped caller).
	Project             *string
	DescriptionContains *string
	Retired             *bool
	Shards              []string
	Sharded             *bool
	ParentNode          *string
	InstanceName        *string
	IncludeChildren     bool // false: nodes with a parent are left out
	Reserved            *bool
	PowerPending        *bool // target_power_state set or not
	// Columns, when set, limits what is read to these node columns (named
	// as the node fields; uuid is always read). Nil reads everything.
	Columns []string
}

// PortQuery filters a port list.
type PortQuery struct {
	Page
	NodeUUID      *string
	Address       *string
	PortgroupUUID *string
	// Shards, when non-nil, keeps the ports whose node is in one of these
	// shards (Ironic's list_by_node_shards); an empty set matches nothing.
	Shards []string
	// ConductorGroups, when non-nil, keeps the ports whose node is in one
	// of these conductor groups (API 1.99).
	ConductorGroups []string
	// DescriptionContains keeps the ports whose description holds it
	// (case-insensitive).
	DescriptionContains *string
	// Project, when set, keeps the ports of nodes it owns or leases.
	Project *string
}
