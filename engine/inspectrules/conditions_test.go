package inspectrules

import (
	"context"
	"strings"
	"testing"
)

// testInventory is an inventory as castiron's agent posts it.
const testInventory = `{
	"cpu": {"count": 4, "architecture": "x86_64"},
	"memory": {"total": 8589934592, "physical_mb": 8192},
	"interfaces": [
		{"name": "eth0", "mac_address": "52:54:00:12:34:56", "ipv4_address": "10.205.0.150"},
		{"name": "eth1", "mac_address": "52:54:00:12:34:57", "ipv4_address": null}
	],
	"disks": [{"name": "/dev/vda", "size": 5368709120}],
	"system_vendor": {"manufacturer": "Dell Inc.", "product_name": "PowerEdge R640", "serial_number": "ABC123"},
	"bmc_address": "10.205.9.2", "bmc_v6address": "::/0", "bmc_mac": "02:00:00:00:00:09",
	"bmc_password": "hunter2", "hostname": ""
}`

func testTarget(t testing.TB) *Target {
	t.Helper()
	return &Target{
		Node: mustJSON(t, `{"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "name": "node-1", "driver": "ipmi",
			"driver_info": {"ipmi_address": "10.205.9.2"}, "properties": {"cpus": 4}, "extra": {},
			"instance_info": {}, "network_data": {}, "traits": ["CUSTOM_A"], "provision_state": "inspecting",
			"maintenance": false, "resource_class": null, "description": null}`).(map[string]any),
		Ports: []map[string]any{
			mustJSON(t, `{"uuid": "6d85703a-565d-469a-96ce-30b6de53079d", "address": "52:54:00:12:34:56",
				"pxe_enabled": true, "extra": {}, "local_link_connection": {}, "physical_network": null, "name": null}`).(map[string]any),
		},
		Inventory:  mustJSON(t, testInventory).(map[string]any),
		PluginData: mustJSON(t, `{"auto_discovered": true, "password": "plugin_secret", "logs": "..."}`).(map[string]any),
	}
}

// cond evaluates one condition document (as JSON) against the test data:
// the rule's single action records whether it ran.
func cond(t *testing.T, condition string, opts Options) (bool, error) {
	t.Helper()
	doc := mustJSON(t, `{"uuid": "r1", "conditions": [`+condition+`],
		"actions": [{"op": "set-plugin-data", "args": {"path": "ran", "value": true}}]}`).(map[string]any)
	if err := CheckShape(doc); err != nil {
		t.Fatalf("shape of %s: %v", condition, err)
	}
	r, err := FromDocument(doc, false)
	if err != nil {
		t.Fatalf("rule with %s: %v", condition, err)
	}
	tg := testTarget(t)
	_, err = Apply(context.Background(), []*Rule{r}, tg, opts)
	return tg.PluginData["ran"] == true, err
}

// TestConditions: every operator, with its documented meaning
// (doc/source/admin/inspection/rules.rst), inversion and loops.
func TestConditions(t *testing.T) {
	cases := []struct {
		name, cond string
		want       bool
		errHas     string
	}{
		// eq / lt / gt: all neighbours, Python comparisons
		{"eq literal", `{"op": "eq", "args": {"values": [1, 1, 1.0, true]}}`, true, ""},
		{"eq differs", `{"op": "eq", "args": {"values": [1, 2]}}`, false, ""},
		{"eq single", `{"op": "eq", "args": {"values": [1]}}`, true, ""},
		{"eq interpolated string vs int", `{"op": "eq", "args": {"values": ["{inventory[cpu][count]}", 4]}}`, false, ""},
		{"eq force_strings", `{"op": "eq", "args": {"values": ["{inventory[cpu][count]}", 4], "force_strings": true}}`, true, ""},
		{"eq node field", `{"op": "eq", "args": {"values": ["{node.driver}", "ipmi"]}}`, true, ""},
		{"eq lists", `{"op": "eq", "args": {"values": [[1, "a"], [1, "a"]]}}`, true, ""},
		{"eq dicts", `{"op": "eq", "args": {"values": [{"a": 1}, {"a": 1.0}]}}`, true, ""},
		{"!eq", `{"op": "!eq", "args": {"values": ["{node.driver}", "redfish"]}}`, true, ""},
		{"lt ascending", `{"op": "lt", "args": {"values": [1, 2.5, 3]}}`, true, ""},
		{"lt equal", `{"op": "lt", "args": {"values": [1, 1]}}`, false, ""},
		{"lt strings", `{"op": "lt", "args": {"values": ["a", "b"]}}`, true, ""},
		{"lt mixed types", `{"op": "lt", "args": {"values": ["a", 1]}}`, false, "'<' not supported between instances of 'str' and 'int'"},
		{"lt short-circuits", `{"op": "lt", "args": {"values": [2, 1, "x"]}}`, false, ""},
		{"gt descending", `{"op": "gt", "args": {"values": [3, 2, 1]}}`, true, ""},
		{"gt mixed", `{"op": "gt", "args": {"values": [null, 1]}}`, false, "'>' not supported between instances of 'NoneType' and 'int'"},
		{"gt force_strings", `{"op": "gt", "args": {"values": [10, 9], "force_strings": true}}`, false, ""},
		{"eq not a list", `{"op": "eq", "args": {"values": "abc"}}`, false,
			"Inspection rule condition check failed. Reason: Failed to check condition: 'eq' on values: abc: Expected list for 'values', got: str"},
		{"eq list args (deprecated)", `{"op": "eq", "args": [[1, 1]]}`, true, ""},
		// is-empty: None, "", [], {} and missing fields
		{"is-empty hostname", `{"op": "is-empty", "args": {"value": "{inventory[hostname]}"}}`, true, ""},
		{"is-empty missing", `{"op": "is-empty", "args": {"value": "{inventory[nope]}"}}`, true, ""},
		{"is-empty list", `{"op": "is-empty", "args": {"value": []}}`, true, ""},
		{"is-empty dict", `{"op": "is-empty", "args": {"value": {}}}`, true, ""},
		{"is-empty null", `{"op": "is-empty", "args": {"value": null}}`, true, ""},
		{"is-empty full", `{"op": "is-empty", "args": {"value": "{inventory[bmc_address]}"}}`, false, ""},
		{"!is-empty", `{"op": "!is-empty", "args": {"value": "{inventory[bmc_address]}"}}`, true, ""},
		// in-net
		{"in-net yes", `{"op": "in-net", "args": {"address": "{inventory[bmc_address]}", "subnet": "10.205.9.0/24"}}`, true, ""},
		{"in-net no", `{"op": "in-net", "args": {"address": "{inventory[bmc_address]}", "subnet": "192.168.0.0/16"}}`, false, ""},
		{"in-net host bits", `{"op": "in-net", "args": {"address": "10.205.9.2", "subnet": "10.205.9.77/24"}}`, true, ""},
		{"in-net v6", `{"op": "in-net", "args": {"address": "fd00::5", "subnet": "fd00::/64"}}`, true, ""},
		{"in-net v4 in v6", `{"op": "in-net", "args": {"address": "10.0.0.1", "subnet": "fd00::/64"}}`, false, ""},
		{"in-net bad subnet", `{"op": "in-net", "args": {"address": "10.0.0.1", "subnet": "nope"}}`, false, "invalid value: invalid IPNetwork nope"},
		{"in-net bad address", `{"op": "in-net", "args": {"address": "{inventory[hostname]}", "subnet": "10.0.0.0/8"}}`, false,
			"Failed to apply rule r1 to node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: failed to detect a valid IP address from ''"},
		// matches (whole value) / contains (anywhere)
		{"matches whole", `{"op": "matches", "args": {"value": "{inventory[system_vendor][product_name]}", "regex": "PowerEdge R6\\d+"}}`, true, ""},
		{"matches prefix only", `{"op": "matches", "args": {"value": "{inventory[system_vendor][product_name]}", "regex": "PowerEdge"}}`, false, ""},
		{"matches with $", `{"op": "matches", "args": {"value": "abc", "regex": "a.c$"}}`, true, ""},
		{"matches trailing newline", `{"op": "matches", "args": {"value": "abc\n", "regex": "abc"}}`, true, ""},
		{"matches number", `{"op": "matches", "args": {"value": 42, "regex": "4\\d"}}`, true, ""},
		{"contains case-insensitive", `{"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}}`, true, ""},
		{"contains no", `{"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "HPE"}}`, false, ""},
		{"!contains", `{"op": "!contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "HPE"}}`, true, ""},
		{"contains bad regex", `{"op": "contains", "args": {"value": "x", "regex": "[unclosed"}}`, false, "invalid regular expression"},
		// one-of
		{"one-of yes", `{"op": "one-of", "args": {"value": "{inventory[cpu][architecture]}", "values": ["aarch64", "x86_64"]}}`, true, ""},
		{"one-of no", `{"op": "one-of", "args": {"value": "ppc64le", "values": ["aarch64", "x86_64"]}}`, false, ""},
		{"one-of numbers", `{"op": "one-of", "args": {"value": 1, "values": [1.0, 2]}}`, true, ""},
		{"one-of default empty", `{"op": "one-of", "args": {"value": "a"}}`, false, ""},
		{"one-of null", `{"op": "one-of", "args": {"value": null, "values": ["a", "b"]}}`, false, ""},
		// is-none / is-true / is-false
		{"is-none literal", `{"op": "is-none", "args": {"value": null}}`, true, ""},
		{"is-none interpolated", `{"op": "is-none", "args": {"value": "{inventory[interfaces][1][ipv4_address]}"}}`, false, ""},
		{"is-true bool", `{"op": "is-true", "args": {"value": true}}`, true, ""},
		{"is-true yes", `{"op": "is-true", "args": {"value": "YES"}}`, true, ""},
		{"is-true plugin data", `{"op": "is-true", "args": {"value": "{plugin_data[auto_discovered]}"}}`, true, ""},
		{"is-true number", `{"op": "is-true", "args": {"value": 2}}`, true, ""},
		{"is-true zero", `{"op": "is-true", "args": {"value": 0}}`, false, ""},
		{"is-true other string", `{"op": "is-true", "args": {"value": "4"}}`, false, ""},
		{"is-true list", `{"op": "is-true", "args": {"value": [1]}}`, false, ""},
		{"is-false no", `{"op": "is-false", "args": {"value": "no"}}`, true, ""},
		{"is-false none", `{"op": "is-false", "args": {"value": null}}`, true, ""},
		{"is-false zero", `{"op": "is-false", "args": {"value": 0.0}}`, true, ""},
		{"is-false yes", `{"op": "is-false", "args": {"value": "yes"}}`, false, ""},
		{"!is-false", `{"op": "!is-false", "args": {"value": false}}`, false, ""},
		// loops
		{"loop any", `{"op": "eq", "args": {"values": ["{inventory[system_vendor][product_name]}", "{item}"]},
			"loop": ["HPE ProLiant DL380 Gen10", "PowerEdge R640", "Cisco UCS"], "multiple": "any"}`, true, ""},
		{"loop all", `{"op": "eq", "args": {"values": ["{inventory[system_vendor][product_name]}", "{item}"]},
			"loop": ["PowerEdge R640", "Cisco UCS"], "multiple": "all"}`, false, ""},
		{"loop first true", `{"op": "eq", "args": {"values": ["a", "{item}"]}, "loop": ["b", "a", "c"], "multiple": "first"}`, true, ""},
		{"loop first none", `{"op": "eq", "args": {"values": ["z", "{item}"]}, "loop": ["b", "a"], "multiple": "first"}`, false, ""},
		{"loop last", `{"op": "eq", "args": {"values": ["a", "{item}"]}, "loop": ["a", "b"], "multiple": "last"}`, false, ""},
		{"loop force_strings", `{"op": "eq", "args": {"values": ["{inventory[cpu][count]}", "{item}"]}, "loop": [4]}`, true, ""},
		{"loop dict item", `{"op": "in-net", "args": {"address": "{item[addr]}", "subnet": "{item[net]}"}, "loop": {"addr": "10.0.0.1", "net": "10.0.0.0/8"}}`, true, ""},
		{"loop double interpolation", `{"op": "in-net", "args": {"address": "{item}", "subnet": "10.205.9.0/24"}, "loop": ["{inventory[bmc_address]}"]}`, true, ""},
		// Strings inside a list argument are formatted once only, also in a loop.
		{"loop list single interpolation", `{"op": "eq", "args": {"values": ["{item}", "10.205.9.2"]}, "loop": ["{inventory[bmc_address]}"]}`, false, ""},
		{"loop inverted", `{"op": "!eq", "args": {"values": ["a", "{item}"]}, "loop": ["a", "b"], "multiple": "all"}`, false, ""},
		// secrets are masked in what rules read (mask_secrets=always)
		{"masked secret", `{"op": "eq", "args": {"values": ["{inventory[bmc_password]}", "***"]}}`, true, ""},
		{"masked plugin secret", `{"op": "eq", "args": {"values": ["{plugin_data[password]}", "***"]}}`, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := cond(t, c.cond, Options{})
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != c.want {
				t.Errorf("condition held = %v, want %v", got, c.want)
			}
		})
	}
}

func TestMaskModes(t *testing.T) {
	c := `{"op": "eq", "args": {"values": ["{inventory[bmc_password]}", "hunter2"]}}`
	// sensitive: only rules marked sensitive see the secrets.
	for mode, want := range map[string]bool{MaskAlways: false, MaskNever: true, MaskSensitive: false} {
		got, err := cond(t, c, Options{MaskSecrets: mode})
		if err != nil || got != want {
			t.Errorf("mask %s: held=%v err=%v, want %v", mode, got, err, want)
		}
	}
	for mode, want := range map[string]bool{MaskAlways: false, MaskNever: true, MaskSensitive: true} {
		r, err := FromDocument(mustJSON(t, `{"sensitive": true, "conditions": [`+c+`],
			"actions": [{"op": "set-plugin-data", "args": {"path": "ran", "value": true}}]}`).(map[string]any), false)
		if err != nil {
			t.Fatal(err)
		}
		tg := testTarget(t)
		if _, err := Apply(context.Background(), []*Rule{r}, tg, Options{MaskSecrets: mode}); err != nil {
			t.Fatal(err)
		}
		if got := tg.PluginData["ran"] == true; got != want {
			t.Errorf("sensitive rule, mask %s: held=%v, want %v", mode, got, want)
		}
	}
}
