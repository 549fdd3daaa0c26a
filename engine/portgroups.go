package engine

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"castiron/fault"
	"castiron/storage"
)

// DefaultPortgroupMode is Ironic's [DEFAULT]default_portgroup_mode, the
// bonding mode of a portgroup created without one.
const DefaultPortgroupMode = "active-backup"

// portgroupMoveStates are the states in which a portgroup may move to the
// node (Ironic's update_portgroup), besides maintenance.
var portgroupMoveStates = []State{Enroll, Inspecting, InspectWait, Manageable}

func ensurePortgroupMaps(pg *storage.Portgroup) {
	for _, m := range []*storage.JSONObject{&pg.Extra, &pg.InternalInfo, &pg.Properties} {
		if *m == nil {
			*m = storage.JSONObject{}
		}
	}
}

// nodeForPortgroup finds the node a portgroup names. An unknown node is a
// 400 on portgroup requests, as Ironic answers it.
func (c *Conductor) nodeForPortgroup(ctx context.Context, ident string) (*storage.Node, error) {
	n, err := c.store.GetNode(ctx, ident)
	if fault.Is(err, fault.NotFound) {
		return nil, fault.New(fault.Invalid, "%s", Word(err).Error())
	}
	return n, err
}

func normalizePortgroupAddress(pg *storage.Portgroup) error {
	if pg.Address == nil {
		return nil
	}
	mac, err := NormalizeMAC(*pg.Address)
	if err != nil {
		return err
	}
	pg.Address = &mac
	return nil
}

// CreatePortgroup stores a new portgroup of an existing node. Like Ironic's
// API it takes no node lock: nothing on the node changes.
func (c *Conductor) CreatePortgroup(ctx context.Context, pg *storage.Portgroup) error {
	n, err := c.nodeForPortgroup(ctx, pg.NodeUUID)
	if err != nil {
		return err
	}
	pg.NodeUUID = n.UUID
	if err := normalizePortgroupAddress(pg); err != nil {
		return err
	}
	if pg.Mode == nil || *pg.Mode == "" {
		mode := DefaultPortgroupMode
		pg.Mode = &mode
	}
	if pg.UUID == "" {
		pg.UUID = uuid.NewString()
	}
	pg.CreatedAt = c.now()
	ensurePortgroupMaps(pg)
	if err := c.store.CreatePortgroup(ctx, pg); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "portgroup created", "node", n.UUID, "state", n.ProvisionState, "verb", "portgroup-create", "portgroup", pg.UUID)
	return nil
}

// UpdatePortgroup applies change to a portgroup and checks the result as
// Ironic's API and update_portgroup do, against the node the portgroup ends
// up on: that node must not be inspecting or locked; moving to another node
// needs a state that allows it (or maintenance) and an empty portgroup; and
// with a network interface that keeps VIFs, standalone_ports_supported may
// not be turned off while a member port boots by PXE or carries a VIF.
func (c *Conductor) UpdatePortgroup(ctx context.Context, ident string, change func(pg *storage.Portgroup) error) (*storage.Portgroup, error) {
	old, err := c.store.GetPortgroup(ctx, ident)
	if err != nil {
		return nil, err
	}
	var node *storage.Node
	physnetChanged := false
	out, err := c.store.UpdatePortgroup(ctx, old.UUID, func(pg *storage.Portgroup) error {
		before := *pg
		if err := change(pg); err != nil {
			return err
		}
		physnetChanged = deref(before.PhysicalNetwork) != deref(pg.PhysicalNetwork) || (before.PhysicalNetwork == nil) != (pg.PhysicalNetwork == nil)
		n, err := c.nodeForPortgroup(ctx, pg.NodeUUID)
		if err != nil {
			return err
		}
		node = n
		pg.NodeUUID = n.UUID
		if err := normalizePortgroupAddress(pg); err != nil {
			return err
		}
		ensurePortgroupMaps(pg)
		if State(n.ProvisionState) == Inspecting {
			return fault.New(fault.Conflict, "Cannot update portgroup \"%s\" on node \"%s\" while it is in state \"%s\".", pg.UUID, n.UUID, n.ProvisionState)
		}
		if n.Reservation != nil {
			return fault.Locked(n.UUID, *n.Reservation)
		}
		if pg.NodeUUID != before.NodeUUID {
			if !n.Maintenance && !slices.Contains(portgroupMoveStates, State(n.ProvisionState)) {
				return fault.New(fault.Conflict, "Portgroup %s can not be associated to node %s unless the node is in a %s state or in maintenance mode. Current state is '%s'.",
					pg.UUID, n.UUID, pgJoinStates(portgroupMoveStates), n.ProvisionState)
			}
			members, err := c.portgroupPorts(ctx, pg.UUID, 1)
			if err != nil {
				return err
			}
			if len(members) > 0 {
				// Ironic's PortgroupNotEmpty with its own message (400).
				return fault.New(fault.Invalid, "Portgroup %s can not be associated with node %s because there are ports associated with this portgroup.", pg.UUID, n.UUID)
			}
		}
		if before.StandalonePortsSupported && !pg.StandalonePortsSupported && vifsKept(n) {
			members, err := c.portgroupPorts(ctx, pg.UUID, 0)
			if err != nil {
				return err
			}
			for _, p := range members {
				var reason []string
				if p.PXEEnabled {
					reason = append(reason, "'pxe_enabled' is set to True")
				}
				if vif := vifOf(p); vif != "" {
					reason = append(reason, "VIF "+vif+" is attached to this port")
				}
				if len(reason) > 0 {
					return fault.New(fault.Conflict, "standalone_ports_supported can not be set to False, because the port group %s contains port with %s",
						pg.UUID, strings.Join(reason, ", "))
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if physnetChanged {
		if err := c.portgroupPhysnetToPorts(ctx, out); err != nil {
			return nil, err
		}
	}
	c.log.InfoContext(ctx, "portgroup updated", "node", node.UUID, "state", node.ProvisionState, "verb", "portgroup-update", "portgroup", out.UUID)
	return out, nil
}

// portgroupPhysnetToPorts is Ironic's update_portgroup_physical_network
// (API 1.102): the portgroup's member ports take its physical_network.
func (c *Conductor) portgroupPhysnetToPorts(ctx context.Context, pg *storage.Portgroup) error {
	members, err := c.portgroupPorts(ctx, pg.UUID, 0)
	if err != nil {
		return err
	}
	for _, p := range members {
		if deref(p.PhysicalNetwork) == deref(pg.PhysicalNetwork) && (p.PhysicalNetwork == nil) == (pg.PhysicalNetwork == nil) {
			continue
		}
		if _, err := c.store.UpdatePort(ctx, p.UUID, func(p *storage.Port) error {
			p.PhysicalNetwork = pg.PhysicalNetwork
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// DeletePortgroup removes a portgroup without ports while its node is not
// busy (Ironic's destroy_portgroup; PortgroupNotEmpty is a 400).
func (c *Conductor) DeletePortgroup(ctx context.Context, ident string) error {
	pg, err := c.store.GetPortgroup(ctx, ident)
	if err != nil {
		return err
	}
	n, err := c.store.GetNode(ctx, pg.NodeUUID)
	if err == nil && n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	if err := c.store.DeletePortgroup(ctx, pg.UUID); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "portgroup deleted", "node", pg.NodeUUID, "verb", "portgroup-delete", "portgroup", pg.UUID)
	return nil
}

// portgroupPorts lists the member ports of a portgroup (at most limit when
// limit > 0).
func (c *Conductor) portgroupPorts(ctx context.Context, pgUUID string, limit int) ([]*storage.Port, error) {
	return c.store.ListPorts(ctx, storage.PortQuery{PortgroupUUID: &pgUUID, Page: storage.Page{Limit: limit}})
}

func pgJoinStates(states []State) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// checkPortPortgroup is the portgroup hook of CreatePort (old == nil) and
// UpdatePort (old is the port before the change): when p names a portgroup,
// it must exist and belong to p's node, the port must not boot by PXE (or
// carry a VIF) in a portgroup without standalone ports, and all ports of a
// portgroup must share one physical network (API 1.34; Ironic's
// validate_port_physnet). p.PortgroupUUID is left in canonical form.
// p.NodeUUID must already be the node's canonical UUID.
func (c *Conductor) checkPortPortgroup(ctx context.Context, old, p *storage.Port) error {
	if p.PortgroupUUID == nil || *p.PortgroupUUID == "" {
		p.PortgroupUUID = nil
		return nil
	}
	if _, err := uuid.Parse(*p.PortgroupUUID); err != nil {
		return fault.New(fault.Invalid, "Expected UUID for portgroup_uuid: %s", *p.PortgroupUUID)
	}
	pg, err := c.store.GetPortgroup(ctx, *p.PortgroupUUID)
	if fault.Is(err, fault.NotFound) {
		// Ironic turns PortgroupNotFound into a 400 on port requests.
		return fault.New(fault.Invalid, "%s", Word(err).Error())
	}
	if err != nil {
		return err
	}
	p.PortgroupUUID = &pg.UUID
	if pg.NodeUUID != p.NodeUUID {
		return fault.New(fault.Invalid, "Port can not be added to a portgroup belonging to a different node.")
	}
	creating := old == nil
	joined := creating || deref(old.PortgroupUUID) != pg.UUID
	if creating && p.PXEEnabled && !pg.StandalonePortsSupported {
		return fault.New(fault.Conflict, "Port group %s doesn't support standalone ports. This port cannot be created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.", pg.UUID)
	}
	if joined || !pgSamePhysnet(old.PhysicalNetwork, p.PhysicalNetwork) {
		if err := c.checkPortgroupPhysnet(ctx, pg, p); err != nil {
			return err
		}
	}
	if creating || pg.StandalonePortsSupported {
		return nil
	}
	// Ironic's network interfaces that keep VIFs check this in port_changed.
	vif := vifOf(p)
	if !joined && old.PXEEnabled == p.PXEEnabled && vif == "" {
		return nil
	}
	n, err := c.store.GetNode(ctx, p.NodeUUID)
	if err != nil {
		return err
	}
	if !vifsKept(n) {
		return nil
	}
	var reason []string
	if p.PXEEnabled {
		reason = append(reason, "'pxe_enabled' was set to True")
	}
	if vif != "" {
		reason = append(reason, "VIF "+vif+" is attached to the port")
	}
	if len(reason) > 0 {
		// Ironic's message, double space included.
		return fault.New(fault.Conflict, "Port group %s doesn't support standalone ports. This port %s cannot be  a member of that port group because of: %s",
			pg.UUID, p.UUID, strings.Join(reason, ", "))
	}
	return nil
}

func pgSamePhysnet(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// pgPhysnetName is how Ironic's messages print a physical network (Python's
// str of None for none).
func pgPhysnetName(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}

// checkPortgroupPhysnet checks that p would share the physical network of
// the other member ports of pg. A portgroup of its own physical_network
// (API 1.102) is not served, so an empty portgroup takes any port.
func (c *Conductor) checkPortgroupPhysnet(ctx context.Context, pg *storage.Portgroup, p *storage.Port) error {
	members, err := c.portgroupPorts(ctx, pg.UUID, 0)
	if err != nil {
		return err
	}
	seen := map[string]*string{}
	for _, m := range members {
		if m.UUID == p.UUID {
			continue
		}
		seen[pgPhysnetName(m.PhysicalNetwork)] = m.PhysicalNetwork
	}
	switch len(seen) {
	case 0:
		return nil
	case 1:
	default:
		names := make([]string, 0, len(seen))
		for name := range seen {
			names = append(names, name)
		}
		sort.Strings(names)
		// Ironic's PortgroupPhysnetInconsistent, a plain IronicException
		// (500): it "shouldn't ever happen".
		return fault.New(fault.Internal, "Port group %s has member ports with inconsistent physical networks (%s). All ports in a port group must have the same physical network.",
			pg.UUID, strings.Join(names, ", "))
	}
	var pgPhysnet *string
	for _, v := range seen {
		pgPhysnet = v
	}
	if !pgSamePhysnet(pgPhysnet, p.PhysicalNetwork) {
		return fault.New(fault.Conflict, "Port with physical network %s cannot become a member of port group %s which has ports in physical network %s.",
			pgPhysnetName(p.PhysicalNetwork), pg.UUID, pgPhysnetName(pgPhysnet))
	}
	return nil
}
