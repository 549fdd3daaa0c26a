// Package metal3 replays what Metal3's baremetal-operator v0.13.2 sends to
// its Ironic (../shared/metal3: the node create per BMC address type and
// the recorded lifecycle of an ipmi:// host) against a real castiron on
// loopback whose BMCs are castiron's own simulators (ipmisim, redfishsim
// state-only). The test plays the two other parties: BMO (its requests,
// headers and microversion, reading the answers as BMO's provisioner reads
// them, through gophercloud's inventory types) and the ramdisk (the
// inspection report, lookup and heartbeats of castiron's agent protocol,
// through the agent's own API client).
package metal3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"

	"castiron/engine"
	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/httpapi"
	"castiron/ramdisk/agent/apiclient"
	"castiron/ramdisk/iso"
	"castiron/ramdisk/lldp"
	"castiron/ramdisk/protocol"
)

// bmoVersion is the microversion BMO v0.13.2 picks on castiron
// (clients.ChooseMicroversion; its TryInit logged 1.110 against castiron).
const bmoVersion = "1.110"

// castiron is the server under test and the test's HTTP client for it.
type castiron struct {
	t   *testing.T
	url string
}

func startCastiron(t *testing.T) *castiron {
	t.Helper()
	quiet := enginetest.Quiet()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	// The ramdisk files an ISO is built from; their content does not matter
	// to a state-only BMC, which records the ISO's URL.
	rd := t.TempDir()
	for _, name := range []string{iso.ISOLinuxName, iso.LDLinuxName, iso.GRUBEFIName, "vmlinuz", "initramfs"} {
		if err := os.WriteFile(filepath.Join(rd, name), bytes.Repeat([]byte(name), 64), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ip := ipmi.New(ipmi.Config{Logger: quiet})
	rf := redfish.New(redfish.Config{Logger: quiet})
	t.Cleanup(func() { _ = rf.Close(context.Background()) })
	cond, _ := enginetest.Start(t, engine.Config{
		Hostname: "test-conductor", AutomatedClean: true, CallbackTimeout: time.Minute,
		AgentPowerOffWait: 100 * time.Millisecond,
		// BMC tasks (RAID volumes, BIOS jobs) are polled often: the
		// emulator's tasks take TaskDelay, set short below.
		StepPollInterval: 50 * time.Millisecond, StepTimeout: time.Minute,
		VMedia: &engine.VMediaConfig{ISOs: iso.NewCache(t.TempDir()), RamdiskDir: rd, APIURL: url},
	},
		engine.NewIPMIHardware(ip, ip, ipmi.Properties()),
		engine.NewRedfishHardware(rf, redfish.Properties()),
		engine.NewIDRACHardware(rf, redfish.Properties()),
		engine.NewILO5Hardware(rf, redfish.ILOProperties()))
	srv := &http.Server{Handler: httpapi.New(cond, httpapi.Options{Logger: quiet}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &castiron{t: t, url: url}
}

// do sends one request as BMO's gophercloud client does (the microversion
// header unless version is ""), and returns the status and decoded body.
func (c *castiron) do(method, path, version string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if version != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	out["_raw"] = string(raw)
	return resp.StatusCode, out
}

// must is do that fails the test on any other status.
func (c *castiron) must(want int, method, path string, body any) map[string]any {
	c.t.Helper()
	got, out := c.do(method, path, bmoVersion, body)
	if got != want {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, got, want, out["_raw"])
	}
	return out
}

// waitState polls the node as BMO does until provision_state is want; a
// failed state or the deadline fails the test with last_error.
func (c *castiron) waitState(uuid, want string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid, nil)
		st, _ := n["provision_state"].(string)
		if st == want {
			return n
		}
		if strings.HasSuffix(st, "failed") || time.Now().After(deadline) {
			c.t.Fatalf("node %s in %q waiting for %q, last_error %v", uuid, st, want, n["last_error"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPower polls power_state until want.
func (c *castiron) waitPower(uuid, want string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid, nil)
		if n["power_state"] == want && n["target_power_state"] == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %s power %v (target %v), want %s; last_error %v", uuid, n["power_state"], n["target_power_state"], want, n["last_error"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// host is one BareMetalHost: its BMC type and what BMO derives from it.
type host struct {
	bmcType    string // the BareMetalHost's BMC address scheme
	driver     string
	boot       string
	firmware   string
	raid       string
	bios       string
	vendorMgmt string // management/power/vendor, when BMO sends them
	driverInfo map[string]any
	mac        string
	rf         *redfishsim.Server // nil for ipmi
}

// createBody is BMO's POST /v1/nodes for h (README table).
func (h *host) createBody(name string) map[string]any {
	b := map[string]any{
		"name": name, "driver": h.driver, "driver_info": h.driverInfo, "boot_interface": h.boot,
		"inspect_interface": "agent", "disable_power_off": false,
		"properties": map[string]any{"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"},
	}
	for k, v := range map[string]string{"firmware_interface": h.firmware, "raid_interface": h.raid, "bios_interface": h.bios,
		"management_interface": h.vendorMgmt, "power_interface": h.vendorMgmt, "vendor_interface": h.vendorMgmt} {
		if v != "" {
			b[k] = v
		}
	}
	return b
}

func startRedfish(t *testing.T, flavour redfishsim.Flavour, mac string) (*redfishsim.Server, string) {
	t.Helper()
	s, err := redfishsim.New(redfishsim.Config{Flavour: flavour, MACs: []string{mac}, TaskDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close(context.Background()) })
	return s, "http://" + ln.Addr().String()
}

// hosts builds every BMC address type of the README table with a BMC of
// its own.
func hosts(t *testing.T) []*host {
	t.Helper()
	fleet, err := ipmisim.Start(context.Background(), ipmisim.Config{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	bmc := fleet.BMCs[0]
	var out []*host
	out = append(out, &host{bmcType: "ipmi", driver: "ipmi", boot: "ipxe", raid: "no-raid", mac: "52:54:00:4d:33:01",
		driverInfo: map[string]any{"ipmi_address": bmc.Host(), "ipmi_port": fmt.Sprint(bmc.Port()), "ipmi_username": ipmisim.DefaultUser,
			"ipmi_password": ipmisim.DefaultPassword, "ipmi_priv_level": "ADMINISTRATOR"}})
	rfHost := func(scheme string, flavour redfishsim.Flavour, i int) *host {
		mac := fmt.Sprintf("52:54:00:4d:34:%02x", i)
		s, url := startRedfish(t, flavour, mac)
		h := &host{bmcType: scheme, mac: mac, rf: s, driver: "redfish", firmware: "redfish", raid: "redfish"}
		h.driverInfo = map[string]any{"redfish_address": url, "redfish_system_id": s.SystemPath(),
			"redfish_username": s.User(), "redfish_password": s.Password()}
		return h
	}
	r := rfHost("redfish", redfishsim.Generic, 1)
	r.boot = "ipxe"
	out = append(out, r)
	r = rfHost("redfish-virtualmedia", redfishsim.Generic, 2)
	r.boot = "redfish-virtual-media"
	out = append(out, r)
	r = rfHost("redfish-uefihttp", redfishsim.Generic, 3)
	r.boot = "redfish-https"
	out = append(out, r)
	r = rfHost("idrac-redfish", redfishsim.IDRAC, 4)
	r.driver, r.boot, r.raid, r.bios, r.vendorMgmt = "idrac", "ipxe", "idrac-redfish", "idrac-redfish", "idrac-redfish"
	out = append(out, r)
	r = rfHost("idrac-virtualmedia", redfishsim.IDRAC, 5)
	r.driver, r.boot, r.raid, r.bios, r.vendorMgmt = "idrac", "idrac-redfish-virtual-media", "idrac-redfish", "idrac-redfish", "idrac-redfish"
	out = append(out, r)
	return out
}

// register is BMO's registration: look the host up by name and by its
// boot MAC, create it (disable_power_off false), create its port, manage.
func (c *castiron) register(h *host, name string) string {
	c.t.Helper()
	if st, _ := c.do("GET", "/v1/nodes/"+name, bmoVersion, nil); st != http.StatusNotFound {
		c.t.Fatalf("GET unknown node %s: %d, want 404", name, st)
	}
	ports := c.must(http.StatusOK, "GET", "/v1/ports?address="+strings.ReplaceAll(h.mac, ":", "%3A")+"&fields=node_uuid", nil)
	if l, _ := ports["ports"].([]any); len(l) != 0 {
		c.t.Fatalf("ports for %s before create: %v", h.mac, l)
	}
	body := h.createBody(name)
	// Every interface BMO names must exist: a 400 here is a create BMO
	// could not make.
	st, n := c.do("POST", "/v1/nodes", bmoVersion, body)
	if st != http.StatusCreated {
		c.t.Fatalf("%s create: %d %s", h.bmcType, st, n["_raw"])
	}
	if n["disable_power_off"] != false || n["driver"] != h.driver || n["boot_interface"] != h.boot || n["inspect_interface"] != "agent" {
		c.t.Fatalf("%s created as %v/%v/%v disable_power_off=%v", h.bmcType, n["driver"], n["boot_interface"], n["inspect_interface"], n["disable_power_off"])
	}
	if h.vendorMgmt != "" && (n["management_interface"] != h.vendorMgmt || n["power_interface"] != h.vendorMgmt || n["vendor_interface"] != h.vendorMgmt) {
		c.t.Fatalf("%s: management/power/vendor %v/%v/%v", h.bmcType, n["management_interface"], n["power_interface"], n["vendor_interface"])
	}
	uuid := n["uuid"].(string)
	p := c.must(http.StatusCreated, "POST", "/v1/ports", map[string]any{"address": h.mac, "node_uuid": uuid, "pxe_enabled": true})
	if p["pxe_enabled"] != true {
		c.t.Fatalf("port %v", p)
	}
	c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "manage"})
	c.waitState(uuid, "manageable")
	patch := []map[string]any{
		{"op": "add", "path": "/driver_info/deploy_kernel", "value": "http://127.0.0.1:7452/ironic-python-agent.kernel"},
		{"op": "add", "path": "/driver_info/deploy_ramdisk", "value": "http://127.0.0.1:7452/ironic-python-agent.initramfs"},
		{"op": "add", "path": "/automated_clean", "value": true},
	}
	if strings.Contains(h.boot, "virtual-media") || h.boot == "redfish-https" {
		patch = append(patch, map[string]any{"op": "add", "path": "/driver_info/deploy_iso", "value": "http://127.0.0.1:7452/ironic-python-agent.iso"})
	}
	c.must(http.StatusOK, "PATCH", "/v1/nodes/"+uuid, patch)
	return uuid
}

// lldpPDU is what the switch port the host's NIC is cabled to announces.
func lldpPDU() []lldp.TLV {
	return []lldp.TLV{
		{Type: lldp.TypeChassisID, Value: []byte{4, 0x00, 0x11, 0x22, 0xaa, 0xbb, 0xcc}},
		{Type: lldp.TypePortID, Value: append([]byte{5}, "Ethernet1/7"...)},
		{Type: lldp.TypeTTL, Value: []byte{0, 120}},
		{Type: lldp.TypeSysName, Value: []byte("tor-a.rack1")},
	}
}

// inspect is BMO's inspection: PUT inspect, the ramdisk's report (played
// here as castiron's agent sends it), manageable, then the inventory and
// plugin_data as BMO reads them.
func (c *castiron) inspect(h *host, uuid string) {
	c.t.Helper()
	c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "inspect"})
	c.waitState(uuid, "inspect wait")
	ip := "192.0.2.50"
	data := protocol.InspectionData{
		Inventory: protocol.Inventory{
			Interfaces: []protocol.Interface{
				{Name: "eth0", MACAddress: h.mac, IPV4Address: &ip, HasCarrier: true, LLDP: lldp.Raw(lldpPDU())},
				{Name: "eth1", MACAddress: h.mac[:len(h.mac)-2] + "f0", HasCarrier: false},
			},
			CPU:    protocol.CPU{ModelName: "Test CPU", Frequency: "2400.000", Count: 4, Architecture: "x86_64", Flags: []string{"lm"}},
			Disks:  []protocol.Disk{{Name: "/dev/sda", Model: "disk", Size: 64 << 30}},
			Memory: protocol.Memory{Total: 8 << 30, PhysicalMB: 8192},
			Boot:   protocol.Boot{CurrentBootMode: "uefi", PXEInterface: h.mac},
		},
		BootInterface: "01-" + strings.ReplaceAll(h.mac, ":", "-"),
	}
	ag := apiclient.New(c.url, "castiron-agent/test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ag.ContinueInspection(ctx, c.url+"/v1/continue_inspection", data); err != nil {
		c.t.Fatalf("continue_inspection: %v", err)
	}
	c.waitState(uuid, "manageable")
	out := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid+"/inventory", nil)
	var inv struct {
		Inventory  inventory.InventoryType      `json:"inventory"`
		PluginData inventory.StandardPluginData `json:"plugin_data"`
	}
	if err := json.Unmarshal([]byte(out["_raw"].(string)), &inv); err != nil {
		c.t.Fatalf("inventory as BMO decodes it: %v", err)
	}
	pd := inv.PluginData
	if !pd.AllInterfaces["eth0"].PXEEnabled || pd.AllInterfaces["eth1"].PXEEnabled || pd.AllInterfaces["eth0"].MACAddress != h.mac {
		c.t.Fatalf("all_interfaces %+v: eth0 (the boot NIC) must be pxe_enabled, eth1 not", pd.AllInterfaces)
	}
	if pd.BootInterface != data.BootInterface || pd.RootDisk.Name != "/dev/sda" || len(pd.ValidInterfaces) != 2 || !slices.Contains(pd.MACs, h.mac) {
		c.t.Fatalf("plugin_data boot_interface %q root_disk %q valid %d macs %v", pd.BootInterface, pd.RootDisk.Name, len(pd.ValidInterfaces), pd.MACs)
	}
	if l := pd.ParsedLLDP["eth0"]; l["switch_port_id"] != "Ethernet1/7" || l["switch_chassis_id"] != "00:11:22:aa:bb:cc" || l["switch_system_name"] != "tor-a.rack1" {
		c.t.Fatalf("parsed_lldp %v", pd.ParsedLLDP)
	}
	if raw := pd.RawLLDP["eth0"]; len(raw) != 4 || raw[1].Type != lldp.TypePortID {
		c.t.Fatalf("lldp_raw %v", pd.RawLLDP)
	}
	if h.rf != nil {
		c.checkBoot(h)
	}
}

// checkBoot: the ramdisk boot the BMC saw is the boot interface's: PXE for
// ipxe, the CD with castiron's ISO inserted for virtual media, UEFI HTTP
// from castiron's ISO URL for redfish-https.
func (c *castiron) checkBoot(h *host) {
	c.t.Helper()
	last := h.rf.Snapshot().LastBoot
	switch h.boot {
	case "ipxe":
		if last.Target != "Pxe" {
			c.t.Fatalf("%s: ramdisk booted with %+v, want Pxe", h.bmcType, last)
		}
	case "redfish-https":
		if last.Target != "UefiHttp" || !strings.HasPrefix(last.HTTPBootURI, c.url+"/boot/vmedia/") || !strings.HasSuffix(last.HTTPBootURI, ".iso") {
			c.t.Fatalf("%s: ramdisk booted with %+v, want UefiHttp from %s/boot/vmedia/*.iso", h.bmcType, last, c.url)
		}
	default:
		if last.Target != "Cd" {
			c.t.Fatalf("%s: ramdisk booted with %+v, want Cd", h.bmcType, last)
		}
		if h.rf.Stats().Inserts == 0 {
			c.t.Fatalf("%s: no virtual media inserted", h.bmcType)
		}
	}
}

// agent plays castiron's ramdisk agent through one ramdisk boot: lookup,
// then heartbeats running every step castiron hands out (each reported
// succeeded) until castiron says power_off.
func (c *castiron) agent(h *host, uuid string) []string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ag := apiclient.New(c.url, "castiron-agent/test")
	lr, err := ag.Lookup(ctx, []string{h.mac}, uuid)
	if err != nil {
		c.t.Fatalf("lookup: %v", err)
	}
	hb := protocol.Heartbeat{AgentToken: lr.Config.AgentToken, AgentVersion: "test"}
	var steps []string
	for ctx.Err() == nil {
		in, err := ag.Heartbeat(ctx, uuid, hb)
		if err != nil && strings.Contains(err.Error(), "agent token") {
			// A conductor step rebooted the node (BIOS settings, RAID):
			// the ramdisk boots again and looks itself up for a new token.
			if lr, err = ag.Lookup(ctx, []string{h.mac}, uuid); err != nil {
				c.t.Fatalf("lookup after a reboot: %v", err)
			}
			hb = protocol.Heartbeat{AgentToken: lr.Config.AgentToken, AgentVersion: "test"}
			continue
		}
		if err != nil {
			c.t.Fatalf("heartbeat: %v", err)
		}
		hb.Step = nil
		switch in.Command {
		case protocol.CmdRunStep:
			steps = append(steps, in.Step.Name)
			hb.Step = &protocol.StepReport{ID: in.Step.ID, Status: protocol.StepSucceeded, Result: map[string]any{}}
		case protocol.CmdPowerOff:
			return steps
		case protocol.CmdWait:
			time.Sleep(20 * time.Millisecond)
		default:
			_, n := c.do("GET", "/v1/nodes/"+uuid, bmoVersion, nil)
			c.t.Fatalf("agent told %q (%s); node %v: %v", in.Command, in.Reason, n["provision_state"], n["last_error"])
		}
	}
	c.t.Fatal("agent: no power_off within a minute")
	return nil
}

// prepare is BMO's "preparing" of a Redfish-family host with firmware
// settings and a RAID layout in its spec: the settings read (GET bios with
// the registry), the RAID target set, one manual clean through the ramdisk
// with RAID delete + create and the BIOS settings
// (pkg/provisioner/ironic: buildManualCleaningSteps), then the settings,
// raid_config and firmware components read back.
func (c *castiron) prepare(h *host, uuid string) {
	c.t.Helper()
	bios := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid+"/bios?detail=True", nil)
	var found map[string]any
	for _, v := range bios["bios"].([]any) {
		if s := v.(map[string]any); s["name"] == "ProcVirtualization" {
			found = s
		}
	}
	if found == nil || found["value"] != "Enabled" || !slices.Contains(toStrings(found["allowable_values"]), "Disabled") {
		c.t.Fatalf("%s: GET bios?detail=True: ProcVirtualization %v", h.bmcType, found)
	}
	c.must(http.StatusNoContent, "PUT", "/v1/nodes/"+uuid+"/states/raid", map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": 20, "raid_level": "1", "is_root_volume": true},
	}})
	c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "clean", "clean_steps": []any{
		map[string]any{"interface": "raid", "step": "delete_configuration"},
		map[string]any{"interface": "raid", "step": "create_configuration"},
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{
			"settings": []any{map[string]any{"name": "ProcVirtualization", "value": "Disabled"}}}},
	}})
	c.waitState(uuid, "clean wait")
	c.agent(h, uuid)
	n := c.waitState(uuid, "manageable")
	if n["last_error"] != nil {
		c.t.Fatalf("%s: manual clean: %v", h.bmcType, n["last_error"])
	}
	got := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid+"/bios/ProcVirtualization", nil)
	if v, _ := got["ProcVirtualization"].(map[string]any); v == nil || v["value"] != "Disabled" {
		c.t.Fatalf("%s: bios setting after the clean: %v", h.bmcType, got)
	}
	rc, _ := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid, nil)["raid_config"].(map[string]any)
	if lds, _ := rc["logical_disks"].([]any); len(lds) != 1 || lds[0].(map[string]any)["raid_level"] != "1" {
		c.t.Fatalf("%s: raid_config after the clean: %v", h.bmcType, rc)
	}
	fw := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid+"/firmware", nil)
	if l, _ := fw["firmware"].([]any); len(l) == 0 {
		c.t.Fatalf("%s: GET firmware: %v", h.bmcType, fw)
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// TestBMOLifecycle: for every BMC address type of the README table, BMO's
// registration, inspection, cleaning (automated_clean), provisioning with an
// image URL + checksum + config drive, power off/on, deprovisioning and
// delete; then a second host adopted and detached (maintenance + delete).
func TestBMOLifecycle(t *testing.T) {
	c := startCastiron(t)
	// BMO's start-up: the root answers the version range, the drivers list.
	st, root := c.do("GET", "/v1/", "", nil)
	if st != http.StatusOK {
		t.Fatalf("GET /v1/: %d", st)
	}
	ver, _ := root["version"].(map[string]any)
	var minor int
	if _, err := fmt.Sscanf(fmt.Sprint(ver["version"]), "1.%d", &minor); err != nil || minor < 110 {
		t.Fatalf("maximum microversion %v: BMO v0.13.2 picks 1.110 only from an Ironic offering it", ver["version"])
	}
	drivers := c.must(http.StatusOK, "GET", "/v1/drivers", nil)
	var names []string
	for _, d := range drivers["drivers"].([]any) {
		names = append(names, d.(map[string]any)["name"].(string))
	}
	for _, want := range []string{"ipmi", "redfish", "idrac", "ilo5"} {
		if !slices.Contains(names, want) {
			t.Fatalf("GET /v1/drivers: %v lacks %s", names, want)
		}
	}
	idrac := c.must(http.StatusOK, "GET", "/v1/drivers/idrac", nil)
	if b := fmt.Sprint(idrac["enabled_boot_interfaces"]); !strings.Contains(b, "idrac-redfish-virtual-media") {
		t.Fatalf("idrac boot interfaces %s", b)
	}

	for i, h := range hosts(t) {
		t.Run(h.bmcType, func(t *testing.T) {
			c := &castiron{t: t, url: c.url}
			name := fmt.Sprintf("metal3~worker-%d", i)
			uuid := c.register(h, name)
			c.inspect(h, uuid)
			if h.rf != nil {
				c.prepare(h, uuid)
			}
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/power", map[string]any{"target": "power on"})
			c.waitPower(uuid, "power on")

			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "provide"})
			c.waitState(uuid, "clean wait")
			if steps := c.agent(h, uuid); !slices.Contains(steps, protocol.StepEraseDevicesMetadata) {
				t.Fatalf("automated cleaning ran %v", steps)
			}
			c.waitState(uuid, "available")

			c.must(http.StatusOK, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
				{"op": "add", "path": "/instance_uuid", "value": fmt.Sprintf("6d657461-6c33-4000-8000-%012d", i+1)},
				{"op": "add", "path": "/instance_info/root_device", "value": map[string]any{"name": "s== /dev/sda"}},
				{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{}},
				{"op": "add", "path": "/instance_info/image_disk_format", "value": "raw"},
				{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
				{"op": "add", "path": "/instance_info/image_os_hash_value", "value": "b53d2e2c84e19771c5a80f27ac78ff4d48f12972ff87f6ef07962b6ffb832656"},
				{"op": "add", "path": "/instance_info/image_source", "value": "http://127.0.0.1:7452/images/harness-os.raw"},
				{"op": "add", "path": "/driver_info/force_persistent_boot_device", "value": "Default"},
			})
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active", "configdrive": map[string]any{
				"meta_data":    map[string]any{"local-hostname": name, "metal3-name": name, "metal3-namespace": "metal3", "name": name},
				"network_data": map[string]any{"links": []any{map[string]any{"ethernet_mac_address": h.mac, "id": "eth0", "type": "phy"}}, "networks": []any{}, "services": []any{}},
				"user_data":    "#cloud-config\nhostname: " + name + "\n",
			}})
			c.waitState(uuid, "wait call-back")
			if steps := c.agent(h, uuid); !slices.Contains(steps, protocol.StepWriteImage) {
				t.Fatalf("deploy ran %v", steps)
			}
			n := c.waitState(uuid, "active")
			if n["last_error"] != nil {
				t.Fatalf("active with last_error %v", n["last_error"])
			}

			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/power", map[string]any{"target": "soft power off", "timeout": 180})
			c.waitPower(uuid, "power off")
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/power", map[string]any{"target": "power on"})
			c.waitPower(uuid, "power on")

			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "deleted"})
			c.waitState(uuid, "clean wait")
			c.agent(h, uuid)
			c.waitState(uuid, "available")
			c.must(http.StatusNoContent, "DELETE", "/v1/nodes/"+uuid, nil)
			if st, _ := c.do("GET", "/v1/nodes/"+uuid, bmoVersion, nil); st != http.StatusNotFound {
				t.Fatalf("deleted node: %d", st)
			}

			// Adopt an already provisioned host, then detach it.
			uuid = c.register(h, name+"-adopted")
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "adopt"})
			c.waitState(uuid, "active")
			c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/maintenance", map[string]any{"reason": "forcing deletion in baremetal-operator"})
			c.must(http.StatusNoContent, "DELETE", "/v1/nodes/"+uuid, nil)
		})
	}
}
