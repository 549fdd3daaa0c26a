package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/engine/jsonschema"
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

// raidSchema is Ironic's raid_config_schema.json.
var raidSchema = func() *jsonschema.Schema {
	str := func(enum ...string) *jsonschema.Schema {
		return &jsonschema.Schema{Types: []string{"string"}, Enum: enum}
	}
	array := func(items *jsonschema.Schema, min int) *jsonschema.Schema {
		return &jsonschema.Schema{Types: []string{"array"}, Items: items, MinItems: min}
	}
	disk := jsonschema.Object(true, []string{"raid_level", "size_gb"},
		jsonschema.P("raid_level", str(raidLevels...)),
		jsonschema.P("size_gb", &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Types: []string{"integer"}, Minimum: jsonschema.Int64(0)}, str("MAX")}}),
		jsonschema.P("volume_name", jsonschema.Types("string")),
		jsonschema.P("is_root_volume", jsonschema.Types("boolean")),
		jsonschema.P("share_physical_disks", jsonschema.Types("boolean")),
		jsonschema.P("disk_type", str("hdd", "ssd")),
		jsonschema.P("interface_type", str("sata", "scsi", "sas")),
		jsonschema.P("number_of_physical_disks", &jsonschema.Schema{Types: []string{"integer"}, Minimum: jsonschema.Int64(0), ExclusiveMinimum: true}),
		jsonschema.P("controller", jsonschema.Types("string")),
		jsonschema.P("physical_disks", &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			array(jsonschema.Types("string"), 0), array(jsonschema.Types("object"), 2)}}),
	)
	return jsonschema.Object(true, []string{"logical_disks"}, jsonschema.P("logical_disks", array(disk, 1)))
}()

// ValidateRAIDConfig is Ironic's raid.validate_configuration: cfg against
// raid_config_schema.json (the message jsonschema.validate raises), then
// at most one root volume.
func ValidateRAIDConfig(cfg map[string]any) error {
	if msg := jsonschema.Message(raidSchema, cfg); msg != "" {
		return fault.New(fault.Invalid, "RAID config validation error: %s", msg)
	}
	roots := 0
	for _, d := range cfg["logical_disks"].([]any) {
		if root, _ := d.(map[string]any)["is_root_volume"].(bool); root {
			roots++
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
			if err := c.validateHardwareRAID(n, cfg); err != nil {
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

// validateHardwareRAID is RedfishRAID.validate_raid_config's addition to
// the schema: Redfish builds no SCSI volumes.
func (c *Conductor) validateHardwareRAID(n *storage.Node, cfg map[string]any) error {
	hw, ok := c.hw.Get(n.Driver)
	if !ok {
		return nil
	}
	if _, ok := hw.RAIDOf(n); !ok {
		return nil
	}
	for _, d := range asList(cfg["logical_disks"]) {
		if m, _ := d.(map[string]any); m["interface_type"] == "scsi" {
			return fault.New(fault.Invalid, "interface type `scsi` not supported by Redfish RAID")
		}
	}
	return nil
}

// raidConfigOf is Ironic's update_raid_info: the node's raid_config is
// the logical disks read back, stamped with last_updated (Python's
// str(datetime)); a root volume among them sets local_gb and the
// raid_level capability.
func raidConfigOf(n *storage.Node, lds []driver.LogicalDisk, now time.Time) {
	disks := make([]any, 0, len(lds))
	for _, ld := range lds {
		m := map[string]any{"size_gb": ld.SizeGB, "raid_level": ld.RAIDLevel}
		if ld.ID != "" {
			m["id"] = ld.ID
		}
		if ld.Name != "" {
			m["name"] = ld.Name
		}
		if ld.Controller != "" {
			m["controller"] = ld.Controller
		}
		if ld.IsRootVolume {
			m["is_root_volume"] = true
			if n.Properties == nil {
				n.Properties = storage.JSONObject{}
			}
			n.Properties["local_gb"] = ld.SizeGB
			caps, _ := n.Properties["capabilities"].(string)
			switch {
			case strings.Contains(caps, "raid_level:"):
				caps = replaceCapability(caps, "raid_level", ld.RAIDLevel)
			case caps != "":
				caps += ",raid_level:" + ld.RAIDLevel
			default:
				caps = "raid_level:" + ld.RAIDLevel
			}
			n.Properties["capabilities"] = caps
		}
		disks = append(disks, m)
	}
	n.RAIDConfig = storage.JSONObject{"logical_disks": disks, "last_updated": now.UTC().Format("2006-01-02 15:04:05.000000")}
}
