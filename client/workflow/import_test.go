package workflow

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/engine/driver/redfish/redfishfake"
)

// TestImportFiftyTwice imports a 50-node rack with --provide, then again:
// the second run creates nothing and leaves the available nodes alone.
func TestImportFiftyTwice(t *testing.T) {
	s := newServer(t)
	file := writeFile(t, "instackenv.json", fakeRack("rack", 50))
	out, _ := s.runWant(0, "import", file, "--provide", "--concurrency", "8")
	mustContain(t, "first import", out, "50 succeeded, 0 failed", "50 node(s) created, 0 already registered")
	nodes := s.nodes()
	if len(nodes) != 50 {
		t.Fatalf("%d nodes after import", len(nodes))
	}
	for _, n := range nodes {
		if n.ProvisionState != "available" || n.Driver != "fake-hardware" {
			t.Errorf("%s: %s %s", n.Name, n.Driver, n.ProvisionState)
		}
		if n.Properties["cpus"] != float64(8) || n.Properties["memory_mb"] != float64(16384) ||
			n.Properties["local_gb"] != float64(100) || n.Properties["cpu_arch"] != "x86_64" ||
			n.Properties["capabilities"] != "boot_mode:uefi" {
			t.Errorf("%s: properties %v", n.Name, n.Properties)
		}
	}
	ports, err := s.client().ListPorts(context.Background())
	if err != nil || len(ports) != 50 {
		t.Fatalf("%d ports, %v", len(ports), err)
	}

	out, _ = s.runWant(0, "import", file, "--provide")
	mustContain(t, "second import", out, "0 node(s) created, 50 already registered", "unchanged")
	if strings.Contains(out, "provide requested") || strings.Contains(out, "created, manage") {
		t.Errorf("second import changed something:\n%s", out)
	}
	if n := len(s.nodes()); n != 50 {
		t.Errorf("%d nodes after the second import", n)
	}
	if ports, _ := s.client().ListPorts(context.Background()); len(ports) != 50 {
		t.Errorf("%d ports after the second import", len(ports))
	}
}

// TestImportYAMLUpdatesInPlace imports a YAML file, then a changed one: the
// node found by MAC is patched, a new port is added, nothing is duplicated.
func TestImportYAMLUpdatesInPlace(t *testing.T) {
	s := newServer(t)
	v1 := writeFile(t, "nodes.yaml", `
nodes:
  - name: y-0
    pm_type: fake-hardware
    mac: ["52:54:00:10:00:01"]
    cpu: 4
    memory: 8192
    root_device: {size: 40}
    resource_class: small
`)
	s.runWant(0, "import", v1)
	n := s.node("y-0")
	if n.ProvisionState != "manageable" || n.ResourceClass != "small" || n.Properties["cpus"] != float64(4) {
		t.Fatalf("after import: %s %q %v", n.ProvisionState, n.ResourceClass, n.Properties)
	}
	if rd, _ := n.Properties["root_device"].(map[string]any); rd["size"] != float64(40) {
		t.Errorf("root_device %v", n.Properties["root_device"])
	}
	v2 := writeFile(t, "nodes.yml", `
nodes:
  - name: y-renamed
    pm_type: fake-hardware
    ports:
      - address: "52:54:00:10:00:01"
      - address: "52:54:00:10:00:02"
    cpu: 16
    memory: 8192
    root_device: {size: 40}
    resource_class: large
`)
	out, _ := s.runWant(0, "import", v2)
	mustContain(t, "update", out, "updated", "0 node(s) created, 1 already registered")
	nodes := s.nodes()
	if len(nodes) != 1 {
		t.Fatalf("%d nodes", len(nodes))
	}
	n = &nodes[0]
	if n.Name != "y-renamed" || n.ResourceClass != "large" || n.Properties["cpus"] != float64(16) || n.ProvisionState != "manageable" {
		t.Errorf("after update: %q %q %v %s", n.Name, n.ResourceClass, n.Properties, n.ProvisionState)
	}
	if ports, _ := s.client().ListPorts(context.Background()); len(ports) != 2 {
		t.Errorf("%d ports, want 2", len(ports))
	}
}

// TestImportMatchesByUUIDAndBMC and refuses an entry that matches two nodes.
func TestImportAmbiguousMatch(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	c := s.client()
	a, err := c.CreateNode(ctx, map[string]any{"name": "a", "driver": "fake-hardware"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePort(ctx, map[string]any{"node_uuid": a.UUID, "address": "52:54:00:20:00:01"}); err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateNode(ctx, map[string]any{"name": "b", "driver": "ipmi",
		"driver_info": map[string]any{"ipmi_address": "192.0.2.9", "ipmi_port": 6230}})
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "amb.json", map[string]any{"nodes": []any{
		// a's MAC and b's BMC: which node is it?
		map[string]any{"name": "x", "pm_type": "ipmi", "pm_addr": "192.0.2.9", "pm_port": 6230, "mac": []string{"52:54:00:20:00:01"}},
		// b by uuid: updated, not duplicated
		map[string]any{"uuid": b.UUID, "pm_type": "fake-hardware", "cpu": 2},
	}})
	// validation passes: the file itself has no duplicates
	s.runWant(0, "import", file, "--validate-only")
	code, out, _ := s.run("import", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	mustContain(t, "ambiguous", out, "matches more than one registered node",
		"node a ("+a.UUID+") by MAC 52:54:00:20:00:01", "node b ("+b.UUID+") by BMC 192.0.2.9:6230", "1 succeeded, 1 failed")
	if n := len(s.nodes()); n != 2 {
		t.Errorf("%d nodes, want 2", n)
	}
	nb := s.node(b.UUID)
	if nb.Driver != "fake-hardware" || nb.Properties["cpus"] != float64(2) || nb.ProvisionState != "manageable" {
		t.Errorf("b by uuid: %s %v %s", nb.Driver, nb.Properties, nb.ProvisionState)
	}
}

// TestValidateOnly reports duplicates and touches nothing.
func TestValidateOnly(t *testing.T) {
	s := newServer(t)
	rack := fakeRack("v", 3)
	nodes := rack["nodes"].([]map[string]any)
	nodes[2]["mac"] = nodes[0]["mac"]
	nodes[1]["name"] = nodes[0]["name"]
	nodes = append(nodes,
		map[string]any{"name": "i1", "pm_type": "pxe_ipmitool", "pm_addr": "10.1.1.1"},
		map[string]any{"name": "i2", "pm_type": "ipmi", "pm_addr": "10.1.1.1", "pm_port": 623})
	file := writeFile(t, "dup.json", map[string]any{"nodes": nodes})
	code, out, errs := s.run("import", file, "--validate-only")
	if code != 1 || out != "" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	mustContain(t, "stderr", errs, "duplicate name v-000: v-000 and v-000",
		"duplicate MAC 52:54:00:01:00:00: v-000 and v-002", "duplicate BMC address 10.1.1.1:623: i1 and i2")
	// Without --validate-only the same file is refused before any request.
	if code, _, _ := s.run("import", file); code != 1 {
		t.Errorf("import of an invalid file: exit %d", code)
	}
	if n := len(s.nodes()); n != 0 {
		t.Errorf("%d nodes created", n)
	}
	good := writeFile(t, "good.json", fakeRack("g", 4))
	code, out, _ = s.run("import", good, "--validate-only")
	if code != 0 || !strings.Contains(out, "4 node(s), no problems found") {
		t.Errorf("valid file: exit %d %q", code, out)
	}
	if n := len(s.nodes()); n != 0 {
		t.Errorf("--validate-only created %d nodes", n)
	}
}

// TestImportIPMICredentials registers two ipmi nodes against real ipmi_sim
// BMCs: the one with a wrong password stays in enroll with the BMC's error;
// fixing the file and importing again updates it and makes it manageable.
func TestImportIPMICredentials(t *testing.T) {
	good, bad := ipmisim.StartSim(t), ipmisim.StartSim(t)
	s := newServer(t)
	entry := func(name string, sim *ipmisim.Sim, pw string) map[string]any {
		return map[string]any{"name": name, "pm_type": "pxe_ipmitool", "pm_addr": "127.0.0.1",
			"pm_port": sim.Port, "pm_user": ipmisim.User, "pm_password": pw,
			// Full port in the MAC: two simulators never share one.
			"mac": []string{fmt.Sprintf("52:54:00:30:%02x:%02x", sim.Port>>8, sim.Port&0xff)}}
	}
	file := writeFile(t, "ipmi.json", map[string]any{"nodes": []any{
		entry("bmc-good", good, ipmisim.Password), entry("bmc-bad", bad, "wrong-password")}})
	out, _ := s.runWant(1, "import", file)
	g, b := s.node("bmc-good"), s.node("bmc-bad")
	if g.ProvisionState != "manageable" || g.Driver != "ipmi" || g.DriverInfo["ipmi_address"] != "127.0.0.1" ||
		g.DriverInfo["ipmi_port"] != float64(good.Port) || g.DriverInfo["ipmi_username"] != ipmisim.User {
		t.Errorf("good: %s %s %v", g.ProvisionState, g.Driver, g.DriverInfo)
	}
	if b.ProvisionState != "enroll" || b.LastError == "" {
		t.Fatalf("bad: %s last_error %q", b.ProvisionState, b.LastError)
	}
	// The BMC's own error is in the summary, on the failed node's row.
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "bmc-bad ") && strings.Contains(l, "FAILED") {
			row = l
		}
	}
	if row == "" || !strings.Contains(row, oneLine(b.LastError)) || !strings.Contains(row, "enroll") {
		t.Errorf("summary row for bmc-bad %q lacks %q:\n%s", row, b.LastError, out)
	}
	mustContain(t, "summary", out, "1 succeeded, 1 failed")

	fixed := writeFile(t, "ipmi-fixed.json", map[string]any{"nodes": []any{
		entry("bmc-good", good, ipmisim.Password), entry("bmc-bad", bad, ipmisim.Password)}})
	out, _ = s.runWant(0, "import", fixed)
	mustContain(t, "re-import", out, "0 node(s) created, 2 already registered")
	if b := s.node("bmc-bad"); b.ProvisionState != "manageable" {
		t.Errorf("after fixing the password: %s %q", b.ProvisionState, b.LastError)
	}
	if n := len(s.nodes()); n != 2 {
		t.Errorf("%d nodes", n)
	}
}

// TestImportRedfish registers redfish nodes from an instackenv file as
// TripleO writes them (pm_type redfish, pm_addr, pm_user, pm_password,
// pm_system_id) against a Redfish BMC: the credentials are checked on
// manage, --introspect inspects out of band and creates the ports, and a
// wrong password leaves its node in enroll with the BMC's answer.
func TestImportRedfish(t *testing.T) {
	good := redfishfake.Start(t, "idrac9", false)
	other := redfishfake.Start(t, "dmtf-rackmount", false)
	s := newServer(t)
	file := writeFile(t, "redfish.json", map[string]any{"nodes": []any{
		map[string]any{"name": "rf-good", "pm_type": "redfish", "pm_addr": good.Srv.URL, "pm_user": redfishfake.User,
			"pm_password": redfishfake.Pass, "pm_system_id": "/redfish/v1/Systems/System.Embedded.1"},
		map[string]any{"name": "rf-bad", "pm_type": "redfish", "pm_addr": other.Srv.URL, "pm_user": redfishfake.User,
			"pm_password": "wrong"},
	}})
	out, _ := s.runWant(1, "import", "--introspect", file)
	g, b := s.node("rf-good"), s.node("rf-bad")
	if g.ProvisionState != "manageable" || g.Driver != "redfish" || g.DriverInfo["redfish_address"] != good.Srv.URL ||
		g.DriverInfo["redfish_system_id"] != "/redfish/v1/Systems/System.Embedded.1" {
		t.Fatalf("good: %s %s %v %q", g.ProvisionState, g.Driver, g.DriverInfo, g.LastError)
	}
	if g.Properties["memory_mb"] != float64(196597) || g.Properties["cpu_arch"] != "x86_64" {
		t.Errorf("inspected properties %v", g.Properties)
	}
	ports, err := s.client().ListPorts(context.Background())
	var macs []string
	for _, p := range ports {
		if p.NodeUUID == g.UUID {
			macs = append(macs, p.Address)
		}
	}
	if err != nil || strings.Join(macs, " ") != "e4:43:4b:12:34:56 e4:43:4b:12:34:58" {
		t.Errorf("ports after out-of-band inspection: %v %v", macs, err)
	}
	if b.ProvisionState != "enroll" || !strings.Contains(b.LastError, "HTTP 401") {
		t.Fatalf("bad: %s last_error %q", b.ProvisionState, b.LastError)
	}
	mustContain(t, "summary", out, "1 succeeded, 1 failed")
}
