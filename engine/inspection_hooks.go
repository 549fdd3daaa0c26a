package engine

import (
	"net/netip"
	"strings"

	"castiron/ramdisk/lldp"
	"castiron/storage"
)

// inspectionHooks fills plugin_data as Ironic's inspection hooks write it,
// before the inspection rules see it (Ironic runs the hooks' preprocess
// first):
//   - validate-interfaces: all_interfaces (every inventory NIC with a name
//     and a valid MAC: its inventory fields, the MAC in lower case, the
//     IPv6 address without its %scope, pxe_enabled true for the NIC that
//     booted the ramdisk), valid_interfaces (those castiron makes ports
//     for: all but loopback, i.e. Ironic's add_ports=all, castiron's
//     behaviour) and macs;
//   - parse-lldp: lldp_raw (each NIC's [type, hex] TLVs from the
//     inventory, unless the ramdisk sent lldp_raw itself) and parsed_lldp
//     (Ironic's names, per NIC that has LLDP data);
//   - root-device: root_disk, the disk the node's root_device hints pick
//     (Ironic), else what the ramdisk reported, else castiron's own choice
//     (the smallest disk of at least 4 GiB, as the agent picks it).
//
// boot_interface and every other top-level key the ramdisk posted stay as
// posted.
func inspectionHooks(n *storage.Node, in Inspection, plugin map[string]any) {
	raw, _ := in.Inventory["interfaces"].([]any)
	pxe := bootMAC(in.Data)
	all := map[string]any{}
	valid := map[string]any{}
	macs := []any{}
	lldpRaw, _ := plugin["lldp_raw"].(map[string]any)
	fromInventory := lldpRaw == nil
	if fromInventory {
		lldpRaw = map[string]any{}
	}
	parsed := map[string]any{}
	for _, e := range raw {
		iface, ok := e.(map[string]any)
		if !ok {
			continue
		}
		name, _ := iface["name"].(string)
		mac, err := NormalizeMAC(strings.TrimSpace(str(iface["mac_address"])))
		if name == "" || err != nil {
			continue
		}
		rec := make(map[string]any, len(iface)+1)
		for k, v := range iface {
			rec[k] = v
		}
		rec["mac_address"] = mac
		if v6, ok := iface["ipv6_address"].(string); ok {
			v6, _, _ = strings.Cut(v6, "%")
			rec["ipv6_address"] = v6
		}
		rec["pxe_enabled"] = mac == pxe
		all[name] = rec
		if !loopbackNIC(name, rec) {
			valid[name] = rec
			macs = append(macs, mac)
		}
		if fromInventory && iface["lldp"] != nil {
			lldpRaw[name] = iface["lldp"]
		}
		if tlvs := lldp.FromRaw(lldpRaw[name]); len(tlvs) > 0 {
			if nv := lldp.Parse(tlvs); len(nv) > 0 {
				parsed[name] = nv
			}
		}
	}
	plugin["all_interfaces"] = all
	plugin["valid_interfaces"] = valid
	plugin["macs"] = macs
	if len(lldpRaw) > 0 {
		plugin["lldp_raw"] = lldpRaw
	}
	if len(parsed) > 0 {
		plugin["parsed_lldp"] = parsed
	}
	if d := hookRootDisk(n, in); d != nil {
		plugin["root_disk"] = d
	}
}

// hookRootDisk is root_disk as the inventory's disk entry: by the node's
// hints, else the ramdisk's, else castiron's choice; nil without disks.
func hookRootDisk(n *storage.Node, in Inspection) any {
	hints, _ := n.Properties["root_device"].(map[string]any)
	if len(hints) == 0 {
		if rd, ok := in.PluginData["root_disk"]; ok && rd != nil {
			return rd
		}
	}
	disk, err := rootDisk(in.Data.Inventory.Disks, hints)
	if err != nil {
		return nil
	}
	raw, _ := in.Inventory["disks"].([]any)
	for _, e := range raw {
		if d, ok := e.(map[string]any); ok && d["name"] == disk.Name {
			return d
		}
	}
	return disk
}

// loopbackNIC is Ironic's test for a local interface: named lo or with a
// loopback address.
func loopbackNIC(name string, iface map[string]any) bool {
	if name == "lo" {
		return true
	}
	for _, k := range []string{"ipv4_address", "ipv6_address"} {
		if a, err := netip.ParseAddr(str(iface[k])); err == nil && a.IsLoopback() {
			return true
		}
	}
	return false
}

// str is v when it is a string, "" otherwise.
func str(v any) string {
	s, _ := v.(string)
	return s
}
