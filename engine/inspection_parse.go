package engine

// The server side of the agent protocol's inspection body: what a ramdisk
// posts is checked here before engine applies it. The agent program is
// ramdisk/agent; the shared wire types are ramdisk/protocol.

import (
	"bytes"
	"encoding/json"
	"net"

	"castiron/fault"
	"castiron/ramdisk/protocol"
)

// Bounds on what one inventory may hold; a real server is far below them,
// and anything above is a broken or hostile ramdisk.
const (
	maxInterfaces = 1024
	maxDisks      = 4096
	maxString     = 4096
)

// ParseInspection checks a continue_inspection body as Ironic's schema does
// (an "inventory" object with at least one interface carrying a string
// mac_address) plus castiron's bounds, and splits it into inventory and
// plugin data. Any problem is a 400 naming it; nothing is stored.
func ParseInspection(body []byte) (Inspection, error) {
	var in Inspection
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return in, invalidInspection("Malformed JSON in request body: %v", err)
	}
	if dec.More() {
		return in, invalidInspection("Malformed JSON in request body: trailing data after the JSON value")
	}
	if raw == nil {
		return in, invalidInspection("Invalid data: the body must be a JSON object")
	}
	invRaw, ok := raw["inventory"].(map[string]any)
	if !ok {
		return in, invalidInspection("Invalid data: 'inventory' is a required property and must be an object")
	}
	ifaces, ok := invRaw["interfaces"].([]any)
	if !ok || len(ifaces) == 0 {
		return in, invalidInspection("Invalid data: inventory 'interfaces' must be a non-empty array")
	}
	for i, v := range ifaces {
		m, ok := v.(map[string]any)
		if !ok {
			return in, invalidInspection("Invalid data: inventory interface %d is not an object", i)
		}
		if _, ok := m["mac_address"].(string); !ok {
			return in, invalidInspection("Invalid data: inventory interface %d has no string 'mac_address'", i)
		}
	}
	for _, k := range []string{"bmc_address", "bmc_v6address"} {
		if v, has := invRaw[k]; has && v != nil {
			if _, ok := v.(string); !ok {
				return in, invalidInspection("Invalid data: inventory %q must be a string or null", k)
			}
		}
	}
	// Typed view: wrong types anywhere in the fields castiron reads are 400s.
	if err := json.Unmarshal(body, &in.Data); err != nil {
		return in, invalidInspection("Invalid inventory: %v", err)
	}
	if err := checkBounds(&in.Data.Inventory); err != nil {
		return in, err
	}
	in.Inventory = invRaw
	in.PluginData = map[string]any{}
	for k, v := range raw {
		if k != "inventory" {
			in.PluginData[k] = v
		}
	}
	return in, nil
}

func checkBounds(inv *protocol.Inventory) error {
	if len(inv.Interfaces) > maxInterfaces {
		return invalidInspection("Invalid inventory: %d interfaces (at most %d)", len(inv.Interfaces), maxInterfaces)
	}
	if len(inv.Disks) > maxDisks {
		return invalidInspection("Invalid inventory: %d disks (at most %d)", len(inv.Disks), maxDisks)
	}
	valid := 0
	for _, i := range inv.Interfaces {
		if len(i.Name) > maxString || len(i.MACAddress) > maxString {
			return invalidInspection("Invalid inventory: interface field too long")
		}
		if _, err := net.ParseMAC(i.MACAddress); err == nil {
			valid++
		}
	}
	for _, d := range inv.Disks {
		if d.Size < 0 {
			return invalidInspection("Invalid inventory: disk %q has a negative size", d.Name)
		}
		if len(d.Name) > maxString || len(d.Model) > maxString {
			return invalidInspection("Invalid inventory: disk field too long")
		}
	}
	if inv.CPU.Count < 0 || inv.Memory.Total < 0 || inv.Memory.PhysicalMB < 0 {
		return invalidInspection("Invalid inventory: negative cpu count or memory size")
	}
	for _, s := range []string{inv.CPU.ModelName, inv.CPU.Architecture, inv.Hostname, inv.SystemVendor.ProductName, inv.SystemVendor.Manufacturer, inv.SystemVendor.SerialNumber} {
		if len(s) > maxString {
			return invalidInspection("Invalid inventory: field too long")
		}
	}
	bmc := inv.BMCAddress != nil && *inv.BMCAddress != "" || inv.BMCV6Address != nil && *inv.BMCV6Address != ""
	if valid == 0 && !bmc {
		return invalidInspection("No lookup information provided")
	}
	return nil
}

func invalidInspection(format string, args ...any) error {
	return fault.New(fault.Invalid, format, args...)
}
