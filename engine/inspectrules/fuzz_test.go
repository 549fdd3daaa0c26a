package inspectrules

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// refuse is the fuzz tests' HTTP transport: api-call never leaves the
// process.
type refuse struct{}

func (refuse) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("refused") }

// FuzzRuleDocument feeds arbitrary rule documents through the shape check,
// validation and evaluation against a real inventory: nothing may panic,
// hang, or fail in a way other than a validation or rule error.
func FuzzRuleDocument(f *testing.F) {
	seeds := []string{
		`{"actions": [{"op": "set-attribute", "args": {"path": "/driver_info/ipmi_address", "value": "{inventory[bmc_address]}"}}]}`,
		`{"conditions": [{"op": "!contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}}], "actions": [{"op": "fail", "args": {"msg": "x"}}]}`,
		`{"conditions": [{"op": "eq", "args": {"values": ["{item}", "{inventory[cpu][count]}"]}, "loop": [1, "4", {"a": 1}], "multiple": "all"}], "actions": [{"op": "log", "args": {"msg": "{node.uuid}"}}]}`,
		`{"actions": [{"op": "set-attribute", "args": {"path": "{item[path]}", "value": "{item[value]}"}, "loop": [{"path": "/extra/a", "value": "{inventory[interfaces][0]}"}]}]}`,
		`{"actions": [{"op": "extend-plugin-data", "args": ["a.b", 1, true]}, {"op": "unset-plugin-data", "args": {"path": "a.b"}}]}`,
		`{"actions": [{"op": "set-port-attribute", "args": {"port_id": "52:54:00:12:34:56", "path": "extra.x", "value": "{plugin_data}"}}]}`,
		`{"actions": [{"op": "api-call", "args": {"url": "http://192.0.2.1/{node.name}", "retries": 0}}]}`,
		`{"conditions": [{"op": "in-net", "args": {"address": "{inventory[bmc_address]}", "subnet": "{inventory[interfaces][0][ipv4_address]}/8"}}], "actions": [{"op": "set-capability", "args": {"name": "x", "value": "{inventory[cpu]:>20}"}}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeJSON(data)
		if err != nil {
			return
		}
		doc, ok := v.(map[string]any)
		if !ok || CheckShape(doc) != nil {
			return
		}
		r, err := FromDocument(doc, false)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("validation returned %T: %v", err, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = Apply(ctx, []*Rule{r}, testTarget(t), Options{HTTP: &http.Client{Transport: refuse{}}})
		var re *Error
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("Apply returned %T: %v", err, err)
		}
	})
}

// FuzzInterpolation: any text through str.format against real data either
// formats or fails with a Python exception.
func FuzzInterpolation(f *testing.F) {
	for _, s := range []string{"{inventory[cpu][count]:>{inventory[cpu][count]}}", "{node.driver_info[ipmi_address]!r:^30}",
		"{{x}} {inventory[interfaces][0][mac_address]}", "{plugin_data[password]}", "{inventory[memory][total]:,.2f}",
		"{inventory[cpu][count]:#010x}", "{0[}", "{inventory[disks][0]:s}", "{:}"} {
		f.Add(s)
	}
	tg := testTarget(f)
	node := &object{class: "Node", fields: tg.Node}
	kw := map[string]any{"node": node, "inventory": &masked{v: tg.Inventory, on: true}, "plugin_data": &masked{v: tg.PluginData, on: true}}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := pyFormat(s, kw)
		var pe *pyError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("format(%q): %T %v", s, err, err)
		}
	})
}
