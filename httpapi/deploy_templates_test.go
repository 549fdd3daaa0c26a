package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func step(iface, name string, priority any, args map[string]any) map[string]any {
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{"interface": iface, "step": name, "args": args, "priority": priority}
}

func TestDeployTemplateVersions(t *testing.T) {
	h := newAPI(t)
	const msg = "The API version does not allow deploy templates"
	h.belowVersion(t, "/v1/deploy_templates", "/v1/deploy_templates/CUSTOM_X", msg, "1.54")
	h.expect(200, "GET", "/v1/deploy_templates", "1.55", nil)
	h.expect(405, "PUT", "/v1/deploy_templates", latest, nil)
}

func TestDeployTemplates(t *testing.T) {
	h := newAPI(t)
	body := map[string]any{
		"name": "CUSTOM_HYPERTHREADING_ON",
		"steps": []any{
			step("bios", "apply_configuration", "10", map[string]any{"settings": []any{map[string]any{"name": "LogicalProc", "value": "Enabled"}}, "admin_password": "x"}),
			step("raid", "apply_configuration", 5, nil),
		},
		"extra":       map[string]any{"k": "v"},
		"description": "not kept: Ironic's object has no such field",
	}
	r := h.expect(201, "POST", "/v1/deploy_templates", latest, body)
	tpl := r.json(t)
	tid := tpl["uuid"].(string)
	if r.header.Get("Location") != h.srv.URL+"/v1/deploy_templates/"+tid {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	steps := tpl["steps"].([]any)
	s0 := steps[0].(map[string]any)
	if len(tpl) != 7 || tpl["name"] != body["name"] || s0["priority"] != float64(10) || s0["args"].(map[string]any)["admin_password"] != "******" ||
		tpl["description"] != nil || tpl["updated_at"] != nil {
		t.Fatalf("created: %s", r.body)
	}
	if compact := strings.ReplaceAll(string(r.body), " ", ""); !strings.Contains(compact, `"name":"CUSTOM_HYPERTHREADING_ON","extra":{"k":"v"},"links":[`) ||
		!strings.Contains(compact, `{"interface":"raid","step":"apply_configuration","args":{},"priority":5}]}`) {
		t.Fatalf("key order: %s", r.body)
	}
	std := h.expect(201, "POST", "/v1/deploy_templates", latest, map[string]any{
		"name": "HW_CPU_X86_AVX2", "uuid": strings.ToUpper(uuid.NewString()), "steps": []any{step("deploy", "s", 0, nil)},
	}).json(t)

	h.namedFaults(t, "create ", "POST", "/v1/deploy_templates", []namedFault{
		{"not a trait", map[string]any{"name": "foo", "steps": []any{step("deploy", "s", 1, nil)}}, 400,
			"Schema error for template: 'foo' is not valid under any of the given schemas. Possible root cause: 'foo' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{"no steps", map[string]any{"name": "CUSTOM_X", "steps": []any{}}, 400, "Schema error for template: [] should be non-empty"},
		{"bad interface", map[string]any{"name": "CUSTOM_X", "steps": []any{step("network", "s", 1, nil)}}, 400,
			"Schema error for template: 'network' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid']"},
		{"negative priority", map[string]any{"name": "CUSTOM_X", "steps": []any{step("deploy", "s", -1, nil)}}, 400,
			"Schema error for template: -1 is less than the minimum of 0"},
		{"duplicate steps", map[string]any{"name": "CUSTOM_X", "steps": []any{step("deploy", "s", 1, nil), step("deploy", "s", 2, nil)}}, 400,
			"Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: deploy, step: s."},
		{"bad uuid", map[string]any{"name": "CUSTOM_X", "uuid": "x", "steps": []any{step("deploy", "s", 1, nil)}}, 400, "Expected UUID for uuid: x"},
		{"duplicate name", map[string]any{"name": "CUSTOM_HYPERTHREADING_ON", "steps": []any{step("deploy", "s", 1, nil)}}, 409,
			"A deploy template with name CUSTOM_HYPERTHREADING_ON already exists."},
		{"duplicate uuid", map[string]any{"name": "CUSTOM_X", "uuid": tid, "steps": []any{step("deploy", "s", 1, nil)}}, 409,
			"A deploy template with UUID " + tid + " already exists."},
	})

	// Show by UUID or name.
	for _, ident := range []string{tid, "CUSTOM_HYPERTHREADING_ON"} {
		if got := h.expect(200, "GET", "/v1/deploy_templates/"+ident, latest, nil).json(t); got["uuid"] != tid || len(got["steps"].([]any)) != 2 {
			t.Fatalf("show %s: %v", ident, got)
		}
	}
	r = h.expect(200, "GET", "/v1/deploy_templates/"+tid+"?fields=steps,name", latest, nil)
	if got := r.json(t); len(got) != 3 || got["links"] == nil || !strings.HasPrefix(string(r.body), `{"name": `) {
		t.Fatalf("fields: %s", r.body)
	}
	volFault(t, h.expect(400, "GET", "/v1/deploy_templates/"+tid+"?fields=description", latest, nil), `Field(s) "description" are not valid`)
	volFault(t, h.expect(400, "GET", "/v1/deploy_templates/"+tid+"?fields=bogus", latest, nil),
		"Schema error: 'bogus' is not one of ['created_at', 'description', 'extra', 'links', 'name', 'steps', 'updated_at', 'uuid']")
	volFault(t, h.expect(404, "GET", "/v1/deploy_templates/CUSTOM_NONE", latest, nil), "Deploy template CUSTOM_NONE could not be found.")
	volFault(t, h.expect(400, "GET", "/v1/deploy_templates/a%20b", latest, nil), "Expected UUID or name for template_ident: a b")

	// List.
	list := h.expect(200, "GET", "/v1/deploy_templates", latest, nil).json(t)["deploy_templates"].([]any)
	if len(list) != 2 || len(list[0].(map[string]any)) != 3 || list[0].(map[string]any)["name"] != "CUSTOM_HYPERTHREADING_ON" {
		t.Fatalf("list: %v", list)
	}
	if d := h.expect(200, "GET", "/v1/deploy_templates?detail=True", latest, nil).json(t)["deploy_templates"].([]any); len(d[1].(map[string]any)) != 7 {
		t.Fatalf("detail: %v", d)
	}
	page := h.expect(200, "GET", "/v1/deploy_templates?limit=1&sort_key=name&detail=false", latest, nil).json(t)
	wantNext := fmt.Sprintf("%s/v1/deploy_templates?sort_key=name&sort_dir=asc&detail=False&fields=uuid,name&limit=1&marker=%s", h.srv.URL, tid)
	if l := page["deploy_templates"].([]any); len(l) != 1 || l[0].(map[string]any)["uuid"] != tid || page["next"] != wantNext {
		t.Fatalf("page: %v", page)
	}
	if l := h.expect(200, "GET", "/v1/deploy_templates?marker="+tid, latest, nil).json(t)["deploy_templates"].([]any); len(l) != 1 || l[0].(map[string]any)["uuid"] != std["uuid"] {
		t.Fatalf("after marker: %v", l)
	}
	listFaults(t, h, "/v1/deploy_templates", []listFault{
		{"?fields=uuid&detail=true", 400, "Can not specify ?detail=True and fields in the same request."},
		{"?fields=description", 400, `Field(s) "description" are not valid`},
		{"?sort_key=steps", 400, "The sort_key value steps is an invalid field for sorting"},
		{"?sort_key=bogus", 400, `The sort_key value "bogus" is an invalid field for sorting`},
		{"?limit=-1", 400, "Limit must be positive"},
		{"?marker=a%20b", 400, "Expected name for marker: a b"},
		{"?marker=CUSTOM_HYPERTHREADING_ON", 404, "Deploy template CUSTOM_HYPERTHREADING_ON could not be found."},
	})

	// Patch.
	up := h.expect(200, "PATCH", "/v1/deploy_templates/CUSTOM_HYPERTHREADING_ON", latest, []any{
		map[string]any{"op": "replace", "path": "/name", "value": "CUSTOM_HT_ON"},
		map[string]any{"op": "add", "path": "/steps/-", "value": step("power", "reboot", "0", nil)},
		map[string]any{"op": "add", "path": "/steps/0/ignored", "value": "pruned as Ironic does"},
		map[string]any{"op": "remove", "path": "/extra/k"},
	}).json(t)
	upSteps := up["steps"].([]any)
	if up["name"] != "CUSTOM_HT_ON" || len(upSteps) != 3 || upSteps[2].(map[string]any)["priority"] != float64(0) ||
		upSteps[0].(map[string]any)["ignored"] != nil || len(up["extra"].(map[string]any)) != 0 || up["updated_at"] == nil {
		t.Fatalf("patched: %v", up)
	}
	h.namedFaults(t, "patch ", "PATCH", "/v1/deploy_templates/"+tid, []namedFault{
		{"read-only", []any{map[string]any{"op": "replace", "path": "/uuid", "value": "x"}}, 400,
			"Cannot patch /uuid. Only the following can be updated: extra, name, steps, description"},
		{"description", []any{map[string]any{"op": "add", "path": "/description", "value": "x"}}, 400,
			"Adding a new attribute (/description) to the root of the resource is not allowed"},
		{"remove name", []any{map[string]any{"op": "remove", "path": "/name"}}, 400, "Schema error for patch: 'name' is a required property"},
		{"bad step", []any{map[string]any{"op": "replace", "path": "/steps/0/interface", "value": "x"}}, 400,
			"Schema error for patch: 'x' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid']"},
		{"empty steps", []any{map[string]any{"op": "replace", "path": "/steps", "value": []any{}}}, 400, "Schema error for patch: [] should be non-empty"},
		{"duplicate steps", []any{map[string]any{"op": "add", "path": "/steps/-", "value": step("power", "reboot", 1, nil)}}, 400,
			"Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: power, step: reboot."},
		{"missing member", []any{map[string]any{"op": "replace", "path": "/extra/nope", "value": 1}}, 400,
			"Couldn't apply patch '{'op': 'replace', 'path': '/extra/nope', 'value': 1}'. Reason: can't replace a non-existent object 'nope'"},
		{"duplicate name", []any{map[string]any{"op": "replace", "path": "/name", "value": "HW_CPU_X86_AVX2"}}, 409,
			"A deploy template with name HW_CPU_X86_AVX2 already exists."},
		{"bad op", []any{map[string]any{"op": "copy", "path": "/name"}}, 400, "Schema error for patch: 'copy' is not one of ['add', 'replace', 'remove']"},
	})
	volFault(t, h.expect(404, "PATCH", "/v1/deploy_templates/CUSTOM_HYPERTHREADING_ON", latest, []any{map[string]any{"op": "remove", "path": "/extra"}}),
		"Deploy template CUSTOM_HYPERTHREADING_ON could not be found.")

	// Delete.
	h.expect(204, "DELETE", "/v1/deploy_templates/CUSTOM_HT_ON", latest, nil)
	volFault(t, h.expect(404, "DELETE", "/v1/deploy_templates/"+tid, latest, nil), "Deploy template "+tid+" could not be found.")
	volFault(t, h.expect(400, "DELETE", "/v1/deploy_templates/a%20b", latest, nil), "Expected UUID or name for template_ident: a b")
	h.expect(204, "DELETE", "/v1/deploy_templates/"+std["uuid"].(string), latest, nil)
	if l := h.expect(200, "GET", "/v1/deploy_templates", latest, nil).json(t)["deploy_templates"].([]any); len(l) != 0 {
		t.Fatalf("after delete: %v", l)
	}
}
