package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// ceiling raises a test server's version ceiling, so that resources
// above MaxMinor (inspection rules, 1.96) can be reached.
func ceiling(minor int) func(*Options) {
	return func(o *Options) { o.MaxMinor = minor }
}

const v96 = "1.96"

func TestInspectionRuleVersions(t *testing.T) {
	h := newAPI(t)
	// At every version the server accepts below 1.96: Ironic's 404/405.
	const msg = "The API version does not allow inspection rules"
	id := uuid.NewString()
	h.belowVersion(t, "/v1/inspection_rules", "/v1/inspection_rules/"+id, msg, "", "1.1", "1.89", "1.95")
	if _, has := h.expect(200, "GET", "/v1", "1.95", nil).json(t)["inspection_rules"]; has {
		t.Error("GET /v1 links inspection_rules below 1.96")
	}
	if _, has := h.expect(200, "GET", "/v1", latest, nil).json(t)["inspection_rules"]; !has {
		t.Error("GET /v1 does not link inspection_rules at the maximum")
	}
	// Reachable at the default ceiling (1.115), the whole collection's
	// DELETE included.
	h.expect(200, "GET", "/v1/inspection_rules", latest, nil)
	h.expect(204, "DELETE", "/v1/inspection_rules", latest, nil)
	h = newAPI(t, ceiling(96))
	h.expect(200, "GET", "/v1/inspection_rules", v96, nil)
	h.expect(404, "GET", "/v1/inspection_rules", "1.95", nil)
	if _, has := h.expect(200, "GET", "/v1", v96, nil).json(t)["inspection_rules"]; !has {
		t.Error("GET /v1 at 1.96 has no inspection_rules link")
	}
}

// The API reference's request sample, then list, show, patch, delete.
func TestInspectionRulesCRUD(t *testing.T) {
	h := newAPI(t, ceiling(96))
	sample := map[string]any{
		"description": "BMC credentials", "phase": "main", "priority": 100, "sensitive": true,
		"conditions": []any{
			map[string]any{"op": "contains", "args": map[string]any{"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}},
			map[string]any{"op": "is-true", "args": map[string]any{"value": "{node.auto_discovered}"}},
		},
		"actions": []any{
			map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/driver", "value": "idrac"}},
			map[string]any{"op": "set-attribute", "args": map[string]any{"path": "driver_info.redfish_address", "value": "https://{inventory[bmc_address]}"}},
		},
	}
	r := h.expect(201, "POST", "/v1/inspection_rules", v96, sample)
	created := r.json(t)
	id := created["uuid"].(string)
	if r.header.Get("Location") != h.srv.URL+"/v1/inspection_rules/"+id {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	want := map[string]any{"description": "BMC credentials", "phase": "main", "priority": float64(100), "sensitive": true,
		"actions": nil, "conditions": nil, "updated_at": nil}
	for k, v := range want {
		if !reflect.DeepEqual(created[k], v) {
			t.Errorf("created %s = %v, want %v", k, created[k], v)
		}
	}
	links := created["links"].([]any)
	if links[0].(map[string]any)["href"] != h.srv.URL+"/v1/inspection/"+id || links[1].(map[string]any)["href"] != h.srv.URL+"/inspection/"+id {
		t.Errorf("links %v", links)
	}
	if len(created) != 10 {
		t.Errorf("created has %d keys: %v", len(created), created)
	}

	plain := map[string]any{"uuid": uuid.NewString(), "description": "Set properties on discovered data", "priority": 50,
		"conditions": []any{map[string]any{"op": "eq", "args": []any{"{inventory.system.product_name}", "{item}"},
			"loop": []any{"a", "b"}, "multiple": "any"}},
		"actions": []any{map[string]any{"op": "set-plugin-data", "args": map[string]any{"path": "x", "value": 1}},
			map[string]any{"op": "log", "args": []any{"CPU model updated via rule."}, "loop": []any{}}}}
	got := h.expect(201, "POST", "/v1/inspection_rules", v96, plain).json(t)
	if got["uuid"] != plain["uuid"] || got["sensitive"] != false || got["phase"] != "main" {
		t.Errorf("plain: %v", got)
	}
	// Conditions come back as sent (loop and multiple); set-plugin-data
	// carries Ironic's plugin_data placeholder; an empty loop is left out.
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if js(got["conditions"]) != js(plain["conditions"]) {
		t.Errorf("conditions %s", js(got["conditions"]))
	}
	if js(got["actions"]) != `[{"args":{"path":"x","plugin_data":{},"value":1},"op":"set-plugin-data"},{"args":["CPU model updated via rule."],"op":"log"}]` {
		t.Errorf("actions %s", js(got["actions"]))
	}

	list := h.expect(200, "GET", "/v1/inspection_rules", v96, nil).json(t)["inspection_rules"].([]any)
	if len(list) != 2 {
		t.Fatalf("list %v", list)
	}
	first := list[0].(map[string]any)
	if len(first) != 5 || first["uuid"] != id || first["priority"] != float64(100) || first["links"] == nil {
		t.Errorf("list item %v: want uuid, priority, phase, description, links", first)
	}
	detail := h.expect(200, "GET", "/v1/inspection_rules?detail=true", v96, nil).json(t)["inspection_rules"].([]any)
	if d := detail[0].(map[string]any); d["actions"] != nil || d["sensitive"] != true || detail[1].(map[string]any)["actions"] == nil {
		t.Errorf("detail %v", detail)
	}
	page := h.expect(200, "GET", "/v1/inspection_rules?limit=1&sort_key=priority&sort_dir=asc&fields=uuid,sensitive", v96, nil).json(t)
	items := page["inspection_rules"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["uuid"] != plain["uuid"] || len(items[0].(map[string]any)) != 3 {
		t.Errorf("page %v", page)
	}
	if next, _ := page["next"].(string); next != h.srv.URL+"/v1/inspection?sort_key=priority&sort_dir=asc&fields=uuid%2Csensitive&limit=1&marker="+plain["uuid"].(string) {
		t.Errorf("next %q", next)
	}

	show := h.expect(200, "GET", "/v1/inspection_rules/"+plain["uuid"].(string)+"?fields=uuid,actions", v96, nil).json(t)
	if len(show) != 3 || show["actions"] == nil {
		t.Errorf("show with fields: %v", show)
	}

	patch := []any{
		map[string]any{"op": "replace", "path": "/description", "value": "Updated"},
		map[string]any{"op": "replace", "path": "/priority", "value": 75},
		map[string]any{"op": "add", "path": "/actions/-", "value": map[string]any{"op": "add-trait", "args": map[string]any{"name": "CUSTOM_X"}}},
	}
	up := h.expect(200, "PATCH", "/v1/inspection_rules/"+plain["uuid"].(string), v96, patch).json(t)
	if up["description"] != "Updated" || up["priority"] != float64(75) || len(up["actions"].([]any)) != 3 || up["updated_at"] == nil {
		t.Errorf("patched %v", up)
	}
	// A rule can become sensitive, never stop being it.
	h.expect(200, "PATCH", "/v1/inspection_rules/"+plain["uuid"].(string), v96, []any{map[string]any{"op": "replace", "path": "/sensitive", "value": true}})
	r = h.expect(400, "PATCH", "/v1/inspection_rules/"+plain["uuid"].(string), v96, []any{map[string]any{"op": "replace", "path": "/sensitive", "value": false}})
	if fs := r.faultstring(t); !strings.Contains(fs, "Reason: Inspection rules cannot have the sensitive flag unset.") {
		t.Errorf("unset sensitive: %s", fs)
	}

	h.expect(204, "DELETE", "/v1/inspection_rules/"+id, v96, nil)
	r = h.expect(404, "GET", "/v1/inspection_rules/"+id, v96, nil)
	if fs := r.faultstring(t); fs != "Rule "+id+" could not be found." {
		t.Errorf("404: %s", fs)
	}
	h.expect(404, "DELETE", "/v1/inspection_rules/"+id, v96, nil)
}

// Bad rules answer 400 with Ironic's messages.
func TestInspectionRuleErrors(t *testing.T) {
	h := newAPI(t, ceiling(96))
	act := map[string]any{"op": "log", "args": map[string]any{"msg": "x"}}
	with := func(kv ...any) map[string]any {
		m := map[string]any{"actions": []any{act}}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name string
		body any
		want string
	}{
		{"no actions", map[string]any{}, "Schema error: 'actions' is a required property"},
		{"empty actions", with("actions", []any{}), "Schema error: [] should be non-empty"},
		{"unknown action", with("actions", []any{map[string]any{"op": "reboot", "args": map[string]any{}}}), "Schema error: 'reboot' is not one of ['fail', 'log', 'set-attribute'"},
		{"unknown condition", with("conditions", []any{map[string]any{"op": "ne", "args": map[string]any{}}}), "Schema error: 'ne' is not one of ['eq', 'lt', 'gt'"},
		{"no args", with("actions", []any{map[string]any{"op": "log"}}), "Schema error: 'args' is a required property"},
		{"bad multiple", with("conditions", []any{map[string]any{"op": "eq", "args": map[string]any{"values": []any{}}, "multiple": "most"}}), "Schema error: 'most' is not one of ['any', 'all', 'first', 'last']"},
		{"negative priority", with("priority", -1), "Schema error: -1 is less than the minimum of 0"},
		{"float priority", with("priority", 5000.5), "Schema error: 5000.5 is not of type 'integer'"},
		{"priority too high", with("priority", 10000), "Priority must be between 0 and 9999 for user-defined rules."},
		{"phase", with("phase", "late"), "Invalid phase: late. Valid phases are: main"},
		{"long description", with("description", strings.Repeat("x", 256)), "is too long"},
		{"unknown field", with("scope", "x"), "Schema error: Additional properties are not allowed ('scope' was unexpected)"},
		{"missing argument", with("actions", []any{map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/x"}}}), "missing required argument(s): value"},
		{"unexpected argument", with("conditions", []any{map[string]any{"op": "is-true", "args": map[string]any{"value": 1, "strict": true}}}), "unexpected argument(s): strict"},
		{"not an object", []any{}, "Schema error for inspection_rule: [] is not of type 'object'"},
		{"bad uuid", with("uuid", "not-a-uuid"), "Expected a UUID but received not-a-uuid."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.expect(400, "POST", "/v1/inspection_rules", v96, c.body)
			if fs := r.faultstring(t); !strings.Contains(fs, c.want) {
				t.Errorf("message %q, want %q", fs, c.want)
			}
		})
	}
	id := h.expect(201, "POST", "/v1/inspection_rules", v96, with()).json(t)["uuid"].(string)
	h.expect(409, "POST", "/v1/inspection_rules", v96, with("uuid", id))
	for path, want := range map[string]string{
		"/v1/inspection_rules/nope":                        "Schema error: 'nope' is not a 'uuid'",
		"/v1/inspection_rules?sort_key=actions":            "Schema error: 'actions' should not be valid under",
		"/v1/inspection_rules?detail=true&fields=uuid":     "Can not specify ?detail=True and fields in the same request.",
		"/v1/inspection_rules?fields=bogus":                `Field(s) "bogus" are not valid`,
		"/v1/inspection_rules?sort_key=bogus":              "bogus",
		"/v1/inspection_rules?limit=0":                     "Limit must be positive",
		"/v1/inspection_rules?unknown=1":                   "Schema error: Additional properties are not allowed ('unknown' was unexpected)",
		"/v1/inspection_rules/" + id + "?fields=nope":      `Field(s) "nope" are not valid`,
		"/v1/inspection_rules?marker=" + uuid.Nil.String(): "",
	} {
		status := 400
		if strings.Contains(path, "marker") {
			status = 404
		}
		r := h.expect(status, "GET", path, v96, nil)
		if fs := r.faultstring(t); want != "" && !strings.Contains(fs, want) {
			t.Errorf("GET %s: %q, want %q", path, fs, want)
		}
	}
	for _, tc := range []struct {
		patch any
		want  string
	}{
		{[]any{map[string]any{"op": "move", "from": "/a", "path": "/b"}}, "Schema error for patch"},
		{[]any{map[string]any{"op": "add", "path": "/scope", "value": "x"}}, "Cannot patch /scope. Only the following can be updated: actions, conditions, description, phase, priority, sensitive"},
		{[]any{map[string]any{"op": "replace", "path": "/priority", "value": -3}}, "Schema error for patch: -3 is less than the minimum of 0"},
		{[]any{map[string]any{"op": "remove", "path": "/actions"}}, "Schema error for patch: 'actions' is a required property"},
		{[]any{map[string]any{"op": "replace", "path": "/actions/0/args", "value": map[string]any{}}}, "missing required argument(s): msg"},
	} {
		r := h.expect(400, "PATCH", "/v1/inspection_rules/"+id, v96, tc.patch)
		if fs := r.faultstring(t); !strings.Contains(fs, tc.want) {
			t.Errorf("PATCH %v: %q, want %q", tc.patch, fs, tc.want)
		}
	}
}
