package engine

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/google/uuid"

	"castiron/fault"
	"castiron/storage"
	"sync"
)

// CreateNode validates n, fills its defaults and stores it. enrollFirst is
// true from API 1.11 on (nodes start in enroll), false before (available).
func (c *Conductor) CreateNode(ctx context.Context, n *storage.Node, enrollFirst bool) error {
	if err := c.checkNodeChassis(ctx, nil, n); err != nil {
		return err
	}
	hw, ok := c.hw.Get(n.Driver)
	if !ok || n.ConductorGroup != c.cfg.ConductorGroup {
		return unknownDriver(n.Driver, n.ConductorGroup)
	}
	if err := fillInterfaces(n, hw, false); err != nil {
		return err
	}
	if err := checkTraits(n.Traits); err != nil {
		return err
	}
	if err := checkRootDeviceHints(n); err != nil {
		return err
	}
	if n.UUID == "" {
		n.UUID = uuid.NewString()
	}
	n.ProvisionState = string(Available)
	if enrollFirst {
		n.ProvisionState = string(Enroll)
	}
	n.CreatedAt = c.now()
	ensureMaps(n)
	if err := c.store.CreateNode(ctx, n); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "node created", "node", n.UUID, "state", n.ProvisionState, "verb", "create", "driver", describe(n))
	return nil
}

func ensureMaps(n *storage.Node) {
	for _, m := range []*storage.JSONObject{&n.Properties, &n.DriverInfo, &n.DriverInternalInfo,
		&n.InstanceInfo, &n.Extra, &n.CleanStep, &n.DeployStep, &n.ServiceStep,
		&n.RAIDConfig, &n.TargetRAIDConfig, &n.NetworkData} {
		if *m == nil {
			*m = storage.JSONObject{}
		}
	}
	if n.Traits == nil {
		n.Traits = []string{}
	}
}

// NodeChange applies an operator's changes to a node (a JSON patch already
// applied and checked for read-only fields by the API).
type NodeChange func(n *storage.Node) error

// UpdateNode applies change under the node's write lock and checks the result
// as Ironic's update_node does. resetInterfaces resets the interfaces to the
// new driver's defaults when the driver changes (?reset_interfaces=true).
func (c *Conductor) UpdateNode(ctx context.Context, ident string, change NodeChange, resetInterfaces bool) (*storage.Node, error) {
	var before storage.Node
	after, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		before = *n
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		if err := change(n); err != nil {
			return nil, err
		}
		if err := c.checkNodeChassis(ctx, before.ChassisUUID, n); err != nil {
			return nil, err
		}
		if err := checkRootDeviceHints(n); err != nil {
			return nil, err
		}
		// Fields only the engine moves.
		n.ProvisionState, n.TargetProvisionState = before.ProvisionState, before.TargetProvisionState
		n.PowerState, n.TargetPowerState = before.PowerState, before.TargetPowerState
		n.Reservation = nil
		ensureMaps(n)
		if n.Driver != before.Driver {
			hw, ok := c.hw.Get(n.Driver)
			if !ok {
				return nil, unknownDriver(n.Driver, n.ConductorGroup)
			}
			if err := fillInterfaces(n, hw, resetInterfaces); err != nil {
				return nil, err
			}
		} else if hw, err := c.hardwareOf(n); err == nil {
			if err := fillInterfaces(n, hw, false); err != nil {
				return nil, err
			}
		}
		if n.ConductorGroup != before.ConductorGroup && n.ConductorGroup != c.cfg.ConductorGroup {
			return nil, fault.New(fault.Invalid, "No conductor service registered which supports conductor group %q.", n.ConductorGroup)
		}
		if !n.Maintenance {
			n.MaintenanceReason, n.Fault = nil, nil
		}
		if err := checkProtectedRetired(&before, n); err != nil {
			return nil, err
		}
		if changedInstanceUUID(&before, n) && State(n.ProvisionState) == Active && before.InstanceUUID != nil && n.InstanceUUID != nil {
			return nil, fault.New(fault.Conflict, "Node %s is associated with instance %s.", n.UUID, *before.InstanceUUID)
		}
		stopsConsole(&before, n)
		return nil, nil
	})
	if err == nil && before.ConsoleEnabled {
		c.stopConsoleIfGone(&before, after)
	}
	return after, err
}

// checkProtectedRetired is Ironic's _check_update_protected and
// _check_update_retired on the changed node: clearing the flag clears its
// reason; setting it needs a state that allows it; a reason needs the flag.
// Both are checked on the node as changed, not per patch operation.
func checkProtectedRetired(before, n *storage.Node) error {
	if n.Protected != before.Protected {
		if !n.Protected {
			n.ProtectedReason = nil
		} else if st := State(n.ProvisionState); st != Active && st != Rescue {
			return fault.New(fault.Conflict, "Node %s can only be made protected in provision states 'active' or 'rescue', the current state is '%s'", n.UUID, n.ProvisionState)
		}
	}
	if deref(n.ProtectedReason) != deref(before.ProtectedReason) && deref(n.ProtectedReason) != "" && !n.Protected {
		return fault.New(fault.Invalid, "The protected_reason field can only be set when protected is True")
	}
	if n.Retired != before.Retired {
		if !n.Retired {
			n.RetiredReason = nil
		} else if State(n.ProvisionState) == Available {
			return fault.New(fault.Conflict, "Node %s can not have 'retired' set in provision state 'available', the current state is '%s'", n.UUID, n.ProvisionState)
		}
	}
	if deref(n.RetiredReason) != deref(before.RetiredReason) && deref(n.RetiredReason) != "" && !n.Retired {
		return fault.New(fault.Invalid, "The retired_reason field can only be set when retired is True")
	}
	return nil
}

func changedInstanceUUID(a, b *storage.Node) bool {
	return deref(a.InstanceUUID) != deref(b.InstanceUUID)
}

// deletableStates are Ironic's DELETE_ALLOWED_STATES plus available
// (allow_deleting_available_nodes defaults to true).
var deletableStates = []State{Manageable, Enroll, AdoptFail, Available}

// DeleteNode removes a node in a state that allows it, or in maintenance.
func (c *Conductor) DeleteNode(ctx context.Context, ident string) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	if n.Protected {
		return fault.New(fault.Forbidden, "Node %s is protected and cannot be undeployed, rebuilt or deleted", n.UUID)
	}
	// Ironic checks the instance first, then the state.
	if n.InstanceUUID != nil && !n.Maintenance {
		return fault.New(fault.Conflict, "Node %s is associated with instance %s.", n.UUID, *n.InstanceUUID)
	}
	if !n.Maintenance && !slices.Contains(deletableStates, State(n.ProvisionState)) {
		return fault.New(fault.Conflict, "Can not delete node \"%s\" while it is in provision state \"%s\". Valid provision states to perform deletion are: \"('manageable', 'enroll', 'adopt failed', 'available')\", or set the node into maintenance mode", n.UUID, n.ProvisionState)
	}
	if err := c.store.DeleteNode(ctx, n.UUID); err != nil {
		return err
	}
	c.stopConsoleIfGone(n, nil)
	c.aborts.take(n.UUID)
	c.log.InfoContext(ctx, "node deleted", "node", n.UUID, "state", n.ProvisionState, "verb", "delete")
	return nil
}

// SetMaintenance turns maintenance on (with a reason) or off.
func (c *Conductor) SetMaintenance(ctx context.Context, ident string, on bool, reason *string) error {
	_, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		n.Maintenance = on
		if on {
			n.MaintenanceReason = reason
		} else {
			n.MaintenanceReason, n.Fault = nil, nil
		}
		word := "off"
		if on {
			word = "on"
		}
		c.log.InfoContext(ctx, "maintenance "+word, "node", n.UUID, "state", n.ProvisionState, "verb", "maintenance")
		return &storage.Event{
			NodeUUID: n.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
			EventType: "maintenance", Severity: "INFO",
			Event: fmt.Sprintf("maintenance %s: %s", word, deref(reason)),
			User:  actorOf(ctx), Project: projectOf(ctx), Verb: "maintenance",
			FromState: n.ProvisionState, ToState: n.ProvisionState,
		}, nil
	})
	return err
}

var (
	customTrait = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`) })
	stdTrait    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`) })
)

// MaxTraits is Ironic's per-node limit.
const MaxTraits = 50

func checkTraits(traits []string) error {
	if len(traits) > MaxTraits {
		return fault.New(fault.Invalid, "Could not add traits to node: the maximum number of traits per node is %d.", MaxTraits)
	}
	for _, t := range traits {
		if len(t) > 255 {
			return fault.New(fault.Invalid, "Invalid trait: %s. A trait must be no longer than 255 characters.", t)
		}
		if !customTrait().MatchString(t) && !stdTrait().MatchString(t) {
			return fault.New(fault.Invalid, "Invalid trait: %s. A valid trait must be no longer than 255 characters. Custom traits must be prefixed with 'CUSTOM_' and contain only the characters A-Z, 0-9 and _.", t)
		}
	}
	return nil
}

// SetTraits replaces (add=false) or extends (add=true) the node's traits.
func (c *Conductor) SetTraits(ctx context.Context, ident string, traits []string, add bool) error {
	if err := checkTraits(traits); err != nil {
		return err
	}
	_, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		next := slices.Clone(traits)
		if add {
			next = slices.Clone(n.Traits)
			for _, t := range traits {
				if !slices.Contains(next, t) {
					next = append(next, t)
				}
			}
		}
		slices.Sort(next)
		next = slices.Compact(next)
		if err := checkTraits(next); err != nil {
			return nil, err
		}
		n.Traits = next
		return nil, nil
	})
	return err
}

// RemoveTrait removes one trait, or all when trait is "".
func (c *Conductor) RemoveTrait(ctx context.Context, ident, trait string) error {
	_, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		if trait == "" {
			n.Traits = []string{}
			return nil, nil
		}
		i := slices.Index(n.Traits, trait)
		if i < 0 {
			return nil, fault.New(fault.NotFound, "Node %s doesn't have a trait '%s'", n.UUID, trait)
		}
		n.Traits = slices.Delete(n.Traits, i, i+1)
		return nil, nil
	})
	return err
}

// InterfaceResult is one entry of GET /validate.
type InterfaceResult struct {
	Result *bool   `json:"result"`
	Reason *string `json:"reason"`
}

// Validate checks each interface of the node as GET /v1/nodes/{id}/validate.
func (c *Conductor) Validate(ctx context.Context, ident string) (map[string]InterfaceResult, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return nil, err
	}
	yes := true
	no := false
	ok := InterfaceResult{Result: &yes}
	bad := func(reason string) InterfaceResult { return InterfaceResult{Result: &no, Reason: &reason} }
	unsupported := func(kind string) InterfaceResult {
		r := fmt.Sprintf("%s interface not supported by driver %s", kind, n.Driver)
		return InterfaceResult{Result: nil, Reason: &r}
	}
	out := map[string]InterfaceResult{}
	dn := driverNode(n)
	for _, kind := range interfaceKinds {
		impl := InterfaceOf(n, kind)
		switch {
		case impl == "no-"+kind || (impl == "noop" && kind != "network" && kind != "storage" && kind != "management"):
			out[kind] = unsupported(kind)
		case kind == "power":
			if err := hw.Power.Validate(dn); err != nil {
				out[kind] = bad(err.Error())
			} else {
				out[kind] = ok
			}
		case kind == "management":
			if err := hw.Management.Validate(dn); err != nil {
				out[kind] = bad(err.Error())
			} else {
				out[kind] = ok
			}
		case kind == "deploy" && ramdiskDeploy(n):
			if _, err := c.ramdiskInstance(n); err != nil {
				out[kind] = bad(err.Error())
			} else {
				out[kind] = ok
			}
		case kind == "deploy" && customAgentDeploy(n):
			out[kind] = ok // instance_info is the user's steps' business
		case kind == "deploy" && needsAgent(n, "deploy"):
			if _, has := n.InstanceInfo["image_source"]; !has {
				out[kind] = bad("Cannot validate image information for node " + n.UUID + " because one or more parameters are missing from its instance_info. Missing are: ['image_source']")
			} else {
				out[kind] = ok
			}
		default:
			out[kind] = ok
		}
	}
	return out, nil
}
