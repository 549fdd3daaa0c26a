package httpapi

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/fault/pyrepr"
	"castiron/storage"
	"sync"
)

func typeErr(field string, v any, want string) error {
	return errInvalid("Invalid value for %s: %s is not of type '%s'", field, pyrepr.Repr(v), want)
}

// setStr is a node's optional string setter: null clears the field,
// anything but a string is a type error, and check vets (and may rewrite)
// a string.
func setStr(field string, dst func(n *storage.Node) **string, check func(s string) (string, error)) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		if v == nil {
			*dst(n) = nil
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return typeErr(field, v, "string")
		}
		s, err := check(s)
		if err != nil {
			return err
		}
		*dst(n) = &s
		return nil
	}
}

func setStrPtr(field string, dst func(n *storage.Node) **string, maxLen int) func(*storage.Node, any) error {
	return setStr(field, dst, func(s string) (string, error) {
		if maxLen > 0 && len(s) > maxLen {
			return "", errInvalid("Invalid value for %s: '%s' is too long (maximum %d characters)", field, s, maxLen)
		}
		return s, nil
	})
}

func setBoolField(field string, dst func(n *storage.Node) *bool) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		switch t := v.(type) {
		case nil:
			*dst(n) = false
		case bool:
			*dst(n) = t
		case string:
			b, err := parseBoolString(t)
			if err != nil {
				return typeErr(field, v, "boolean")
			}
			*dst(n) = b
		default:
			return typeErr(field, v, "boolean")
		}
		return nil
	}
}

func parseBoolString(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on", "t", "y":
		return true, nil
	case "false", "0", "no", "off", "f", "n":
		return false, nil
	}
	return false, errInvalid("Invalid boolean %q", s)
}

func setObject(field string, dst func(n *storage.Node) *storage.JSONObject) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		if v == nil {
			*dst(n) = storage.JSONObject{}
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return typeErr(field, v, "object")
		}
		*dst(n) = m
		return nil
	}
}

func setInterface(kind string) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		s, ok := v.(string)
		if v != nil && !ok {
			return typeErr(kind+"_interface", v, "string")
		}
		*engine.InterfaceField(n, kind) = s // "" = default of the hardware type
		return nil
	}
}

func setUUIDPtr(field string, dst func(n *storage.Node) **string) func(*storage.Node, any) error {
	return setStr(field, dst, func(s string) (string, error) {
		if _, err := uuid.Parse(s); err != nil {
			return "", errInvalid("Expected a UUID for %s but received %s.", field, s)
		}
		return strings.ToLower(s), nil
	})
}

// nameRE is RFC 3986 unreserved characters (API >= 1.10).
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`) })

var conductorGroupRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_\-\.]*$`) })

func setConductorGroup(n *storage.Node, v any) error {
	if v == nil {
		n.ConductorGroup = ""
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return typeErr("conductor_group", v, "string")
	}
	if len(s) > 255 || (s != "" && !conductorGroupRE().MatchString(s)) {
		return errInvalid("Invalid conductor_group %q: it must be at most 255 characters of a-z, 0-9, _, - and .", s)
	}
	n.ConductorGroup = strings.ToLower(s)
	return nil
}

func setName(n *storage.Node, v any) error {
	if v == nil {
		n.Name = nil
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return typeErr("name", v, "string")
	}
	if len(s) > 255 || !nameRE().MatchString(s) {
		return errInvalid("Cannot use name %s: a node name may only contain the RFC 3986 unreserved characters A-Z a-z 0-9 - . _ ~ (at most 255)", s)
	}
	if _, err := uuid.Parse(s); err == nil {
		return errInvalid("Cannot use name %s: it is a UUID.", s)
	}
	n.Name = &s
	return nil
}

type nodeField = field[storage.Node]

func setAutomatedClean(n *storage.Node, v any) error {
	if v == nil {
		n.AutomatedClean = nil
		return nil
	}
	var b bool
	if err := setBoolField("automated_clean", func(*storage.Node) *bool { return &b })(n, v); err != nil {
		return err
	}
	n.AutomatedClean = &b
	return nil
}

func setDriver(n *storage.Node, v any) error {
	s, ok := v.(string)
	if !ok || s == "" {
		return typeErr("driver", v, "string")
	}
	n.Driver = s
	return nil
}

// ifaceField is a node's <kind>_interface field (from 1.31 unless min says
// otherwise).
func ifaceField(kind string, min int) nodeField {
	return nodeField{kind + "_interface", min, fCreate | fPatch, nil, nil,
		func(_ *viewCtx, n *storage.Node) any { return engine.InterfaceOf(n, kind) }, setInterface(kind)}
}

func nodeStr(name string, min int, flags fieldFlags, maxLen int, p func(n *storage.Node) **string) nodeField {
	var set func(*storage.Node, any) error
	if flags&(fCreate|fPatch) != 0 {
		set = setStrPtr(name, p, maxLen)
	}
	return nodeField{name, min, flags, nil, nil, func(_ *viewCtx, n *storage.Node) any { return strOrNil(*p(n)) }, set}
}

func nodeObj(name string, min int, flags fieldFlags, mask func(any) any, p func(n *storage.Node) *storage.JSONObject) nodeField {
	var set func(*storage.Node, any) error
	if flags&(fCreate|fPatch) != 0 {
		set = setObject(name, p)
	}
	return nodeField{name, min, flags, nil, mask, func(_ *viewCtx, n *storage.Node) any { return *p(n) }, set}
}

func nodeBool(name string, min int, flags fieldFlags, p func(n *storage.Node) *bool) nodeField {
	var set func(*storage.Node, any) error
	if flags&(fCreate|fPatch) != 0 {
		set = setBoolField(name, p)
	}
	return nodeField{name, min, flags, nil, nil, func(_ *viewCtx, n *storage.Node) any { return *p(n) }, set}
}

func nodeTime(name string, min int, flags fieldFlags, p func(n *storage.Node) *time.Time) nodeField {
	return nodeField{name, min, flags, nil, nil, func(_ *viewCtx, n *storage.Node) any { return timeOrNil(p(n)) }, nil}
}

func nodeRead(name string, min int, flags fieldFlags, get func(v *viewCtx, n *storage.Node) any) nodeField {
	return nodeField{name, min, flags, nil, nil, get, nil}
}

// instanceNameField is node.instance_name (1.104): a string of 1 to 255
// characters or null, checked by Ironic's node schema.
func instanceNameField() nodeField {
	f := strField("instance_name", 104, fCreate|fPatch|fFilter|fSort, 255, func(n *storage.Node) **string { return &n.InstanceName })
	f.value.MinLength = 1
	return f
}

// nodes is the node table in Ironic's view order.
var nodeTable = newNodeTable()

func newNodeTable() *resource[storage.Node] {
	const cp = fCreate | fPatch
	res := newResource("node",
		[]string{"uuid", "instance_uuid", "maintenance", "power_state", "provision_state", "name", "links"},
		nodeField{"uuid", 1, fCreate | fSort, nil, nil, func(_ *viewCtx, n *storage.Node) any { return n.UUID }, nil},
		nodeRead("created_at", 1, fSort, func(_ *viewCtx, n *storage.Node) any { return ironicTime(n.CreatedAt) }),
		nodeTime("updated_at", 1, fSort, func(n *storage.Node) *time.Time { return n.UpdatedAt }),
		nodeField{"automated_clean", 47, cp, nil, nil, func(_ *viewCtx, n *storage.Node) any {
			if n.AutomatedClean == nil {
				return nil
			}
			return *n.AutomatedClean
		}, setAutomatedClean},
		ifaceField("bios", 40),
		ifaceField("boot", 31),
		nodeStr("boot_mode", 75, 0, 0, func(n *storage.Node) **string { return &n.BootMode }),
		nodeRead("clean_step", 7, 0, func(_ *viewCtx, n *storage.Node) any { return n.CleanStep }),
		nodeField{"conductor_group", 46, cp | fFilter | fSort, nil, nil, func(_ *viewCtx, n *storage.Node) any { return n.ConductorGroup }, setConductorGroup},
		nodeRead("console_enabled", 1, 0, func(_ *viewCtx, n *storage.Node) any { return n.ConsoleEnabled }),
		ifaceField("console", 31),
		ifaceField("deploy", 31),
		nodeRead("deploy_step", 44, 0, func(_ *viewCtx, n *storage.Node) any { return n.DeployStep }),
		nodeStr("description", 51, cp|fSort, 4096, func(n *storage.Node) **string { return &n.Description }),
		nodeBool("disable_power_off", 95, cp|fSort, func(n *storage.Node) *bool { return &n.DisablePowerOff }),
		nodeField{"driver", 1, cp | fRequired | fFilter | fSort, nil, nil, func(_ *viewCtx, n *storage.Node) any { return n.Driver }, setDriver},
		nodeObj("driver_info", 1, cp, maskDriverInfo, func(n *storage.Node) *storage.JSONObject { return &n.DriverInfo }),
		nodeObj("driver_internal_info", 3, 0, maskDictPassword, func(n *storage.Node) *storage.JSONObject { return &n.DriverInternalInfo }),
		nodeObj("extra", 1, cp, nil, func(n *storage.Node) *storage.JSONObject { return &n.Extra }),
		nodeStr("fault", 42, fFilter|fSort, 0, func(n *storage.Node) **string { return &n.Fault }),
		ifaceField("firmware", 86),
		nodeStr("health", 109, fSort, 0, func(n *storage.Node) **string { return &n.Health }),
		nodeTime("inspection_finished_at", 6, fSort, func(n *storage.Node) *time.Time { return n.InspectionFinishedAt }),
		nodeTime("inspection_started_at", 6, fSort, func(n *storage.Node) *time.Time { return n.InspectionStartedAt }),
		ifaceField("inspect", 31),
		nodeObj("instance_info", 1, cp, maskInstanceInfo, func(n *storage.Node) *storage.JSONObject { return &n.InstanceInfo }),
		instanceNameField(),
		nodeField{"instance_uuid", 1, cp | fFilter | fSort, nil, nil, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.InstanceUUID) },
			setUUIDPtr("instance_uuid", func(n *storage.Node) **string { return &n.InstanceUUID })},
		nodeStr("last_error", 1, 0, 0, func(n *storage.Node) **string { return &n.LastError }),
		nodeStr("lessee", 65, cp|fFilter|fSort, 255, func(n *storage.Node) **string { return &n.Lessee }),
		nodeBool("maintenance", 1, fPatch|fFilter|fSort, func(n *storage.Node) *bool { return &n.Maintenance }),
		nodeStr("maintenance_reason", 1, 0, 0, func(n *storage.Node) **string { return &n.MaintenanceReason }),
		ifaceField("management", 31),
		nodeField{"name", 5, cp | fSort, nil, nil, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.Name) }, setName},
		nodeObj("network_data", 66, cp, nil, func(n *storage.Node) *storage.JSONObject { return &n.NetworkData }),
		ifaceField("network", 20),
		nodeStr("owner", 50, cp|fFilter|fSort, 255, func(n *storage.Node) **string { return &n.Owner }),
		parentNodeField(),
		ifaceField("power", 31),
		nodeStr("power_state", 1, fSort, 0, func(n *storage.Node) **string { return &n.PowerState }),
		nodeObj("properties", 1, cp, nil, func(n *storage.Node) *storage.JSONObject { return &n.Properties }),
		nodeBool("protected", 48, cp|fSort, func(n *storage.Node) *bool { return &n.Protected }),
		nodeStr("protected_reason", 48, cp, 255, func(n *storage.Node) **string { return &n.ProtectedReason }),
		nodeRead("provision_state", 1, fFilter|fSort, func(v *viewCtx, n *storage.Node) any { return provisionStateAt(v.ver, n.ProvisionState) }),
		nodeTime("provision_updated_at", 1, fSort, func(n *storage.Node) *time.Time { return n.ProvisionUpdatedAt }),
		nodeRead("raid_config", 12, 0, func(_ *viewCtx, n *storage.Node) any { return n.RAIDConfig }),
		ifaceField("raid", 31),
		ifaceField("rescue", 38),
		nodeStr("reservation", 1, 0, 0, func(n *storage.Node) **string { return &n.Reservation }),
		nodeStr("resource_class", 21, cp|fFilter|fSort, 80, func(n *storage.Node) **string { return &n.ResourceClass }),
		nodeBool("retired", 61, cp|fFilter|fSort, func(n *storage.Node) *bool { return &n.Retired }),
		nodeStr("retired_reason", 61, cp, 255, func(n *storage.Node) **string { return &n.RetiredReason }),
		nodeRead("secure_boot", 75, 0, func(_ *viewCtx, n *storage.Node) any {
			if n.SecureBoot == nil {
				return nil
			}
			return *n.SecureBoot
		}),
		nodeRead("service_step", 87, 0, func(_ *viewCtx, n *storage.Node) any { return n.ServiceStep }),
		nodeStr("shard", 82, cp|fFilter|fSort, 255, func(n *storage.Node) **string { return &n.Shard }),
		ifaceField("storage", 33),
		nodeStr("target_power_state", 1, 0, 0, func(n *storage.Node) **string { return &n.TargetPowerState }),
		nodeRead("target_provision_state", 1, 0, func(v *viewCtx, n *storage.Node) any {
			if n.TargetProvisionState == nil {
				return nil
			}
			return provisionStateAt(v.ver, *n.TargetProvisionState)
		}),
		nodeRead("target_raid_config", 12, 0, func(_ *viewCtx, n *storage.Node) any { return n.TargetRAIDConfig }),
		nodeRead("traits", 37, 0, func(_ *viewCtx, n *storage.Node) any { return n.Traits }),
		ifaceField("vendor", 31),
		nodeRead("links", 1, 0, func(v *viewCtx, n *storage.Node) any { return selfLinks(v, "nodes", n.UUID) }),
		nodeRead("conductor", 49, 0, func(v *viewCtx, n *storage.Node) any { return strOrNil(v.conductorOf(n)) }),
		nodeStr("allocation_uuid", 52, 0, 0, func(n *storage.Node) **string { return &n.AllocationUUID }),
		nodeField{"chassis_uuid", 1, cp | fFilter, nil, nil, func(_ *viewCtx, n *storage.Node) any { return strOrNil(n.ChassisUUID) },
			setUUIDPtr("chassis_uuid", func(n *storage.Node) **string { return &n.ChassisUUID })},
		nodeRead("ports", 1, 0, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "ports") }),
		nodeRead("states", 14, 0, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "states") }),
		nodeRead("portgroups", 24, 0, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "portgroups") }),
		nodeRead("volume", 32, 0, func(v *viewCtx, n *storage.Node) any { return v.subLinks(n, "volume") }),
	)
	// Ironic's PATCH_ALLOWED_FIELDS: alphabetical, parent_node and
	// firmware_interface appended when they came.
	late := []string{"parent_node", "firmware_interface"}
	res.patchOrder = slices.DeleteFunc(res.names(fPatch), func(s string) bool { return slices.Contains(late, s) })
	slices.Sort(res.patchOrder)
	res.patchOrder = append(res.patchOrder, late...)
	return res
}

// selfLinks are a resource's self and bookmark links.
func selfLinks(v *viewCtx, collection, id string) []link {
	return []link{{Href: v.base + "/v1/" + collection + "/" + id, Rel: "self"}, {Href: v.base + "/" + collection + "/" + id, Rel: "bookmark"}}
}
