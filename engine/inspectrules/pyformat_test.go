package inspectrules

import (
	"testing"
)

func mustJSON(t testing.TB, s string) any {
	t.Helper()
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// Expected outputs are what CPython 3.11 prints for the same
// "...".format(**ctx).
func TestPyFormat(t *testing.T) {
	inv := mustJSON(t, `{"cpu": {"count": 4, "architecture": "x86_64", "freq": 2.5},
		"interfaces": [{"name": "eth0", "mac_address": "52:54:00:12:34:56"}],
		"bmc_address": "10.0.0.5", "nothing": null, "on": true, "big": 12345678901234567890,
		"hostname": "node-1", "secrets": {"password": "x", "user": "u"}}`)
	node := &object{class: "Node", fields: map[string]any{"uuid": "u-1", "name": "n1", "driver": "ipmi",
		"driver_info": map[string]any{"ipmi_address": "10.0.0.5"}}}
	ctx := map[string]any{"inventory": &masked{v: inv, on: true}, "node": node}
	cases := []struct {
		in, want, errType string
	}{
		{"{inventory[bmc_address]}", "10.0.0.5", ""},
		{"https://{inventory[bmc_address]}/redfish", "https://10.0.0.5/redfish", ""},
		{"{inventory[cpu][count]}", "4", ""},
		{"{inventory[cpu][freq]}", "2.5", ""},
		{"{inventory[big]}", "12345678901234567890", ""},
		{"{inventory[nothing]}", "None", ""},
		{"{inventory[on]}", "True", ""},
		{"{inventory[interfaces][0][mac_address]}", "52:54:00:12:34:56", ""},
		{"{inventory[interfaces][0]}", "{'mac_address': '52:54:00:12:34:56', 'name': 'eth0'}", ""},
		{"{inventory[secrets]}", "{'password': '***', 'user': 'u'}", ""},
		{"{inventory[secrets][password]}", "***", ""},
		{"{inventory[hostname][0]}", "n", ""},
		{"{node.driver}", "ipmi", ""},
		{"{node.driver_info[ipmi_address]}", "10.0.0.5", ""},
		{"{node.name!r}", "'n1'", ""},
		{"{inventory[cpu][count]:03d}", "004", ""},
		{"{inventory[cpu][count]:>4}", "   4", ""},
		{"{inventory[hostname]:*^10}", "**node-1**", ""},
		{"{inventory[cpu][freq]:.3f}", "2.500", ""},
		{"{inventory[cpu][count]:x}", "4", ""},
		{"{inventory[cpu][count]:#b}", "0b100", ""},
		{"{{literal}} {node.name}", "{literal} n1", ""},
		{"no fields", "no fields", ""},
		{"{inventory[missing]}", "", "KeyError"},
		{"{inventory[interfaces][3]}", "", "IndexError"},
		{"{inventory[interfaces][name]}", "", "TypeError"},
		{"{inventory.bmc_address}", "", "AttributeError"},
		{"{node[driver]}", "", "TypeError"},
		{"{node.nope}", "", "AttributeError"},
		{"{unknown}", "", "KeyError"},
		{"{}", "", "IndexError"},
		{"{0}", "", "IndexError"},
		{"{inventory[cpu]", "", "ValueError"},
		{"}", "", "ValueError"},
		{"{inventory[cpu]x}", "", "ValueError"},
		{"{inventory[cpu]:d}", "", "TypeError"},
		{"{inventory[hostname]:d}", "", "ValueError"},
		{"{node.name!x}", "", "ValueError"},
		{"{inventory[hostname]:{inventory[cpu][count]}}", "node-1", ""},
	}
	for _, c := range cases {
		got, err := pyFormat(c.in, ctx)
		if c.errType != "" {
			pe, ok := err.(*pyError)
			if !ok || pe.Type != c.errType {
				t.Errorf("format(%q) = %q, %v; want %s", c.in, got, err, c.errType)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("format(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestPyRepr(t *testing.T) {
	cases := map[string]string{
		`1e16`:                        "1e+16",
		`1.5e-05`:                     "1.5e-05",
		`0.1`:                         "0.1",
		`100.0`:                       "100.0",
		`"it's"`:                      `"it's"`,
		`"a\"b'c"`:                    `'a"b\'c'`,
		`[1, "a", null, true, {}]`:    "[1, 'a', None, True, {}]",
		`{"b": [1.0], "a": {"c": 2}}`: "{'a': {'c': 2}, 'b': [1.0]}",
	}
	for in, want := range cases {
		if got := pyRepr(mustJSON(t, in)); got != want {
			t.Errorf("repr(%s) = %s, want %s", in, got, want)
		}
	}
}
