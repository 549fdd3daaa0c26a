//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Zero-touch through the real path: a VM castiron has never heard of is
// powered on through its BMC (ipmitool, as a person pressing the button),
// network-boots, its agent reads the BMC's address over KCS and posts the
// inventory, castiron enrolls it, a rule gives it the site's BMC
// credentials and the node goes to manageable by itself.

// discoveryRules is the site's built-in rules file: Ironic's documented
// auto-discovery rule, for this lab's BMCs. The cipher suite is the only
// one ipmi_sim accepts.
func discoveryRules(withCredentials bool) string {
	creds := ""
	if withCredentials {
		creds = fmt.Sprintf(`
    - op: set-attribute
      args: {path: /driver_info/ipmi_username, value: %q}
    - op: set-attribute
      args: {path: /driver_info/ipmi_password, value: %q}`, BMCUser, BMCPassword)
	}
	return `- description: "site BMC settings for auto-discovered lab machines"
  priority: 100
  sensitive: true
  conditions:
    - op: is-true
      args: {value: "{plugin_data[auto_discovered]}"}
    - op: contains
      args: {value: "{inventory[system_vendor][manufacturer]}", regex: "(?i)castiron"}
  actions:
    - op: set-attribute
      args: {path: /driver_info/ipmi_cipher_suite, value: 3}` + creds + `
    - op: add-trait
      args: {name: CUSTOM_ZERO_TOUCH}
`
}

type discoveryCase struct {
	label   string
	bmcUser string // --discovery-bmc-user; "" for credentials from the rule
	again   bool   // boot the machine again (ports deleted): no second node
}

// TestDiscoveryBIOS: power on → enroll → manageable with the rule's
// credentials; booted again without its port (an unknown MAC to DHCP), the
// machine is recognised by the BMC address its agent reads and no second
// node appears.
func TestDiscoveryBIOS(t *testing.T) {
	discoverToManageable(t, discoveryCase{label: "discovery_bios", again: true})
}

// TestDiscoveryBMCUser: the rule sets no credentials; the agent creates
// the IPMI user in-band (--discovery-bmc-user) and manage verifies it out
// of band.
func TestDiscoveryBMCUser(t *testing.T) {
	discoverToManageable(t, discoveryCase{label: "discovery_bmc_user", bmcUser: "castiron"})
}

func discoverToManageable(t *testing.T, tc discoveryCase) {
	ramdiskDir(t)
	l := NewLab(t, LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}, InbandBMC: true})
	rules := filepath.Join(l.Dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(discoveryRules(tc.bmcUser == "")), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--pxe-discovery", "--inspection-rules-file", rules}
	if tc.bmcUser != "" {
		args = append(args, "--discovery-bmc-user", tc.bmcUser)
	}
	c := StartCastiron(t, l, CastironOptions{ExtraArgs: args})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if nodes, err := c.NodeUUIDs(ctx); err != nil || len(nodes) != 0 {
		t.Fatalf("before power on: nodes %v, err %v", nodes, err)
	}

	start := pressPowerOn(ctx, t, l)
	var nodeUUID string
	_, err := waitFor(ctx, 240*time.Second, func() bool {
		nodes, err := c.NodeUUIDs(ctx)
		if err == nil && len(nodes) > 0 {
			nodeUUID = nodes[0]
		}
		return nodeUUID != ""
	})
	if err != nil {
		t.Fatalf("no node discovered: %v", err)
	}
	n, err := c.WaitProvisionState(ctx, nodeUUID, "manageable", 240*time.Second)
	manageableAt := time.Now()
	if err != nil {
		t.Fatalf("discovered node %s: %v", nodeUUID, err)
	}
	expectPoweredOff(ctx, t, l, "after discovery", 60*time.Second)
	enrolledAt, managedAt := checkDiscoveredNode(ctx, t, c, l, n, tc)
	// enroll and manageable as the node's history stamps them (the polls
	// above see them up to 250 ms late).
	t.Log(TimingLine(tc.label, start, manageableAt, withPhases(BootPhases(ctx, l, c, nodeUUID, start, manageableAt),
		Phase{Name: "enroll", At: enrolledAt, Source: "history"}, Phase{Name: "manageable", At: managedAt, Source: "history"})))

	if tc.bmcUser != "" {
		checkBMCUser(ctx, t, c, l, tc.bmcUser)
	}
	checkInspectedProperties(t, n, l.Opts)
	checkPorts(ctx, t, c, n.UUID, l.MACs[0])
	checkInventory(ctx, t, c, n.UUID, l)
	if tc.again {
		bootAgain(ctx, t, c, l, n.UUID)
	}
}

// pressPowerOn is the person at the rack: boot from the network, power on.
func pressPowerOn(ctx context.Context, t *testing.T, l *Lab) time.Time {
	t.Helper()
	if _, err := l.Ipmitool(ctx, "chassis", "bootdev", "pxe"); err != nil {
		t.Fatalf("ipmitool chassis bootdev pxe: %v", err)
	}
	start := time.Now()
	if _, err := l.Ipmitool(ctx, "chassis", "power", "on"); err != nil {
		t.Fatalf("ipmitool chassis power on: %v", err)
	}
	return start
}

// checkDiscoveredNode: driver, name, the BMC read in-band, the rule's
// settings (password masked) and what the history says; it returns when
// the history has the node enrolled and manageable.
func checkDiscoveredNode(ctx context.Context, t *testing.T, c *Castiron, l *Lab, n *Node, tc discoveryCase) (enrolled, managed time.Time) {
	t.Helper()
	if n.Driver != "ipmi" {
		t.Errorf("driver %q, want ipmi", n.Driver)
	}
	if n.Name != l.Serial {
		t.Errorf("name %q, want the system serial %q", n.Name, l.Serial)
	}
	wantUser := BMCUser
	if tc.bmcUser != "" {
		wantUser = tc.bmcUser
	}
	di := n.DriverInfo
	if di["ipmi_address"] != BMCInbandAddress || di["ipmi_username"] != wantUser || di["ipmi_password"] != "******" ||
		fmt.Sprint(di["ipmi_cipher_suite"]) != "3" {
		t.Errorf("driver_info %v: want ipmi_address %s (read in-band), ipmi_username %s, masked password, cipher suite 3",
			di, BMCInbandAddress, wantUser)
	}
	if auto, _ := n.DriverInternalInfo["auto_discovered"].(bool); !auto {
		t.Errorf("driver_internal_info %v: no auto_discovered", n.DriverInternalInfo)
	}
	inv, plugin, err := c.Inventory(ctx, n.UUID)
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	if inv.BMCAddress == nil || *inv.BMCAddress != BMCInbandAddress || inv.BMCMAC == nil || !strings.EqualFold(*inv.BMCMAC, BMCInbandMAC) {
		t.Errorf("inventory bmc_address %v bmc_mac %v: want %s %s", deref(inv.BMCAddress), deref(inv.BMCMAC), BMCInbandAddress, BMCInbandMAC)
	}
	if plugin["auto_discovered"] != true {
		t.Errorf("plugin_data.auto_discovered = %v, want true", plugin["auto_discovered"])
	}
	if _, ok := plugin["castiron_bmc_user"]; ok {
		t.Errorf("plugin_data keeps the BMC user: %v", plugin["castiron_bmc_user"])
	}
	var traits struct {
		Traits []string `json:"traits"`
	}
	if err := c.Do(ctx, "GET", "/v1/nodes/"+n.UUID+"/traits", nil, &traits); err != nil || !slices.Contains(traits.Traits, "CUSTOM_ZERO_TOUCH") {
		t.Errorf("traits %v (err %v): want CUSTOM_ZERO_TOUCH from the rule", traits.Traits, err)
	}
	history, err := c.History(ctx, n.UUID)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	ruled := false
	for _, h := range history {
		t.Logf("history %s %s %s", h.CreatedAt, h.EventType, h.Event)
		switch {
		case strings.HasPrefix(h.Event, "Discovered"):
			enrolled = h.Time()
		case strings.Contains(h.Event, "site BMC settings"):
			ruled = true
		case strings.HasSuffix(h.Event, "-> manageable"):
			managed = h.Time()
		}
	}
	if enrolled.IsZero() || !ruled || managed.IsZero() {
		t.Errorf("history does not show the discovery (%v), the rule (%v) and manageable (%v)", enrolled, ruled, managed)
	}
	return enrolled, managed
}

// checkBMCUser: the user the agent made in-band works out of band, and
// its password is in no log line of castiron or the agent.
func checkBMCUser(ctx context.Context, t *testing.T, c *Castiron, l *Lab, user string) {
	t.Helper()
	// ipmi_sim writes its users file on a later tick of its own, not when
	// the agent sets the user: on a fast run the node is manageable (the
	// BMC already knows the user) before the file is there.
	var password string
	_, err := waitFor(ctx, 30*time.Second, func() bool {
		var err error
		password, err = l.BMCUserPassword(user)
		return err == nil && len(password) >= 8
	})
	if err != nil {
		_, lastErr := l.BMCUserPassword(user)
		t.Fatalf("BMC user %s in ipmi_sim's persisted users: password %d characters, %v (%v)", user, len(password), err, lastErr)
	}
	if out, err := l.IpmitoolAs(ctx, user, password, "chassis", "power", "status"); err != nil {
		t.Errorf("ipmitool as %s: %v: %s", user, err, out)
	}
	for _, log := range []string{c.LogPath, l.ConsoleLog()} {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), password) {
			t.Errorf("%s shows the BMC user's password", log)
		}
	}
}

// bootAgain deletes the node's ports (its MAC is unknown to DHCP again)
// and powers the machine on: castiron discovers it, recognises it by the
// BMC address its agent reads, refuses it, and no second node appears.
func bootAgain(ctx context.Context, t *testing.T, c *Castiron, l *Lab, nodeUUID string) {
	t.Helper()
	ports, err := c.Ports(ctx, nodeUUID)
	if err != nil {
		t.Fatalf("ports: %v", err)
	}
	for _, p := range ports {
		if err := c.Do(ctx, "DELETE", "/v1/ports/"+p.UUID, nil, nil); err != nil {
			t.Fatalf("delete port %s: %v", p.Address, err)
		}
	}
	before, _ := os.ReadFile(c.LogPath)
	start := pressPowerOn(ctx, t, l)
	want := "the machine is node " + nodeUUID + " (by bmc_address " + BMCInbandAddress + ")"
	refusedAt, err := waitFor(ctx, 240*time.Second, func() bool {
		b, _ := os.ReadFile(c.LogPath)
		return len(b) > len(before) && strings.Contains(string(b[len(before):]), want)
	})
	if err != nil {
		t.Fatalf("booted again: castiron never logged %q: %v", want, err)
	}
	nodes, err := c.NodeUUIDs(ctx)
	if err != nil || len(nodes) != 1 || nodes[0] != nodeUUID {
		t.Errorf("booted again: nodes %v (err %v), want only %s", nodes, err, nodeUUID)
	}
	n, err := c.GetNode(ctx, nodeUUID)
	if err != nil || n.ProvisionState != "manageable" {
		t.Errorf("booted again: node %v (err %v), want still manageable", n, err)
	}
	if _, err := l.Ipmitool(ctx, "chassis", "power", "off"); err != nil {
		t.Errorf("ipmitool chassis power off: %v", err)
	}
	t.Logf("E2E-TIMING discovery_again recognised=%.2fs", refusedAt.Sub(start).Seconds())
}

// NodeUUIDs lists every node (GET /v1/nodes), oldest first.
func (c *Client) NodeUUIDs(ctx context.Context) ([]string, error) {
	var out struct {
		Nodes []struct {
			UUID string `json:"uuid"`
		} `json:"nodes"`
	}
	if err := c.Do(ctx, "GET", "/v1/nodes?"+url.Values{"fields": {"uuid"}, "sort_key": {"created_at"}}.Encode(), nil, &out); err != nil {
		return nil, err
	}
	var uuids []string
	for _, n := range out.Nodes {
		uuids = append(uuids, n.UUID)
	}
	return uuids, nil
}

// waitFor polls cond every 250 ms and returns when it first held.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}
