package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// cliEveryResource runs every `openstack baremetal` create, set, unset and
// delete subcommand for nodes, ports, port groups, chassis, volume
// connectors and targets, deploy templates and allocations (and the node's
// maintenance, boot device, boot mode, secure boot, trait and VIF
// subcommands), each with its
// options, at the microversion the client negotiates by itself; after each
// one the resource is read back with `show -f json` and compared.
func cliEveryResource(t *testing.T, c *cliClient, dir string) {
	show := func(kind []string, ident string) map[string]any {
		t.Helper()
		var v map[string]any
		c.json(t, &v, append(append([]string{}, kind...), "show", ident)...)
		return v
	}
	gone := func(kind []string, ident string) {
		t.Helper()
		c.fail(t, "could not be found", append(append([]string{}, kind...), "show", ident)...)
	}

	// Chassis.
	chassis := []string{"chassis"}
	const chUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a01"
	var ch map[string]any
	c.json(t, &ch, "chassis", "create", "--description", "rack 7", "--extra", "row=b", "--uuid", chUUID)
	cliWant(t, "chassis create", show(chassis, chUUID), map[string]any{"uuid": chUUID, "description": "rack 7"})
	cliWantMap(t, "chassis create extra", show(chassis, chUUID)["extra"], map[string]any{"row": "b"})
	c.run(t, "chassis", "set", chUUID, "--description", "rack 8", "--extra", "col=3")
	got := show(chassis, chUUID)
	cliWant(t, "chassis set", got, map[string]any{"description": "rack 8"})
	cliWantMap(t, "chassis set extra", got["extra"], map[string]any{"row": "b", "col": "3"})
	c.run(t, "chassis", "unset", chUUID, "--description", "--extra", "row")
	got = show(chassis, chUUID)
	cliWant(t, "chassis unset", got, map[string]any{"description": nil})
	cliWantExactly(t, "chassis unset extra", got["extra"], map[string]any{"col": "3"})

	// Nodes: create with every option.
	node := []string{"node"}
	const nodeUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a02"
	ifaces := map[string]string{"bios": "fake", "boot": "fake", "console": "fake", "deploy": "fake", "inspect": "fake",
		"management": "fake", "network": "noop", "power": "fake", "raid": "fake", "rescue": "fake", "storage": "noop", "vendor": "fake"}
	args := []string{"node", "create", "--driver", "fake-hardware", "--uuid", nodeUUID, "--name", "cli-every",
		"--chassis-uuid", chUUID, "--driver-info", "ipmi_password=secret", "--driver-info", "fake_key=v",
		"--property", "cpus=2", "--extra", "e=1", "--network-data", `{"links": [], "networks": [], "services": []}`,
		"--resource-class", "gold", "--conductor-group", "", "--automated-clean"}
	// python-ironicclient 5.0.1 refuses --owner, --lessee and --description
	// on create itself ("not needed to create nodes"): node set sets them.
	for k, v := range ifaces {
		args = append(args, "--"+k+"-interface", v)
	}
	c.run(t, args...)
	n := show(node, nodeUUID)
	want := map[string]any{"name": "cli-every", "chassis_uuid": chUUID, "resource_class": "gold", "conductor_group": "",
		"automated_clean": true, "provision_state": "enroll"}
	for k, v := range ifaces {
		want[k+"_interface"] = v
	}
	cliWant(t, "node create", n, want)
	cliWantMap(t, "node create driver_info", n["driver_info"], map[string]any{"ipmi_password": "******", "fake_key": "v"})
	cliWantMap(t, "node create properties", n["properties"], map[string]any{"cpus": "2"})
	cliWantMap(t, "node create extra", n["extra"], map[string]any{"e": "1"})
	cliWantMap(t, "node create network_data", n["network_data"], map[string]any{"links": "[]"})

	// node set: every option but the protected/retired ones (below, on an
	// active node) and the driver (last, with the interface resets).
	const instUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a03"
	c.run(t, "node", "set", "cli-every", "--instance-uuid", instUUID, "--name", "cli-every2",
		"--resource-class", "silver", "--conductor-group", "", "--no-automated-clean",
		"--target-raid-config", `{"logical_disks": [{"size_gb": 10, "raid_level": "1", "is_root_volume": true}]}`,
		"--property", "memory_mb=1024", "--extra", "f=2", "--driver-info", "ipmi_address=10.0.0.5",
		"--instance-info", "image_source=http://img", "--owner", "team-c", "--lessee", "team-d",
		"--description", "set", "--network-data", `{"links": [{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [], "services": []}`,
		"--boot-interface", "ipxe", "--deploy-interface", "direct", "--network-interface", "flat", "--inspect-interface", "agent",
		"--rescue-interface", "agent", "--raid-interface", "agent", "--storage-interface", "fake", "--bios-interface", "no-bios",
		"--console-interface", "no-console", "--vendor-interface", "no-vendor", "--management-interface", "fake", "--power-interface", "fake")
	n = show(node, "cli-every2")
	cliWant(t, "node set", n, map[string]any{"uuid": nodeUUID, "instance_uuid": instUUID, "resource_class": "silver",
		"automated_clean": false, "owner": "team-c", "lessee": "team-d", "description": "set", "boot_interface": "ipxe",
		"deploy_interface": "direct", "network_interface": "flat", "inspect_interface": "agent", "rescue_interface": "agent",
		"raid_interface": "agent", "storage_interface": "fake", "bios_interface": "no-bios", "console_interface": "no-console",
		"vendor_interface": "no-vendor"})
	cliWantMap(t, "node set properties", n["properties"], map[string]any{"cpus": "2", "memory_mb": "1024"})
	cliWantMap(t, "node set extra", n["extra"], map[string]any{"e": "1", "f": "2"})
	cliWantMap(t, "node set driver_info", n["driver_info"], map[string]any{"ipmi_address": "10.0.0.5", "ipmi_password": "******"})
	cliWantMap(t, "node set instance_info", n["instance_info"], map[string]any{"image_source": "http://img"})
	if raid, _ := n["target_raid_config"].(map[string]any); raid == nil || raid["logical_disks"] == nil {
		t.Errorf("node set target_raid_config: %v", n["target_raid_config"])
	}
	// Every --reset-*-interface, then a driver change that resets them all.
	var resets []string
	for k := range ifaces {
		resets = append(resets, "--reset-"+k+"-interface")
	}
	c.run(t, append([]string{"node", "set", "cli-every2"}, resets...)...)
	n = show(node, "cli-every2")
	cliWant(t, "node set --reset-*-interface", n, map[string]any{"boot_interface": "fake", "deploy_interface": "fake", "network_interface": "noop"})
	c.run(t, "node", "set", "cli-every2", "--driver", "manual-management", "--reset-interfaces")
	cliWant(t, "node set --driver --reset-interfaces", show(node, "cli-every2"), map[string]any{"driver": "manual-management", "boot_interface": "ipxe", "management_interface": "noop"})
	c.run(t, "node", "set", "cli-every2", "--driver", "fake-hardware", "--reset-interfaces")

	// node unset: every option.
	c.run(t, "node", "unset", "cli-every2", "--instance-uuid", "--resource-class", "--target-raid-config",
		"--property", "cpus", "--extra", "e", "--driver-info", "ipmi_password", "--instance-info", "image_source",
		"--chassis-uuid", "--network-data", "--conductor-group", "--automated-clean", "--owner", "--lessee", "--description",
		"--bios-interface", "--boot-interface", "--console-interface", "--deploy-interface", "--inspect-interface",
		"--management-interface", "--network-interface", "--power-interface", "--raid-interface", "--rescue-interface",
		"--storage-interface", "--vendor-interface", "--name")
	n = show(node, nodeUUID)
	cliWant(t, "node unset", n, map[string]any{"name": nil, "instance_uuid": nil, "resource_class": nil, "chassis_uuid": nil,
		"automated_clean": nil, "owner": nil, "lessee": nil, "description": nil, "conductor_group": "", "boot_interface": "fake"})
	cliWantExactly(t, "node unset properties", n["properties"], map[string]any{"memory_mb": "1024"})
	cliWantExactly(t, "node unset extra", n["extra"], map[string]any{"f": "2"})
	cliWantExactly(t, "node unset driver_info", n["driver_info"], map[string]any{"fake_key": "v", "ipmi_address": "10.0.0.5"})
	cliWantExactly(t, "node unset instance_info", n["instance_info"], map[string]any{})
	cliWantExactly(t, "node unset target_raid_config", n["target_raid_config"], map[string]any{})
	cliWantExactly(t, "node unset network_data", n["network_data"], map[string]any{})

	// Maintenance, boot device, traits, VIFs.
	c.run(t, "node", "maintenance", "set", nodeUUID, "--reason", "fan")
	cliWant(t, "node maintenance set", show(node, nodeUUID), map[string]any{"maintenance": true, "maintenance_reason": "fan"})
	c.run(t, "node", "maintenance", "unset", nodeUUID)
	cliWant(t, "node maintenance unset", show(node, nodeUUID), map[string]any{"maintenance": false, "maintenance_reason": nil})
	c.run(t, "node", "boot", "device", "set", nodeUUID, "disk", "--persistent")
	var bd map[string]any
	c.json(t, &bd, "node", "boot", "device", "show", nodeUUID)
	cliWant(t, "node boot device set", bd, map[string]any{"boot_device": "disk", "persistent": true})
	// Boot mode and secure boot (1.76): fake-hardware has neither setter,
	// as Ironic's fake management, so the change ends in Ironic's last_error
	// and the node's fields stay as they were.
	c.run(t, "node", "boot", "mode", "set", nodeUUID, "uefi")
	n = cliWaitLastError(t, c, nodeUUID, "Failed to change boot mode to 'uefi: Driver fake-hardware does not support set_boot_mode (disabled or not implemented).")
	cliWant(t, "node boot mode set", n, map[string]any{"boot_mode": nil})
	c.run(t, "node", "secure", "boot", "on", nodeUUID)
	n = cliWaitLastError(t, c, nodeUUID, "Failed to change secure_boot state to 'True': Driver fake-hardware does not support set_secure_boot_state (disabled or not implemented).")
	cliWant(t, "node secure boot on", n, map[string]any{"secure_boot": nil})
	c.run(t, "node", "add", "trait", nodeUUID, "CUSTOM_GPU", "CUSTOM_FAST")
	c.run(t, "node", "remove", "trait", nodeUUID, "CUSTOM_FAST")
	var traits []map[string]any
	c.json(t, &traits, "node", "trait", "list", nodeUUID)
	if fmt.Sprint(cliColumn(traits, "Traits")) != "[CUSTOM_GPU]" {
		t.Errorf("node traits after add/remove: %v", traits)
	}
	// Port groups.
	pgroup := []string{"port", "group"}
	other := cliNewNode(t, c, "cli-every-other")
	// python-ironicclient 5.0.1 refuses --uuid on port group create itself
	// ("not needed to create portgroups").
	var created map[string]any
	c.json(t, &created, "port", "group", "create", "--node", nodeUUID, "--address", "52:54:00:e0:00:01", "--name", "bond-e",
		"--extra", "a=1", "--mode", "802.3ad", "--property", "miimon=100", "--support-standalone-ports")
	pgUUID := created["uuid"].(string)
	pg := show(pgroup, pgUUID)
	cliWant(t, "port group create", pg, map[string]any{"node_uuid": nodeUUID, "address": "52:54:00:e0:00:01", "name": "bond-e",
		"mode": "802.3ad", "standalone_ports_supported": true})
	cliWantMap(t, "port group create properties", pg["properties"], map[string]any{"miimon": "100"})
	c.run(t, "port", "group", "set", pgUUID, "--node", other, "--address", "52:54:00:e0:00:02", "--name", "bond-f",
		"--extra", "b=2", "--mode", "active-backup", "--property", "xmit=layer2", "--unsupport-standalone-ports")
	pg = show(pgroup, "bond-f")
	cliWant(t, "port group set", pg, map[string]any{"node_uuid": other, "address": "52:54:00:e0:00:02", "mode": "active-backup",
		"standalone_ports_supported": false})
	cliWantMap(t, "port group set extra", pg["extra"], map[string]any{"a": "1", "b": "2"})
	c.run(t, "port", "group", "set", pgUUID, "--support-standalone-ports", "--node", nodeUUID)
	c.run(t, "port", "group", "unset", pgUUID, "--name", "--address", "--extra", "a", "--property", "miimon")
	pg = show(pgroup, pgUUID)
	cliWant(t, "port group unset", pg, map[string]any{"name": nil, "address": nil, "standalone_ports_supported": true})
	cliWantExactly(t, "port group unset extra", pg["extra"], map[string]any{"b": "2"})
	cliWantExactly(t, "port group unset properties", pg["properties"], map[string]any{"xmit": "layer2"})

	// Ports.
	port := []string{"port"}
	const portUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a06"
	c.run(t, "port", "create", "52:54:00:e0:01:01", "--node", nodeUUID, "--uuid", portUUID, "--extra", "a=1",
		"--local-link-connection", "switch_id=aa:bb:cc:dd:ee:ff", "--local-link-connection", "port_id=Eth1/1",
		"--pxe-enabled", "false", "--port-group", pgUUID, "--is-smartnic")
	p := show(port, portUUID)
	cliWant(t, "port create", p, map[string]any{"address": "52:54:00:e0:01:01", "node_uuid": nodeUUID, "pxe_enabled": false,
		"portgroup_uuid": pgUUID, "is_smartnic": true})
	cliWantMap(t, "port create local_link_connection", p["local_link_connection"], map[string]any{"switch_id": "aa:bb:cc:dd:ee:ff", "port_id": "Eth1/1"})
	c.run(t, "port", "unset", portUUID, "--port-group")
	c.run(t, "port", "set", portUUID, "--node", other, "--address", "52:54:00:e0:01:02", "--extra", "k2=v2",
		"--local-link-connection", "switch_info=sw1", "--pxe-enabled", "--physical-network", "physnet1", "--is-smartnic")
	p = show(port, portUUID)
	cliWant(t, "port set", p, map[string]any{"address": "52:54:00:e0:01:02", "node_uuid": other, "pxe_enabled": true,
		"physical_network": "physnet1", "is_smartnic": true, "portgroup_uuid": nil})
	cliWantMap(t, "port set extra", p["extra"], map[string]any{"a": "1", "k2": "v2"})
	cliWantMap(t, "port set local_link_connection", p["local_link_connection"], map[string]any{"switch_info": "sw1"})
	c.run(t, "port", "set", portUUID, "--pxe-disabled", "--node", nodeUUID, "--port-group", pgUUID)
	cliWant(t, "port set --pxe-disabled --port-group", show(port, portUUID), map[string]any{"pxe_enabled": false, "portgroup_uuid": pgUUID})
	c.run(t, "port", "unset", portUUID, "--extra", "a", "--port-group", "--physical-network", "--is-smartnic")
	p = show(port, portUUID)
	cliWant(t, "port unset", p, map[string]any{"portgroup_uuid": nil, "physical_network": nil, "is_smartnic": false})
	cliWantExactly(t, "port unset extra", p["extra"], map[string]any{"k2": "v2"})

	// VIFs go on the node's ports with the flat network interface (noop
	// keeps none, as in Ironic).
	const vif = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a04"
	c.run(t, "node", "set", nodeUUID, "--network-interface", "flat")
	c.run(t, "node", "vif", "attach", nodeUUID, vif)
	var vifs []map[string]any
	c.json(t, &vifs, "node", "vif", "list", nodeUUID)
	if cliFind(vifs, "ID", vif) == nil {
		t.Errorf("node vif list after attach: %v", vifs)
	}
	c.run(t, "node", "vif", "detach", nodeUUID, vif)
	c.json(t, &vifs, "node", "vif", "list", nodeUUID)
	if len(vifs) != 0 {
		t.Errorf("node vif list after detach: %v", vifs)
	}

	// Volume connectors and targets (changes need the node powered off).
	c.run(t, "node", "power", "off", nodeUUID, "--power-timeout", "60")
	c.run(t, "node", "power", "off", other, "--power-timeout", "60")
	conn := []string{"volume", "connector"}
	const connUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a07"
	c.run(t, "volume", "connector", "create", "--node", nodeUUID, "--type", "iqn", "--connector-id", "iqn.2026-01.org:a",
		"--uuid", connUUID, "--extra", "a=1")
	cliWant(t, "volume connector create", show(conn, connUUID), map[string]any{"node_uuid": nodeUUID, "type": "iqn", "connector_id": "iqn.2026-01.org:a"})
	c.run(t, "volume", "connector", "set", connUUID, "--node", other, "--type", "ip", "--connector-id", "192.0.2.10", "--extra", "b=2")
	vc := show(conn, connUUID)
	cliWant(t, "volume connector set", vc, map[string]any{"node_uuid": other, "type": "ip", "connector_id": "192.0.2.10"})
	cliWantMap(t, "volume connector set extra", vc["extra"], map[string]any{"a": "1", "b": "2"})
	c.run(t, "volume", "connector", "unset", connUUID, "--extra", "a")
	cliWantExactly(t, "volume connector unset extra", show(conn, connUUID)["extra"], map[string]any{"b": "2"})
	target := []string{"volume", "target"}
	const tgtUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a08"
	c.run(t, "volume", "target", "create", "--node", nodeUUID, "--type", "iscsi", "--property", "target_iqn=iqn.x",
		"--property", "auth_password=secret", "--boot-index", "0", "--volume-id", "vol-1", "--uuid", tgtUUID, "--extra", "a=1")
	vt := show(target, tgtUUID)
	cliWant(t, "volume target create", vt, map[string]any{"node_uuid": nodeUUID, "volume_type": "iscsi", "boot_index": "0", "volume_id": "vol-1"})
	cliWantMap(t, "volume target create properties", vt["properties"], map[string]any{"target_iqn": "iqn.x", "auth_password": "******"})
	c.run(t, "volume", "target", "set", tgtUUID, "--node", other, "--type", "fibre_channel", "--property", "lun=3",
		"--boot-index", "1", "--volume-id", "vol-2", "--extra", "b=2")
	vt = show(target, tgtUUID)
	cliWant(t, "volume target set", vt, map[string]any{"node_uuid": other, "volume_type": "fibre_channel", "boot_index": "1", "volume_id": "vol-2"})
	cliWantMap(t, "volume target set properties", vt["properties"], map[string]any{"target_iqn": "iqn.x", "lun": "3"})
	c.run(t, "volume", "target", "unset", tgtUUID, "--extra", "a", "--property", "target_iqn")
	vt = show(target, tgtUUID)
	cliWantExactly(t, "volume target unset extra", vt["extra"], map[string]any{"b": "2"})
	cliWantExactly(t, "volume target unset properties", vt["properties"], map[string]any{"auth_password": "******", "lun": "3"})

	// Deploy templates.
	tmpl := []string{"deploy", "template"}
	const tmplUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a09"
	steps := `[{"interface": "bios", "step": "apply_configuration", "args": {"settings": [], "password": "x"}, "priority": 150}]`
	c.run(t, "deploy", "template", "create", "CUSTOM_CLI_EVERY", "--steps", steps, "--uuid", tmplUUID, "--extra", "a=1")
	dt := show(tmpl, tmplUUID)
	cliWant(t, "deploy template create", dt, map[string]any{"name": "CUSTOM_CLI_EVERY"})
	stepsFile := filepath.Join(dir, "steps.json")
	if err := os.WriteFile(stepsFile, []byte(`[{"interface": "raid", "step": "delete_configuration", "args": {}, "priority": 10}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.run(t, "deploy", "template", "set", tmplUUID, "--name", "CUSTOM_CLI_EVERY2", "--steps", stepsFile, "--extra", "b=2")
	dt = show(tmpl, "CUSTOM_CLI_EVERY2")
	if s, _ := json.Marshal(dt["steps"]); string(s) != `[{"args":{},"interface":"raid","priority":10,"step":"delete_configuration"}]` {
		t.Errorf("deploy template set steps: %s", s)
	}
	cliWantMap(t, "deploy template set extra", dt["extra"], map[string]any{"a": "1", "b": "2"})
	c.run(t, "deploy", "template", "unset", tmplUUID, "--extra", "a")
	cliWantExactly(t, "deploy template unset extra", show(tmpl, tmplUUID)["extra"], map[string]any{"b": "2"})

	// Allocations.
	alloc := []string{"allocation"}
	const allocUUID = "5f2f3a50-2c2a-4b8e-9a53-0c2d5b8d6a0a"
	c.run(t, "allocation", "create", "--resource-class", "none-such", "--trait", "CUSTOM_GPU", "--candidate-node", nodeUUID,
		"--name", "cli-alloc", "--uuid", allocUUID, "--owner", "team-a", "--extra", "a=1")
	al := show(alloc, allocUUID)
	cliWant(t, "allocation create", al, map[string]any{"name": "cli-alloc", "resource_class": "none-such", "owner": "team-a"})
	if !cliContains(al["traits"], "CUSTOM_GPU") || !cliContains(al["candidate_nodes"], nodeUUID) {
		t.Errorf("allocation create traits/candidates: %v %v", al["traits"], al["candidate_nodes"])
	}
	c.run(t, "allocation", "set", allocUUID, "--name", "cli-alloc2", "--extra", "b=2")
	al = show(alloc, "cli-alloc2")
	cliWantMap(t, "allocation set extra", al["extra"], map[string]any{"a": "1", "b": "2"})
	c.run(t, "allocation", "unset", allocUUID, "--name", "--extra", "a")
	al = show(alloc, allocUUID)
	cliWant(t, "allocation unset", al, map[string]any{"name": nil})
	cliWantExactly(t, "allocation unset extra", al["extra"], map[string]any{"b": "2"})

	// Protected and retired on an active node, with their set and unset.
	active := cliNewNode(t, c, "cli-every-active")
	c.run(t, "node", "manage", active, "--wait", "60")
	c.run(t, "node", "provide", active, "--wait", "60")
	c.run(t, "node", "deploy", active, "--wait", "60")
	c.run(t, "node", "set", active, "--protected", "--protected-reason", "prod", "--retired", "--retired-reason", "eol")
	cliWant(t, "node set protected/retired", show(node, active), map[string]any{"protected": true, "protected_reason": "prod", "retired": true, "retired_reason": "eol"})
	c.run(t, "node", "unset", active, "--protected-reason", "--retired-reason")
	cliWant(t, "node unset reasons", show(node, active), map[string]any{"protected": true, "protected_reason": nil, "retired_reason": nil})
	c.run(t, "node", "unset", active, "--protected", "--retired")
	cliWant(t, "node unset protected/retired", show(node, active), map[string]any{"protected": false, "retired": false})

	// Deletes, each read back.
	c.run(t, "allocation", "delete", allocUUID)
	gone(alloc, allocUUID)
	c.run(t, "deploy", "template", "delete", tmplUUID)
	gone(tmpl, tmplUUID)
	c.run(t, "volume", "target", "delete", tgtUUID)
	gone(target, tgtUUID)
	c.run(t, "volume", "connector", "delete", connUUID)
	gone(conn, connUUID)
	c.run(t, "port", "delete", portUUID)
	gone(port, portUUID)
	c.run(t, "port", "group", "delete", pgUUID)
	gone(pgroup, pgUUID)
	c.run(t, "node", "delete", nodeUUID, other)
	gone(node, nodeUUID)
	gone(node, other)
	c.run(t, "chassis", "delete", chUUID)
	gone(chassis, chUUID)

	// `baremetal create` from a file: a chassis with a node with a port.
	file := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(file, []byte(`{"chassis": [{"description": "from file", "nodes": [
		{"name": "cli-from-file", "driver": "fake-hardware", "ports": [{"address": "52:54:00:e0:02:01"}]}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.run(t, "create", file)
	ff := show(node, "cli-from-file")
	if ff["chassis_uuid"] == nil {
		t.Errorf("baremetal create: node has no chassis: %v", ff)
	}
	var ports []map[string]any
	c.json(t, &ports, "port", "list", "--node", "cli-from-file")
	if cliFind(ports, "Address", "52:54:00:e0:02:01") == nil {
		t.Errorf("baremetal create: ports %v", ports)
	}
	c.run(t, "port", "delete", fmt.Sprint(ports[0]["UUID"]))
	c.run(t, "node", "delete", "cli-from-file")
	c.run(t, "chassis", "delete", fmt.Sprint(ff["chassis_uuid"]))
	c.run(t, "node", "undeploy", active, "--wait", "60")
	c.run(t, "node", "delete", active)
}

// cliNewNode creates a fake-hardware node and returns its UUID.
func cliNewNode(t *testing.T, c *cliClient, name string) string {
	t.Helper()
	var n map[string]any
	c.json(t, &n, "node", "create", "--driver", "fake-hardware", "--name", name)
	return n["uuid"].(string)
}

// cliWantExactly checks that a JSON object field holds exactly want (by
// printed values).
func cliWantExactly(t *testing.T, what string, got any, want map[string]any) {
	t.Helper()
	m, ok := got.(map[string]any)
	if !ok || len(m) != len(want) {
		t.Errorf("%s: got %v, want exactly %v", what, got, want)
		return
	}
	cliWant(t, what, m, want)
}

// cliWaitLastError polls `node show` until last_error is want (a
// background driver call's outcome) and the node is no longer reserved.
func cliWaitLastError(t *testing.T, c *cliClient, ident, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var node map[string]any
		c.json(t, &node, "node", "show", ident)
		if node["last_error"] == want && node["reservation"] == nil {
			return node
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: last_error %q (reservation %v) after 60s, want %q", ident, node["last_error"], node["reservation"], want)
		}
		time.Sleep(time.Second)
	}
}
