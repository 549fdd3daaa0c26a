package inspectrules

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name, doc, err string
	}{
		{"ok", `{"actions": [{"op": "log", "args": {"msg": "x"}}]}`, ""},
		{"phase", `{"phase": "early", "actions": [{"op": "log", "args": {"msg": "x"}}]}`, "Invalid phase: early. Valid phases are: main"},
		{"priority negative", `{"priority": -1, "actions": [{"op": "log", "args": {"msg": "x"}}]}`, "Priority cannot be negative for user-defined rules."},
		{"priority high", `{"priority": 10000, "actions": [{"op": "log", "args": {"msg": "x"}}]}`, "Priority must be between 0 and 9999 for user-defined rules."},
		{"two errors", `{"phase": "x", "priority": 10000, "actions": [{"op": "log", "args": {"msg": "x"}}]}`,
			"Multiple validation errors occurred: Invalid phase: x. Valid phases are: main; Priority must be between 0 and 9999 for user-defined rules."},
		{"missing arg", `{"actions": [{"op": "set-attribute", "args": {"path": "/x"}}]}`, "missing required argument(s): value"},
		{"unexpected arg", `{"actions": [{"op": "log", "args": {"msg": "x", "colour": "red", "a": 1}}]}`, "unexpected argument(s): a, colour"},
		{"both", `{"conditions": [{"op": "eq", "args": {"value": 1}}], "actions": [{"op": "log", "args": {"msg": "x"}}]}`,
			"missing required argument(s): values; unexpected argument(s): value"},
		{"list args short", `{"actions": [{"op": "set-attribute", "args": ["/x"]}]}`, "Not enough arguments provided. Missing: value"},
		{"list args ok", `{"actions": [{"op": "set-plugin-data", "args": ["a", 1]}]}`, ""},
		{"args error wins over phase", `{"phase": "x", "actions": [{"op": "log", "args": {}}]}`, "missing required argument(s): msg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromDocument(mustJSON(t, c.doc).(map[string]any), false)
			if c.err == "" && err != nil || c.err != "" && (err == nil || err.Error() != c.err) {
				t.Errorf("err = %v, want %q", err, c.err)
			}
		})
	}
	// Built-in rules may go outside the user range.
	if _, err := FromDocument(mustJSON(t, `{"priority": -5, "actions": [{"op": "log", "args": {"msg": "x"}}]}`).(map[string]any), true); err != nil {
		t.Errorf("built-in negative priority: %v", err)
	}
}

// Actions that take the plugin data get the placeholder Ironic stores.
func TestValidateStoresPluginDataPlaceholder(t *testing.T) {
	r, err := FromDocument(mustJSON(t, `{"actions": [{"op": "set-plugin-data", "args": {"path": "a", "value": 1}}]}`).(map[string]any), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := pyRepr(r.Actions[0]["args"]); got != "{'path': 'a', 'plugin_data': {}, 'value': 1}" {
		t.Errorf("args = %s", got)
	}
}

func TestCheckShape(t *testing.T) {
	cases := map[string]string{
		`{}`:                                     "'actions' is a required property",
		`{"actions": []}`:                        "[] should be non-empty",
		`{"actions": [{"op": "x", "args": {}}]}`: "'x' is not one of ['fail', 'log'",
		`{"actions": [{"op": "log"}]}`:           "'args' is a required property",
		`{"actions": [{"op": "log", "args": "x"}]}`:                                                              "'x' is not of type 'array', 'object'",
		`{"conditions": [{"op": "!!eq", "args": {}}], "actions": [{"op": "log", "args": {}}]}`:                   "'!!eq' is not one of",
		`{"conditions": [{"op": "eq", "args": {}, "multiple": "most"}], "actions": [{"op": "log", "args": {}}]}`: "'most' is not one of ['any', 'all', 'first', 'last']",
		`{"actions": [{"op": "log", "args": {}}], "scope": "x"}`:                                                 "Additional properties are not allowed ('scope' was unexpected)",
		`{"actions": [{"op": "log", "args": {}}], "priority": 1.5}`:                                              "1.5 is not of type 'integer'",
		`{"actions": [{"op": "log", "args": {}}], "sensitive": "yes"}`:                                           "'yes' is not of type 'boolean', 'null'",
	}
	for doc, want := range cases {
		err := CheckShape(mustJSON(t, doc).(map[string]any))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
}

// The full example of Ironic's inspection rules documentation, loaded as
// a built-in rules file and applied to a discovered Dell server.
const docExample = `
- uuid: "rule-dell-bmc-setup"
  description: "Configure iDRAC driver for auto-discovered Dell servers"
  priority: 100
  sensitive: true
  phase: main
  conditions:
    - op: contains
      args:
        value: "{inventory[system_vendor][manufacturer]}"
        regex: "(?i)dell"
    - op: is-true
      args:
        value: "{plugin_data[auto_discovered]}"
  actions:
    - op: set-attribute
      args:
        path: "/driver"
        value: "idrac"
    - op: set-attribute
      args:
        path: "/driver_info/redfish_address"
        value: "https://{inventory[bmc_address]}"
    - op: set-attribute
      args:
        path: "/driver_info/redfish_username"
        value: "root"
    - op: log
      args:
        msg: "Configured iDRAC driver for Dell server {node.name}"
        level: info
- description: no uuid
  actions:
    - op: add-trait
      args: {name: CUSTOM_DISCOVERED}
- description: no uuid either
  priority: -1
  actions:
    - op: set-capability
      args: {name: boot_mode, value: "{inventory[cpu][architecture]}"}
`

func TestLoadBuiltInDocExample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(docExample), 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := LoadBuiltIn(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 3 || rules[0].UUID != "rule-dell-bmc-setup" || rules[1].UUID != "00000000-0000-0000-0000-000000000000" ||
		rules[2].UUID != "00000000-0000-0000-0000-000000000001" || !rules[0].Sensitive || rules[2].Priority != -1 {
		t.Fatalf("rules = %+v %+v %+v", rules[0], rules[1], rules[2])
	}
	tg := testTarget(t)
	applied, err := Apply(context.Background(), rules, tg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 3 {
		t.Errorf("applied %d rules", len(applied))
	}
	di := tg.Node["driver_info"].(map[string]any)
	if tg.Node["driver"] != "idrac" || di["redfish_address"] != "https://10.205.9.2" || di["redfish_username"] != "root" {
		t.Errorf("node = %v", tg.Node)
	}
	if pyRepr(tg.Node["traits"]) != "['CUSTOM_A', 'CUSTOM_DISCOVERED']" || get(tg.Node, "properties", "capabilities") != "boot_mode:x86_64" {
		t.Errorf("node = %v", tg.Node)
	}

	for doc, want := range map[string]string{
		"a: 1":                               "should contain a list of rules",
		"- {actions: []}":                    "[] should be non-empty",
		"- [1]":                              "is not a mapping",
		"- {actions: [{op: log, args: {}}]}": "missing required argument(s): msg",
		"{":                                  "yaml",
	} {
		os.WriteFile(path, []byte(doc), 0o644)
		if _, err := LoadBuiltIn(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", doc, err, want)
		}
	}
	if _, err := LoadBuiltIn(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}
