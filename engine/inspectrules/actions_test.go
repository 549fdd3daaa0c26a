package inspectrules

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// act runs a rule made of the given actions (JSON list items) on the test
// data and returns the target afterwards.
func act(t *testing.T, actions string, opts Options) (*Target, []Applied, error) {
	t.Helper()
	doc := mustJSON(t, `{"uuid": "r1", "actions": [`+actions+`]}`).(map[string]any)
	if err := CheckShape(doc); err != nil {
		t.Fatalf("shape: %v", err)
	}
	r, err := FromDocument(doc, false)
	if err != nil {
		t.Fatalf("rule: %v", err)
	}
	tg := testTarget(t)
	applied, err := Apply(context.Background(), []*Rule{r}, tg, opts)
	return tg, applied, err
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// TestActions: every action with its documented meaning.
func TestActions(t *testing.T) {
	cases := []struct {
		name, actions string
		check         func(t *testing.T, tg *Target)
		errHas        string
	}{
		{"fail", `{"op": "fail", "args": {"msg": "no {inventory[cpu][count]} cores"}}`, nil,
			"Failed to inspect hardware. Reason: no {inventory[cpu][count]} cores"},
		{"log", `{"op": "log", "args": {"msg": "node {node.name}", "level": "WARNING"}}`, nil, ""},
		{"log bad level", `{"op": "log", "args": {"msg": "x", "level": "loud"}}`, nil, "Invalid log level: loud."},
		{"set-attribute interpolated", `{"op": "set-attribute", "args": {"path": "/driver_info/redfish_address", "value": "https://{inventory[bmc_address]}"}}`,
			func(t *testing.T, tg *Target) {
				if got := get(tg.Node, "driver_info", "redfish_address"); got != "https://10.205.9.2" {
					t.Errorf("redfish_address = %v", got)
				}
				if get(tg.Node, "driver_info", "ipmi_address") != "10.205.9.2" {
					t.Error("other driver_info keys lost")
				}
			}, ""},
		{"set-attribute dot path", `{"op": "set-attribute", "args": {"path": "driver_info.ipmi_username", "value": "admin"}}`,
			func(t *testing.T, tg *Target) {
				if get(tg.Node, "driver_info", "ipmi_username") != "admin" {
					t.Errorf("driver_info = %v", tg.Node["driver_info"])
				}
			}, ""},
		{"set-attribute top level", `{"op": "set-attribute", "args": {"path": "/driver", "value": "redfish"}}`,
			func(t *testing.T, tg *Target) {
				if tg.Node["driver"] != "redfish" {
					t.Errorf("driver = %v", tg.Node["driver"])
				}
			}, ""},
		{"set-attribute new nested dicts", `{"op": "set-attribute", "args": {"path": "/extra/a/b", "value": 1}}`,
			func(t *testing.T, tg *Target) {
				if pyRepr(tg.Node["extra"]) != "{'a': {'b': 1}}" {
					t.Errorf("extra = %s", pyRepr(tg.Node["extra"]))
				}
			}, ""},
		{"set-attribute dict value interpolated", `{"op": "set-attribute", "args": {"path": "/properties/hw", "value": {"arch": "{inventory[cpu][architecture]}", "bmc": ["{inventory[bmc_address]}"]}}}`,
			func(t *testing.T, tg *Target) {
				if got := pyRepr(get(tg.Node, "properties", "hw")); got != "{'arch': 'x86_64', 'bmc': ['10.205.9.2']}" {
					t.Errorf("properties.hw = %s", got)
				}
			}, ""},
		{"set-attribute string field from number", `{"op": "set-attribute", "args": {"path": "/resource_class", "value": 5}}`,
			func(t *testing.T, tg *Target) {
				if tg.Node["resource_class"] != "5" {
					t.Errorf("resource_class = %#v", tg.Node["resource_class"])
				}
			}, ""},
		{"set-attribute read-only", `{"op": "set-attribute", "args": {"path": "/provision_state", "value": "active"}}`, nil,
			"Inspection rule action execution failed. Reason: Failed to set attribute /provision_state with value active:"},
		{"set-attribute unknown", `{"op": "set-attribute", "args": {"path": "/nope", "value": 1}}`, nil, "'Node' object has no attribute 'nope'"},
		{"set-attribute below a string", `{"op": "set-attribute", "args": {"path": "/driver/x", "value": 1}}`, nil, "'str' object has no attribute 'setdefault'"},
		{"set-attribute dict field from string", `{"op": "set-attribute", "args": {"path": "/extra", "value": "x"}}`, nil, "A dict is required in field extra"},
		{"extend-attribute new list", `{"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "a"}},
			{"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "a"}},
			{"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "a", "unique": true}}`,
			func(t *testing.T, tg *Target) {
				if got := pyRepr(get(tg.Node, "extra", "tags")); got != "['a', 'a']" {
					t.Errorf("extra.tags = %s", got)
				}
			}, ""},
		{"extend-attribute non-list", `{"op": "extend-attribute", "args": {"path": "/driver_info/ipmi_address", "value": "x"}}`, nil,
			"Failed to extend attribute /driver_info/ipmi_address: Inspection rule action execution failed. Reason: Cannot extend non-list attribute"},
		{"del-attribute key", `{"op": "del-attribute", "args": {"path": "/driver_info/ipmi_address"}}`,
			func(t *testing.T, tg *Target) {
				if _, has := tg.Node["driver_info"].(map[string]any)["ipmi_address"]; has {
					t.Error("ipmi_address still set")
				}
			}, ""},
		{"del-attribute missing key", `{"op": "del-attribute", "args": {"path": "/driver_info/nope/deeper"}}`, nil, ""},
		{"del-attribute field", `{"op": "del-attribute", "args": {"path": "/properties"}}`,
			func(t *testing.T, tg *Target) {
				if pyRepr(tg.Node["properties"]) != "{}" {
					t.Errorf("properties = %v", tg.Node["properties"])
				}
			}, ""},
		{"del-attribute read-only", `{"op": "del-attribute", "args": {"path": "/uuid"}}`, nil, "Failed to delete attribute at /uuid"},
		{"set-capability", `{"op": "set-capability", "args": {"name": "boot_mode", "value": "bios"}},
			{"op": "set-capability", "args": {"name": "cpu_vt", "value": "true"}},
			{"op": "set-capability", "args": {"name": "boot_mode", "value": "uefi"}}`,
			func(t *testing.T, tg *Target) {
				if got := get(tg.Node, "properties", "capabilities"); got != "cpu_vt:true,boot_mode:uefi" {
					t.Errorf("capabilities = %v", got)
				}
			}, ""},
		{"set-capability non-string value", `{"op": "set-capability", "args": {"name": "x", "value": 1}}`, nil,
			"Failed to set capability x: sequence item 1: expected str instance, int found"},
		{"unset-capability", `{"op": "set-capability", "args": {"name": "a", "value": "1"}},
			{"op": "set-capability", "args": {"name": "b", "value": "2"}},
			{"op": "unset-capability", "args": {"name": "a"}}`,
			func(t *testing.T, tg *Target) {
				if got := get(tg.Node, "properties", "capabilities"); got != "b:2" {
					t.Errorf("capabilities = %v", got)
				}
			}, ""},
		{"add-trait and remove-trait", `{"op": "add-trait", "args": {"name": "CUSTOM_B"}},
			{"op": "add-trait", "args": {"name": "CUSTOM_B"}},
			{"op": "remove-trait", "args": {"name": "CUSTOM_A"}},
			{"op": "remove-trait", "args": {"name": "CUSTOM_NOT_THERE"}}`,
			func(t *testing.T, tg *Target) {
				if got := pyRepr(tg.Node["traits"]); got != "['CUSTOM_B']" {
					t.Errorf("traits = %s", got)
				}
			}, ""},
		{"set-plugin-data", `{"op": "set-plugin-data", "args": {"path": "bmc.address", "value": "{inventory[bmc_address]}"}}`,
			func(t *testing.T, tg *Target) {
				if got := get(tg.PluginData, "bmc", "address"); got != "10.205.9.2" {
					t.Errorf("plugin_data.bmc.address = %v", got)
				}
			}, ""},
		{"extend-plugin-data", `{"op": "extend-plugin-data", "args": {"path": "seen", "value": 1}},
			{"op": "extend-plugin-data", "args": {"path": "seen", "value": 1, "unique": true}},
			{"op": "extend-plugin-data", "args": {"path": "seen", "value": 2, "unique": true}}`,
			func(t *testing.T, tg *Target) {
				if got := pyRepr(tg.PluginData["seen"]); got != "[1, 2]" {
					t.Errorf("plugin_data.seen = %s", got)
				}
			}, ""},
		{"extend-plugin-data non-list", `{"op": "extend-plugin-data", "args": {"path": "logs", "value": 1}}`, nil,
			"Failed to extend plugin data at logs: 'str' object has no attribute 'append'"},
		{"unset-plugin-data", `{"op": "set-plugin-data", "args": {"path": "a.b", "value": 1}},
			{"op": "unset-plugin-data", "args": {"path": "a.b"}},
			{"op": "unset-plugin-data", "args": {"path": "logs"}},
			{"op": "unset-plugin-data", "args": {"path": "not.there"}}`,
			func(t *testing.T, tg *Target) {
				if _, has := tg.PluginData["a"]; has {
					t.Errorf("emptied parent kept: %v", tg.PluginData)
				}
				if _, has := tg.PluginData["logs"]; has {
					t.Errorf("logs kept: %v", tg.PluginData)
				}
			}, ""},
		{"set-port-attribute by uuid", `{"op": "set-port-attribute", "args": {"port_id": "6d85703a-565d-469a-96ce-30b6de53079d", "path": "/physical_network", "value": "provisioning"}}`,
			func(t *testing.T, tg *Target) {
				if tg.Ports[0]["physical_network"] != "provisioning" {
					t.Errorf("port = %v", tg.Ports[0])
				}
			}, ""},
		{"set-port-attribute by MAC", `{"op": "set-port-attribute", "args": {"port_id": "{inventory[interfaces][0][mac_address]}", "path": "/local_link_connection/switch_id", "value": "aa:bb:cc:dd:ee:ff"}, "loop": [1]}`,
			func(t *testing.T, tg *Target) {
				if get(tg.Ports[0], "local_link_connection", "switch_id") != "aa:bb:cc:dd:ee:ff" {
					t.Errorf("port = %v", tg.Ports[0])
				}
			}, ""},
		{"set-port-attribute unknown port", `{"op": "set-port-attribute", "args": {"port_id": "nope", "path": "/pxe_enabled", "value": false}}`, nil,
			"Port nope could not be found."},
		{"extend-port-attribute", `{"op": "extend-port-attribute", "args": {"port_id": "52:54:00:12:34:56", "path": "/extra/vlans", "value": 10}}`,
			func(t *testing.T, tg *Target) {
				if pyRepr(get(tg.Ports[0], "extra", "vlans")) != "[10]" {
					t.Errorf("port = %v", tg.Ports[0])
				}
			}, ""},
		{"del-port-attribute", `{"op": "del-port-attribute", "args": {"port_id": "52:54:00:12:34:56", "path": "/pxe_enabled"}}`,
			func(t *testing.T, tg *Target) {
				if tg.Ports[0]["pxe_enabled"] != false {
					t.Errorf("port = %v", tg.Ports[0])
				}
			}, ""},
		// The documentation's loop example: several attributes in one action.
		{"loop set-attribute", `{"op": "set-attribute", "args": {"path": "{item[path]}", "value": "{item[value]}"},
			"loop": [{"path": "/driver_info/ipmi_username", "value": "admin"},
			         {"path": "/driver_info/ipmi_password", "value": "password"},
			         {"path": "/driver_info/ipmi_address", "value": "{inventory[bmc_address]}"}]}`,
			func(t *testing.T, tg *Target) {
				di := tg.Node["driver_info"].(map[string]any)
				if di["ipmi_username"] != "admin" || di["ipmi_password"] != "password" || di["ipmi_address"] != "10.205.9.2" {
					t.Errorf("driver_info = %v", di)
				}
			}, ""},
		{"path not interpolated outside a loop", `{"op": "set-attribute", "args": {"path": "/extra/{node.name}", "value": 1}}`,
			func(t *testing.T, tg *Target) {
				if _, has := tg.Node["extra"].(map[string]any)["{node.name}"]; !has {
					t.Errorf("extra = %v", tg.Node["extra"])
				}
			}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, _, err := act(t, c.actions, Options{})
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if c.check != nil {
				c.check(t, tg)
			}
		})
	}
}

func TestLogAction(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, _, err := act(t, `{"op": "log", "args": {"msg": "Configured node {node.name} at {inventory[bmc_address]}", "level": "warning"}}`, Options{Log: log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `level=WARN msg="Configured node node-1 at 10.205.9.2"`) {
		t.Errorf("log output: %s", buf.String())
	}
}

func TestFailKeepsEarlierChanges(t *testing.T) {
	tg, applied, err := act(t, `{"op": "set-attribute", "args": {"path": "/extra/x", "value": 1}},
		{"op": "fail", "args": {"msg": "stop"}},
		{"op": "set-attribute", "args": {"path": "/extra/y", "value": 1}}`, Options{})
	e, ok := err.(*Error)
	if !ok || !e.Failed || e.Msg != "Failed to inspect hardware. Reason: stop" {
		t.Fatalf("err = %#v", err)
	}
	if get(tg.Node, "extra", "x") == nil || get(tg.Node, "extra", "y") != nil {
		t.Errorf("extra = %v: want x kept, y never set", tg.Node["extra"])
	}
	if len(applied) != 1 || len(applied[0].Actions) != 1 {
		t.Errorf("applied = %+v", applied)
	}
}

func TestPriorityAndConditions(t *testing.T) {
	mk := func(doc string) *Rule {
		r, err := FromDocument(mustJSON(t, doc).(map[string]any), false)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rules := []*Rule{
		mk(`{"uuid": "low", "priority": 10, "actions": [{"op": "extend-plugin-data", "args": {"path": "order", "value": "low"}}]}`),
		mk(`{"uuid": "skipped", "priority": 50, "conditions": [{"op": "eq", "args": {"values": [1, 2]}}],
			"actions": [{"op": "extend-plugin-data", "args": {"path": "order", "value": "skipped"}}]}`),
		mk(`{"uuid": "high", "priority": 100, "actions": [{"op": "extend-plugin-data", "args": {"path": "order", "value": "high"}}]}`),
		mk(`{"uuid": "low2", "priority": 10, "actions": [{"op": "extend-plugin-data", "args": {"path": "order", "value": "low2"}}]}`),
	}
	tg := testTarget(t)
	applied, err := Apply(context.Background(), rules, tg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pyRepr(tg.PluginData["order"]); got != "['high', 'low', 'low2']" {
		t.Errorf("order = %s", got)
	}
	if len(applied) != 3 || applied[0].Rule.UUID != "high" {
		t.Errorf("applied = %+v", applied)
	}
}

func TestAPICall(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch r.URL.Path {
		case "/flaky":
			if n < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			return
		case "/hook":
			if r.Header.Get("X-Node") != "node-1" || r.URL.Query().Get("bmc") != "10.205.9.2" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	cases := []struct {
		name, args string
		calls      int32
		errHas     string
	}{
		{"ok", `{"url": "` + srv.URL + `/hook?bmc={inventory[bmc_address]}", "headers": {"X-Node": "node-1"}}`, 1, ""},
		{"retried", `{"url": "` + srv.URL + `/flaky", "backoff_factor": 0.01}`, 3, ""},
		{"4xx fails", `{"url": "` + srv.URL + `/missing"}`, 1, "Request to " + srv.URL + "/missing failed: 404 Not Found"},
		{"bad timeout", `{"url": "` + srv.URL + `/hook", "timeout": 0}`, 0, "Invalid parameter: timeout must be greater than zero"},
		{"bad retries", `{"url": "` + srv.URL + `/hook", "retries": "x"}`, 0, "Invalid parameter: invalid literal for int() with base 10: 'x'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls.Store(0)
			_, _, err := act(t, `{"op": "api-call", "args": `+c.args+`}`, Options{})
			if c.errHas == "" && err != nil || c.errHas != "" && (err == nil || !strings.Contains(err.Error(), c.errHas)) {
				t.Fatalf("err = %v, want %q", err, c.errHas)
			}
			if calls.Load() != c.calls {
				t.Errorf("%d calls, want %d", calls.Load(), c.calls)
			}
		})
	}
}
