package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"castiron/fault"
	"castiron/storage"
)

// unsupported is Ironic's UnsupportedDriverExtension, raised by the no-*
// interfaces (ironic/drivers/modules/noop.py).
// It is a 400 (Invalid); errors.Is(err, ErrUnsupportedExtension) lets the
// endpoints Ironic answers 404 for it (RAID) tell it apart.
func unsupported(n *storage.Node, kind string) error {
	return fault.Wrap(fault.Invalid, ErrUnsupportedExtension, "Driver %s does not support %s (disabled or not implemented).", n.Driver, kind)
}

// ErrUnsupportedExtension is the cause of every unsupported-interface error.
var ErrUnsupportedExtension = errors.New("unsupported driver extension")

// raidLevels are the raid_level values of Ironic's raid_config_schema.json.
var raidLevels = []string{"JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0"}

// LogicalDiskProperty is one property a logical disk of a target RAID
// configuration may name, with Ironic's description.
var logicalDiskProperties = map[string]string{
	"raid_level":               "RAID level for the logical disk. Valid values are 'JBOD', '0', '1', '2', '5', '6', '1+0', '5+0' and '6+0'. Required.",
	"size_gb":                  "Size in GiB (Integer) for the logical disk. Use 'MAX' as size_gb if this logical disk is supposed to use the rest of the space available. Required.",
	"volume_name":              "Name of the volume to be created. If this is not specified, it will be auto-generated. Optional.",
	"is_root_volume":           "Specifies whether this disk is a root volume. By default, this is False. Optional.",
	"share_physical_disks":     "Specifies whether other logical disks can share physical disks with this logical disk. By default, this is False. Optional.",
	"disk_type":                "The type of disk preferred. Valid values are 'hdd' and 'ssd'. If this is not specified, disk type will not be a selection criterion for choosing backing physical disks. Optional.",
	"interface_type":           "The interface type of disk. Valid values are 'sata', 'scsi' and 'sas'. If this is not specified, interface type will not be a selection criterion for choosing backing physical disks. Optional.",
	"number_of_physical_disks": "Number of physical disks to use for this logical disk. By default, the driver uses the minimum number of disks required for that RAID level. Optional.",
	"controller":               "Controller to use for this logical disk. If not specified, the driver will choose a suitable RAID controller on the bare metal node. Optional.",
	"physical_disks":           "The physical disks to use for this logical disk. If not specified, the driver will choose suitable physical disks to use. Optional.",
}

// RAIDLogicalDiskProperties is GET /v1/drivers/{name}/raid/logical_disk_properties:
// the properties of Ironic's RAID schema. Ironic answers them for every
// hardware type, even one whose default RAID interface is no-raid (NoRAID
// inherits get_logical_disk_properties from the base interface).
func (c *Conductor) RAIDLogicalDiskProperties(driverName string) (map[string]string, bool) {
	if _, ok := c.hw.Get(driverName); !ok {
		return nil, false
	}
	out := make(map[string]string, len(logicalDiskProperties))
	for k, v := range logicalDiskProperties {
		out[k] = v
	}
	return out, true
}

func raidError(format string, args ...any) error {
	return fault.New(fault.Invalid, "RAID config validation error: "+format, args...)
}

// pyRepr renders a JSON value as Python's repr for jsonschema-like messages.
func pyRepr(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case bool:
		if t {
			return "True"
		}
		return "False"
	case string:
		return "'" + t + "'"
	case []string:
		parts := make([]string, len(t))
		for i, s := range t {
			parts[i] = "'" + s + "'"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func isInt(v any) (int64, bool) {
	switch t := v.(type) {
	case int64:
		return t, true
	case int:
		return int64(t), true
	case float64:
		if t == float64(int64(t)) {
			return int64(t), true
		}
	}
	return 0, false
}

// ValidateRAIDConfig checks cfg against the essentials of Ironic's
// raid_config_schema.json (logical_disks, raid_level, size_gb, the typed
// optional keys) and the one-root-volume rule, with jsonschema's wording.
func ValidateRAIDConfig(cfg map[string]any) error {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	raw, ok := cfg["logical_disks"]
	if !ok {
		return raidError("'logical_disks' is a required property")
	}
	var extra []string
	for _, k := range keys {
		if k != "logical_disks" {
			extra = append(extra, "'"+k+"'")
		}
	}
	if len(extra) > 0 {
		verb := "was"
		if len(extra) > 1 {
			verb = "were"
		}
		return raidError("Additional properties are not allowed (%s %s unexpected)", strings.Join(extra, ", "), verb)
	}
	disks, ok := raw.([]any)
	if !ok {
		return raidError("%s is not of type 'array'", pyRepr(raw))
	}
	if len(disks) == 0 {
		return raidError("[] should be non-empty")
	}
	roots := 0
	for _, d := range disks {
		disk, ok := d.(map[string]any)
		if !ok {
			return raidError("%s is not of type 'object'", pyRepr(d))
		}
		for _, req := range []string{"raid_level", "size_gb"} {
			if _, has := disk[req]; !has {
				return raidError("'%s' is a required property", req)
			}
		}
		dk := make([]string, 0, len(disk))
		for k := range disk {
			dk = append(dk, k)
		}
		slices.Sort(dk)
		for _, k := range dk {
			v := disk[k]
			switch k {
			case "raid_level":
				s, ok := v.(string)
				if !ok {
					return raidError("%s is not of type 'string'", pyRepr(v))
				}
				if !slices.Contains(raidLevels, s) {
					return raidError("%s is not one of %s", pyRepr(v), pyRepr(raidLevels))
				}
			case "size_gb":
				if i, ok := isInt(v); ok && i > 0 {
					continue
				}
				if v == "MAX" {
					continue
				}
				return raidError("%s is not valid under any of the given schemas", pyRepr(v))
			case "volume_name", "controller":
				if _, ok := v.(string); !ok {
					return raidError("%s is not of type 'string'", pyRepr(v))
				}
			case "is_root_volume", "share_physical_disks":
				b, ok := v.(bool)
				if !ok {
					return raidError("%s is not of type 'boolean'", pyRepr(v))
				}
				if k == "is_root_volume" && b {
					roots++
				}
			case "disk_type", "interface_type":
				allowed := []string{"hdd", "ssd"}
				if k == "interface_type" {
					allowed = []string{"sata", "scsi", "sas"}
				}
				s, ok := v.(string)
				if !ok {
					return raidError("%s is not of type 'string'", pyRepr(v))
				}
				if !slices.Contains(allowed, s) {
					return raidError("%s is not one of %s", pyRepr(v), pyRepr(allowed))
				}
			case "number_of_physical_disks":
				if i, ok := isInt(v); !ok || i < 1 {
					return raidError("%s is not of type 'integer'", pyRepr(v))
				}
			case "physical_disks":
				if _, ok := v.([]any); !ok {
					return raidError("%s is not of type 'array'", pyRepr(v))
				}
			default:
				return raidError("Additional properties are not allowed ('%s' was unexpected)", k)
			}
		}
	}
	if roots > 1 {
		return fault.New(fault.Invalid, "Raid config cannot have more than one root volume. %d root volumes were specified", roots)
	}
	return nil
}

// SetTargetRAIDConfig stores the node's target_raid_config (PUT
// /v1/nodes/{id}/states/raid), validating a non-empty one as the node's RAID
// interface does; an empty one clears it. A no-raid node refuses with
// Ironic's UnsupportedDriverExtension.
func (c *Conductor) SetTargetRAIDConfig(ctx context.Context, ident string, cfg map[string]any) error {
	_, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		// Ironic validates (and so refuses no-raid) only a non-empty config.
		if len(cfg) > 0 {
			if InterfaceOf(n, "raid") == "no-raid" {
				return nil, unsupported(n, "raid")
			}
			if err := ValidateRAIDConfig(cfg); err != nil {
				return nil, err
			}
		}
		n.TargetRAIDConfig = storage.JSONObject{}
		for k, v := range cfg {
			n.TargetRAIDConfig[k] = v
		}
		c.log.InfoContext(ctx, "target RAID config set", "node", n.UUID, "state", n.ProvisionState, "verb", "set-raid", "logical_disks", fmt.Sprint(len(asList(cfg["logical_disks"]))))
		return nil, nil
	})
	return err
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
