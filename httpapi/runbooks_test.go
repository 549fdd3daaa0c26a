package httpapi

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/ramdisk/protocol"
)

const (
	v92  = "1.92"
	v111 = "1.111"
	v112 = "1.112"
)

// rbSteps are the tempest plugin's EXAMPLE_STEPS.
func rbSteps() []any {
	return []any{map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{}, "order": 1}}
}

func TestRunbookVersions(t *testing.T) {
	const msg = "The API version does not allow runbooks"
	id := uuid.NewString()
	// A server whose ceiling is below 1.92, and an older version on a
	// server that has runbooks: Ironic's 404 to GET, 405 to the rest.
	h := newAPI(t, ceiling(91))
	h.belowVersion(t, "/v1/runbooks", "/v1/runbooks/"+id, msg, "1.1", "1.91", latest)
	h = newAPI(t, ceiling(112))
	h.belowVersion(t, "/v1/runbooks", "/v1/runbooks/CUSTOM_X", msg, "1.1", "1.91")
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		status := 405
		if m == "GET" {
			status = 404
		}
		r := h.expect(status, m, "/v1/runbooks/"+id+"/traits", "1.91", map[string]any{"traits": []any{}})
		if d := volPecanDesc(t, r); d != msg {
			t.Errorf("%s traits at 1.91: %v", m, d)
		}
	}
	if _, has := h.expect(200, "GET", "/v1", "1.91", nil).json(t)["runbooks"]; has {
		t.Error("GET /v1 links runbooks below 1.92")
	}
	if _, has := h.expect(200, "GET", "/v1", v92, nil).json(t)["runbooks"]; !has {
		t.Error("GET /v1 at 1.92 has no runbooks link")
	}
	h.expect(200, "GET", "/v1/runbooks", v92, nil)

	// The traits sub-resource and the 1.112 fields need 1.112.
	rb := h.expect(201, "POST", "/v1/runbooks", v92, map[string]any{"name": "CUSTOM_V", "steps": rbSteps()}).json(t)
	for _, k := range []string{"description", "traits"} {
		if _, has := rb[k]; has {
			t.Errorf("1.92 view shows %s", k)
		}
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/traits"}, {"PUT", "/traits"}, {"PUT", "/traits/CUSTOM_A"}, {"DELETE", "/traits"}, {"DELETE", "/traits/CUSTOM_A"},
	} {
		r := h.expect(404, c.method, "/v1/runbooks/CUSTOM_V"+c.path, v111, nil)
		if d := volPecanDesc(t, r); d != "The API version does not allow runbook traits" {
			t.Errorf("%s %s at 1.111: %v", c.method, c.path, d)
		}
	}
	wantFault(t, h.do("GET", "/v1/runbooks/CUSTOM_V?fields=traits", v111, nil), 400, `Field(s) "traits" are not valid`)
	wantFault(t, h.do("GET", "/v1/runbooks/CUSTOM_V?fields=description", v111, nil), 400, `Field(s) "description" are not valid`)
	got := h.expect(200, "GET", "/v1/runbooks/CUSTOM_V", v112, nil).json(t)
	if got["description"] != nil || !reflect.DeepEqual(got["traits"], []any{}) {
		t.Errorf("1.112 view: %v", got)
	}
	// Ironic's schemas: description and traits are no properties of the
	// 1.92 body (400, not 406); traits are never written by POST.
	wantFault(t, h.do("POST", "/v1/runbooks", v111, map[string]any{"name": "CUSTOM_D", "steps": rbSteps(), "description": "d"}), 400,
		"Schema error for runbook: Additional properties are not allowed ('description' was unexpected)")
	wantFault(t, h.do("POST", "/v1/runbooks", v112, map[string]any{"name": "CUSTOM_D", "steps": rbSteps(), "traits": []any{"CUSTOM_A"}}), 400,
		"Schema error for runbook: Additional properties are not allowed ('traits' was unexpected)")
	// A name that is no trait: only from 1.112.
	wantFault(t, h.do("POST", "/v1/runbooks", v111, map[string]any{"name": "my-runbook", "steps": rbSteps()}), 400,
		"Schema error for runbook: 'my-runbook' is not valid under any of the given schemas. Possible root cause: 'my-runbook' does not match '^CUSTOM_[A-Z0-9_]+$'")
	h.expect(201, "POST", "/v1/runbooks", v112, map[string]any{"name": "my-runbook.v1_~", "steps": rbSteps(), "description": "d"})
	// A 1.112 name stays patchable at 1.92 (Ironic patches against the
	// 1.112 schema at every version).
	h.expect(200, "PATCH", "/v1/runbooks/my-runbook.v1_~", v92, []any{op("add", "/extra/a", 1)})
	wantFault(t, h.do("PATCH", "/v1/runbooks/CUSTOM_V", v111, []any{op("replace", "/description", "x")}), 400,
		"Cannot patch /description. Only the following can be updated: disable_ramdisk, extra, name, owner, public, steps")
	wantFault(t, h.do("PATCH", "/v1/runbooks/CUSTOM_V", v112, []any{op("add", "/traits", []any{"CUSTOM_A"})}), 400,
		"Cannot patch /traits. Only the following can be updated: disable_ramdisk, extra, name, owner, public, steps, description")
	wantFault(t, h.do("GET", "/v1/runbooks?sort_key=traits", v112, nil), 400, "The sort_key value traits is an invalid field for sorting")
}

func TestRunbooksCRUD(t *testing.T) {
	h := newAPI(t, ceiling(112))
	body := map[string]any{
		"name": "CUSTOM_FW", "steps": []any{
			map[string]any{"interface": "firmware", "step": "update", "args": map[string]any{"password": "s3cret", "x": 1}, "order": "2"},
			map[string]any{"interface": "bios", "step": "apply_configuration", "order": 1},
		},
		"extra": map[string]any{"k": "v"}, "disable_ramdisk": true, "owner": "proj", "public": false,
	}
	r := h.expect(201, "POST", "/v1/runbooks", v92, body)
	created := r.json(t)
	id := created["uuid"].(string)
	if r.header.Get("Location") != h.srv.URL+"/v1/runbooks/"+id {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	wantSteps := []any{
		map[string]any{"interface": "firmware", "step": "update", "args": map[string]any{"password": "******", "x": float64(1)}, "order": float64(2)},
		map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{}, "order": float64(1)},
	}
	want := map[string]any{"name": "CUSTOM_FW", "extra": map[string]any{"k": "v"}, "disable_ramdisk": true, "owner": "proj",
		"public": false, "updated_at": nil, "steps": wantSteps}
	for k, v := range want {
		if !reflect.DeepEqual(created[k], v) {
			t.Errorf("created %s = %#v, want %#v", k, created[k], v)
		}
	}
	if links := created["links"].([]any); len(links) != 2 {
		t.Errorf("links %v", links)
	}
	for _, ident := range []string{id, "CUSTOM_FW"} {
		got := h.expect(200, "GET", "/v1/runbooks/"+ident, v92, nil).json(t)
		if !reflect.DeepEqual(got, created) {
			t.Errorf("GET %s:\n got %v\nwant %v", ident, got, created)
		}
	}
	if got := h.expect(200, "GET", "/v1/runbooks/CUSTOM_FW?fields=name,steps", v92, nil).json(t); len(got) != 3 || got["name"] != "CUSTOM_FW" {
		t.Errorf("fields: %v", got)
	}

	// Lists: uuid and name by default, everything with detail.
	second := h.expect(201, "POST", "/v1/runbooks", v92, map[string]any{"name": "CUSTOM_A", "steps": rbSteps(), "public": true}).json(t)
	l := h.expect(200, "GET", "/v1/runbooks", v92, nil).json(t)["runbooks"].([]any)
	if len(l) != 2 || len(l[0].(map[string]any)) != 3 || l[0].(map[string]any)["name"] != "CUSTOM_FW" {
		t.Errorf("list %v", l)
	}
	d := h.expect(200, "GET", "/v1/runbooks?detail=true&sort_key=name", v92, nil).json(t)["runbooks"].([]any)
	if len(d) != 2 || d[0].(map[string]any)["name"] != "CUSTOM_A" || d[1].(map[string]any)["steps"] == nil {
		t.Errorf("detail %v", d)
	}
	page := h.expect(200, "GET", "/v1/runbooks?limit=1", v92, nil).json(t)
	if next, _ := page["next"].(string); next != h.srv.URL+"/v1/runbooks?sort_key=id&sort_dir=asc&fields=uuid,name&limit=1&marker="+id {
		t.Errorf("next %v", page["next"])
	}
	page = h.expect(200, "GET", "/v1/runbooks?limit=1&marker="+id, v92, nil).json(t)
	if l := page["runbooks"].([]any); len(l) != 1 || l[0].(map[string]any)["uuid"] != second["uuid"] {
		t.Errorf("after marker %v", page)
	}
	if l := h.expect(200, "GET", "/v1/runbooks?project=true", v92, nil).json(t)["runbooks"].([]any); len(l) != 1 || l[0].(map[string]any)["name"] != "CUSTOM_A" {
		t.Errorf("project=true %v", l)
	}
	if l := h.expect(200, "GET", "/v1/runbooks?project=false", v92, nil).json(t)["runbooks"].([]any); len(l) != 2 {
		t.Errorf("project=false %v", l)
	}

	// PATCH: the tempest plugin's mixed operations, then owner and public.
	upd := h.expect(200, "PATCH", "/v1/runbooks/"+id, v92, []any{
		op("replace", "/name", "CUSTOM_FW2"),
		op("replace", "/steps/0", map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{}, "order": 2}),
		op("remove", "/steps/0"),
		op("add", "/steps/1", map[string]any{"interface": "raid", "step": "create_configuration", "args": map[string]any{}, "order": 3}),
		op("replace", "/disable_ramdisk", false),
	}).json(t)
	if upd["name"] != "CUSTOM_FW2" || upd["disable_ramdisk"] != false || upd["updated_at"] == nil || len(upd["steps"].([]any)) != 2 {
		t.Errorf("patched %v", upd)
	}
	if s := upd["steps"].([]any)[1].(map[string]any); s["step"] != "create_configuration" || s["order"] != float64(3) {
		t.Errorf("patched steps %v", upd["steps"])
	}
	// Making it public clears the owner; an owner for a public runbook is
	// refused.
	if upd = h.expect(200, "PATCH", "/v1/runbooks/"+id, v92, []any{op("replace", "/public", true)}).json(t); upd["owner"] != nil || upd["public"] != true {
		t.Errorf("public %v", upd)
	}
	wantFault(t, h.do("PATCH", "/v1/runbooks/"+id, v92, []any{op("replace", "/owner", "p2")}), 400,
		"Couldn't apply patch '[{'op': 'replace', 'path': '/owner', 'value': 'p2'}]'. Reason: There cannot be an owner for a public runbook")
	upd = h.expect(200, "PATCH", "/v1/runbooks/"+id, v92, []any{op("replace", "/public", false), op("replace", "/owner", "p2")}).json(t)
	if upd["owner"] != "p2" || upd["public"] != false {
		t.Errorf("owner back %v", upd)
	}
	// description from 1.112, in the view and by PATCH.
	upd = h.expect(200, "PATCH", "/v1/runbooks/"+id, v112, []any{op("add", "/description", "fw update")}).json(t)
	if upd["description"] != "fw update" || !reflect.DeepEqual(upd["traits"], []any{}) {
		t.Errorf("description %v", upd)
	}

	h.expect(204, "DELETE", "/v1/runbooks/CUSTOM_FW2", v92, nil)
	wantFault(t, h.do("GET", "/v1/runbooks/"+id, v92, nil), 404, "Runbook "+id+" could not be found.")
	wantFault(t, h.do("DELETE", "/v1/runbooks/CUSTOM_FW2", v92, nil), 404, "Runbook CUSTOM_FW2 could not be found.")
}

// Every bad input: a 4xx with Ironic's message.
func TestRunbookBadInput(t *testing.T) {
	h := newAPI(t, ceiling(112))
	h.expect(201, "POST", "/v1/runbooks", v92, map[string]any{"name": "CUSTOM_A", "steps": rbSteps()})
	rb := func(extra map[string]any) map[string]any {
		b := map[string]any{"name": "CUSTOM_B", "steps": rbSteps()}
		for k, v := range extra {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	step := func(k string, v any) []any {
		s := map[string]any{"interface": "bios", "step": "s", "order": 1}
		if v == nil {
			delete(s, k)
		} else {
			s[k] = v
		}
		return []any{s}
	}
	h.wantFaults(t, "POST", "/v1/runbooks", []verFault{
		{v92, rb(map[string]any{"name": nil}), 400, "Schema error for runbook: 'name' is a required property"},
		{v92, rb(map[string]any{"steps": nil}), 400, "Schema error for runbook: 'steps' is a required property"},
		{v92, rb(map[string]any{"steps": []any{}}), 400, "Schema error for runbook: [] should be non-empty"},
		{v92, rb(map[string]any{"steps": map[string]any{"key": "value"}}), 400, "Schema error for runbook: {'key': 'value'} is not of type 'array'"},
		{v92, rb(map[string]any{"steps": []any{map[string]any{"invalid_key": "value"}}}), 400, "Schema error for runbook: 'interface' is a required property"},
		{v92, rb(map[string]any{"steps": step("order", nil)}), 400, "Schema error for runbook: 'order' is a required property"},
		{v92, rb(map[string]any{"steps": step("order", -1)}), 400, "Schema error for runbook: -1 is less than the minimum of 0"},
		{v92, rb(map[string]any{"steps": step("interface", "boot")}), 400, "Schema error for runbook: 'boot' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid']"},
		{v92, rb(map[string]any{"steps": step("step", "")}), 400, "Schema error for runbook: '' should be non-empty"},
		{v92, rb(map[string]any{"steps": step("args", []any{})}), 400, "Schema error for runbook: [] is not of type 'object'"},
		{v92, rb(map[string]any{"steps": append(rbSteps(), rbSteps()...)}), 400,
			"Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: bios, step: apply_configuration."},
		{v92, rb(map[string]any{"uuid": "malformed:uuid"}), 400, "Expected UUID for uuid: malformed:uuid"},
		{v92, rb(map[string]any{"name": "invalid-name"}), 400, "Schema error for runbook: 'invalid-name' is not valid under any of the given schemas. Possible root cause: 'invalid-name' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{v112, rb(map[string]any{"name": "bad name"}), 400, "Schema error for runbook: 'bad name' does not match '^[A-Za-z0-9\\\\-._~]+$'"},
		{v112, rb(map[string]any{"name": ""}), 400, "Schema error for runbook: '' should be non-empty"},
		{v112, rb(map[string]any{"description": strings.Repeat("d", 256)}), 400, "Schema error for runbook: '" + strings.Repeat("d", 256) + "' is too long"},
		{v92, rb(map[string]any{"public": "yes"}), 400, "Schema error for runbook: 'yes' is not of type 'boolean', 'null'"},
		{v92, rb(map[string]any{"owner": 1}), 400, "Schema error for runbook: 1 is not of type 'string', 'null'"},
		{v92, rb(map[string]any{"bogus": 1}), 400, "Schema error for runbook: Additional properties are not allowed ('bogus' was unexpected)"},
		{v92, rb(map[string]any{"name": "CUSTOM_A"}), 409, "A runbook with name CUSTOM_A already exists."},
		{v92, `{"name": `, 400, "Malformed JSON in request body: unexpected EOF"},
	})
	h.wantFaults(t, "PATCH", "/v1/runbooks/CUSTOM_A", []verFault{
		{v92, []any{op("remove", "/steps/0")}, 400, "Schema error for patch: [] should be non-empty"},
		{v92, []any{op("remove", "/steps")}, 400, "Schema error for patch: 'steps' is a required property"},
		{v92, []any{op("remove", "/name")}, 400, "Schema error for patch: 'name' is a required property"},
		{v92, []any{op("replace", "/name", "")}, 400, "Schema error for patch: '' should be non-empty"},
		{v92, []any{op("add", "/steps/0", map[string]any{"interface": "bios", "step": "x"})}, 400, "Schema error for patch: 'order' is a required property"},
		{v92, []any{op("replace", "/uuid", uuid.NewString())}, 400, "Cannot patch /uuid. Only the following can be updated: disable_ramdisk, extra, name, owner, public, steps"},
		{v92, []any{op("replace", "/public", "x")}, 400, "Schema error for patch: 'x' is not of type 'boolean', 'null'"},
	})
	wantFault(t, h.do("PATCH", "/v1/runbooks/CUSTOM_NONE", v92, []any{op("replace", "/extra/a", 1)}), 404, "Runbook CUSTOM_NONE could not be found.")
	wantFault(t, h.do("GET", "/v1/runbooks/bad!name", v92, nil), 400, "Expected UUID or name for runbook_ident: bad!name")
	wantFault(t, h.do("DELETE", "/v1/runbooks/bad!name", v92, nil), 400, "Expected UUID or name for runbook_ident: bad!name")
	listFaults(t, h, "/v1/runbooks", []listFault{
		{"?limit=x", 400, "Expected an integer for limit: x"},
		{"?limit=0", 400, "Limit must be positive"},
		{"?sort_dir=up", 400, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"},
		{"?sort_key=steps", 400, "The sort_key value steps is an invalid field for sorting"},
		{"?sort_key=extra", 400, "The sort_key value extra is an invalid field for sorting"},
		{"?sort_key=bogus", 400, `The sort_key value "bogus" is an invalid field for sorting`},
		{"?marker=bad!marker", 400, "Expected name for marker: bad!marker"},
		{"?marker=CUSTOM_A", 404, "Runbook CUSTOM_A could not be found."},
		{"?detail=maybe", 400, "Invalid detail: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"},
		{"?project=x", 400, "Invalid project: Unrecognized value 'x', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"},
		{"?fields=bogus", 400, `Field(s) "bogus" are not valid`},
		{"?fields=name&detail=true", 400, "Can not specify ?detail=True and fields in the same request."},
	})

	// Traits.
	tr := "/v1/runbooks/CUSTOM_A/traits"
	h.wantFaults(t, "PUT", tr, []verFault{
		{v112, nil, 400, "A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body."},
		{v112, map[string]any{"traits": []any{"lower"}}, 400, "Schema error for body: 'lower' is not valid under any of the given schemas. Possible root cause: 'lower' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{v112, map[string]any{"traits": "CUSTOM_A"}, 400, "Schema error for body: 'CUSTOM_A' is not of type 'array'"},
		{v112, map[string]any{"bogus": []any{}}, 400, "Schema error for body: Additional properties are not allowed ('bogus' was unexpected)"},
	})
	wantFault(t, h.do("PUT", tr+"/lower", v112, nil), 400, "Schema error for trait: 'lower' is not valid under any of the given schemas. Possible root cause: 'lower' does not match '^CUSTOM_[A-Z0-9_]+$'")
	wantFault(t, h.do("PUT", tr+"/CUSTOM_X", v112, map[string]any{"traits": []any{"CUSTOM_Y"}}), 400,
		"A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body.")
	wantFault(t, h.do("PUT", tr+"/CUSTOM_X", v112, map[string]any{"x": 1}), 400, "Schema error for body: Additional properties are not allowed ('x' was unexpected)")
	wantFault(t, h.do("GET", "/v1/runbooks/CUSTOM_NONE/traits", v112, nil), 404, "Runbook CUSTOM_NONE could not be found.")
	wantFault(t, h.do("PUT", "/v1/runbooks/CUSTOM_NONE/traits/CUSTOM_X", v112, nil), 404, "Runbook CUSTOM_NONE could not be found.")
	wantFault(t, h.do("DELETE", "/v1/runbooks/bad!name/traits", v112, nil), 400, "Expected a logical name or UUID but received bad!name.")
}

func TestRunbookTraits(t *testing.T) {
	h := newAPI(t, ceiling(112))
	id := h.expect(201, "POST", "/v1/runbooks", v112, map[string]any{"name": "fw", "steps": rbSteps()}).json(t)["uuid"].(string)
	traits := func() []any {
		return h.expect(200, "GET", "/v1/runbooks/fw/traits", v112, nil).json(t)["traits"].([]any)
	}
	r := h.expect(204, "PUT", "/v1/runbooks/fw/traits/CUSTOM_A", v112, nil)
	if r.header.Get("Location") != h.srv.URL+"/v1/runbooks/fw/traits/CUSTOM_A" {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	h.expect(204, "PUT", "/v1/runbooks/"+id+"/traits/CUSTOM_A", v112, nil) // a second add changes nothing
	h.expect(204, "PUT", "/v1/runbooks/fw/traits/HW_CPU_X86_VMX", v112, nil)
	if got := traits(); !reflect.DeepEqual(got, []any{"CUSTOM_A", "HW_CPU_X86_VMX"}) {
		t.Errorf("traits %v", got)
	}
	h.expect(204, "PUT", "/v1/runbooks/fw/traits", v112, map[string]any{"traits": []any{"CUSTOM_B", "CUSTOM_C", "CUSTOM_B"}})
	if got := traits(); !reflect.DeepEqual(got, []any{"CUSTOM_B", "CUSTOM_C"}) {
		t.Errorf("replaced %v", got)
	}
	if v := h.expect(200, "GET", "/v1/runbooks/fw", v112, nil).json(t); !reflect.DeepEqual(v["traits"], []any{"CUSTOM_B", "CUSTOM_C"}) {
		t.Errorf("view traits %v", v["traits"])
	}
	h.expect(204, "DELETE", "/v1/runbooks/fw/traits/CUSTOM_B", v112, nil)
	h.expect(204, "DELETE", "/v1/runbooks/fw/traits/CUSTOM_NOPE", v112, nil) // absent: no error
	if got := traits(); !reflect.DeepEqual(got, []any{"CUSTOM_C"}) {
		t.Errorf("after delete %v", got)
	}
	h.expect(204, "DELETE", "/v1/runbooks/fw/traits", v112, nil)
	if got := traits(); len(got) != 0 {
		t.Errorf("after delete all %v", got)
	}
}

// Using a runbook: clean and service on fake-hardware, the gates and the
// trait rules of 1.92 and 1.112.
func TestProvisionWithRunbook(t *testing.T) {
	h := newAPI(t, ceiling(112))
	id := h.createNode(map[string]any{"name": "rb-node"})["uuid"].(string)
	h.moveTo(id, "manage", "manageable")
	h.expect(201, "POST", "/v1/runbooks", v92, map[string]any{"name": "CUSTOM_CLEAN", "steps": []any{
		map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "order": 0}}})
	rbID := h.expect(201, "POST", "/v1/runbooks", v112, map[string]any{"name": "svc", "steps": rbSteps()}).json(t)["uuid"].(string)
	put := func(ver string, body map[string]any) resp {
		return h.do("PUT", "/v1/nodes/"+id+"/states/provision", ver, body)
	}
	clean := map[string]any{"target": "clean", "runbook": "CUSTOM_CLEAN"}

	wantFault(t, put("1.91", clean), 406, "Request not acceptable.")
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": 1}), 400, "Expected types <class 'NoneType'>, <class 'str'> for runbook: 1")
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": []any{"a"}}), 400, "Expected types <class 'NoneType'>, <class 'str'> for runbook: ['a']")
	// An empty runbook is no runbook (Ironic's "if runbook:").
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": ""}), 400, `"clean_steps" is required when setting target provision state to clean`)
	// 1.92: the node must carry a trait equal to the runbook's name.
	wantFault(t, put(v92, clean), 400, "This runbook has not been approved for use on this node "+id+". Please ask an administrator to add it to your node traits.")
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": "CUSTOM_NONE"}), 404, "Runbook CUSTOM_NONE could not be found.")
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": "bad!name"}), 400, "Expected a logical name or UUID but received bad!name.")
	h.expect(204, "PUT", "/v1/nodes/"+id+"/traits/CUSTOM_CLEAN", latest, nil)
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": "CUSTOM_CLEAN", "clean_steps": rbSteps()}), 400,
		`Please provide either "clean_steps" or a runbook, but not both.`)
	wantFault(t, put(v92, map[string]any{"target": "clean", "runbook": "CUSTOM_CLEAN", "service_steps": rbSteps()}), 400,
		`"runbooks" is only valid when setting target provision state to any of ['clean', 'service']`)
	wantFault(t, put(v92, map[string]any{"target": "provide", "runbook": "CUSTOM_CLEAN"}), 400,
		"disable_ramdisk is supported only with manual cleaning or servicing")
	// The state machine is asked first: a verb the state refuses is 400
	// whatever the runbook.
	wantFault(t, put(v92, map[string]any{"target": "active", "runbook": "CUSTOM_NONE"}), 400,
		`The requested action "active" can not be performed on node "`+id+`" while it is in state "manageable".`)
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", v92, clean)
	h.waitState(id, "manageable")

	// 1.112: a shared trait, and a runbook without traits cannot be used.
	wantFault(t, put(v112, clean), 400, "Runbook "+h.expect(200, "GET", "/v1/runbooks/CUSTOM_CLEAN", v92, nil).json(t)["uuid"].(string)+
		" has no traits configured. Please ask an administrator to add traits to the runbook.")
	h.expect(204, "PUT", "/v1/runbooks/CUSTOM_CLEAN/traits", v112, map[string]any{"traits": []any{"CUSTOM_Z", "CUSTOM_Y"}})
	wantFault(t, put(v112, clean), 400, "This runbook has not been approved for use on this node "+id+
		". The node does not have any of the runbook's traits ['CUSTOM_Y', 'CUSTOM_Z']. Please ask an administrator to add a matching trait to your node.")
	h.expect(204, "PUT", "/v1/runbooks/CUSTOM_CLEAN/traits/CUSTOM_CLEAN", v112, nil)
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", v112, clean)
	h.waitState(id, "manageable")

	// Service: a 1.112 runbook by UUID on an active node. The runbook's
	// disable_ramdisk (never None) needs 1.108 with service, as in Ironic.
	h.moveTo(id, "provide", "available")
	h.moveTo(id, "active", "active")
	svc := map[string]any{"target": "service", "runbook": rbID}
	h.expect(204, "PUT", "/v1/runbooks/"+rbID+"/traits/CUSTOM_SVC", v112, nil)
	h.expect(204, "PUT", "/v1/nodes/"+id+"/traits/CUSTOM_SVC", latest, nil)
	h.expect(201, "POST", "/v1/runbooks", v92, map[string]any{"name": "CUSTOM_SVC", "steps": rbSteps()})
	wantFault(t, put("1.107", map[string]any{"target": "service", "runbook": "CUSTOM_SVC"}), 406, "disable_ramdisk is not acceptable in this API version")
	wantFault(t, put(v112, map[string]any{"target": "service", "runbook": rbID, "service_steps": rbSteps()}), 400,
		`Please provide either "service_steps" or a runbook, but not both.`)
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", v112, svc)
	h.waitState(id, "active")
}

// The steps a runbook names go through the same step engine as explicit
// clean steps: with castiron's agent, the same plan, run by the agent.
func TestRunbookCleanStepsRunOnAgent(t *testing.T) {
	rec := &storeRecorder{}
	h := newAPIWith(t, func(c *engine.Config) { c.AgentPowerOffWait = 50 * time.Millisecond },
		ceiling(112), func(o *Options) { o.BootRecorder = rec })
	rec.st = h.store
	const mac = "52:54:00:aa:09:01"
	id := agentNode(h, mac)
	h.expect(204, "PUT", "/v1/nodes/"+id+"/traits/CUSTOM_ERASE", latest, nil)
	steps := []any{map[string]any{"interface": "deploy", "step": protocol.StepEraseDevicesMetadata, "args": map[string]any{}, "order": 0}}
	plans := map[string]any{}
	for _, how := range []string{"explicit", "runbook"} {
		body := map[string]any{"target": "clean"}
		if how == "explicit" {
			body["clean_steps"] = steps
		} else {
			body["runbook"] = "CUSTOM_ERASE"
		}
		h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", v92, body)
		n := h.waitState(id, "clean wait")
		dii := n["driver_internal_info"].(map[string]any)
		plan := dii["agent_steps"].([]any)
		if len(plan) != 1 || plan[0].(map[string]any)["step"] != protocol.StepEraseDevicesMetadata {
			t.Fatalf("%s: plan %v", how, plan)
		}
		plans[how] = dii["clean_steps"]
		a := &agent{h: h}
		a.lookup(mac)
		step := a.beat(nil).Step
		if step == nil || step.Name != protocol.StepEraseDevicesMetadata {
			t.Fatalf("%s: agent got %+v", how, step)
		}
		a.beat(&protocol.StepReport{ID: step.ID, Status: protocol.StepSucceeded})
		h.waitState(id, "manageable")
		if how == "explicit" {
			h.expect(201, "POST", "/v1/runbooks", latest, map[string]any{"name": "CUSTOM_ERASE", "steps": steps})
		}
	}
	// A runbook step castiron's agent does not have fails the cleaning as
	// the explicit step does.
	h.expect(201, "POST", "/v1/runbooks", latest, map[string]any{"name": "CUSTOM_BIOS", "steps": rbSteps()})
	h.expect(204, "PUT", "/v1/nodes/"+id+"/traits/CUSTOM_BIOS", latest, nil)
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", v92, map[string]any{"target": "clean", "runbook": "CUSTOM_BIOS"})
	h.failedWith(id, "clean failed", "Cannot clean node "+id+": node does not support this clean step: {'interface': 'bios', 'step': 'apply_configuration'")
	if !jsonEqual(plans["explicit"], plans["runbook"]) {
		t.Errorf("clean_steps: explicit %v, runbook %v", plans["explicit"], plans["runbook"])
	}
}

// op is one JSON-patch operation (a value only when given).
func op(o, path string, v ...any) map[string]any {
	m := map[string]any{"op": o, "path": path}
	if len(v) > 0 {
		m["value"] = v[0]
	}
	return m
}

// Runbook policy: by the runbook's owner (check_runbook_policy_and_retrieve),
// a public runbook readable by any reader, PATCH by the patched paths.
func TestRunbookAccess(t *testing.T) {
	h := newRBAC(t, ceiling(112))
	owned := h.want(201, "sysadmin", "POST", "/v1/runbooks", v112, map[string]any{"name": "owned", "steps": rbSteps(), "owner": "owner"}).json(t)["uuid"].(string)
	h.want(201, "sysadmin", "POST", "/v1/runbooks", v112, map[string]any{"name": "others", "steps": rbSteps(), "owner": "other"})
	h.want(201, "sysadmin", "POST", "/v1/runbooks", v112, map[string]any{"name": "shared", "steps": rbSteps(), "public": true})
	h.want(200, "ownerreader", "GET", "/v1/runbooks/owned", v112, nil)
	h.want(200, "ownerreader", "GET", "/v1/runbooks/"+owned+"/traits", v112, nil)
	r := h.want(403, "ownerreader", "GET", "/v1/runbooks/others", v112, nil)
	if got := r.faultstring(t); got != "Access was denied to the following resource: baremetal:runbook:get" {
		t.Errorf("403 message %q", got)
	}
	h.want(200, "lesseereader", "GET", "/v1/runbooks/shared", v112, nil)
	h.want(403, "lesseereader", "GET", "/v1/runbooks/shared/traits", v112, nil) // no public fallback there
	h.want(404, "ownerreader", "GET", "/v1/runbooks/missing", v112, nil)
	h.want(403, "ownermember", "PATCH", "/v1/runbooks/owned", v112, []any{op("add", "/extra/a", 1)})
	h.want(403, "sysreader", "PATCH", "/v1/runbooks/owned", v112, []any{op("add", "/extra/a", 1)})
	h.want(200, "sysmember", "PATCH", "/v1/runbooks/owned", v112, []any{op("add", "/extra/a", 1)})
	h.want(200, "sysmember", "PATCH", "/v1/runbooks/owned", v112, []any{op("replace", "/owner", "lessee")})
	h.want(403, "ownerreader", "DELETE", "/v1/runbooks/owned", v112, nil)
	h.want(403, "ownerreader", "PUT", "/v1/runbooks/owned/traits/CUSTOM_A", v112, nil)
	h.want(204, "sysmember", "PUT", "/v1/runbooks/owned/traits/CUSTOM_A", v112, nil)
	h.want(204, "sysadmin", "DELETE", "/v1/runbooks/owned", v112, nil)
}

// Runbook policy per persona for list, show, create and use (Ironic's
// check_list_policy, check_runbook_policy_and_retrieve with its public
// fallback, RunbooksController.post's project rules, and _handle_runbook's
// baremetal:runbook:use): system admin, member and reader, a manager and
// a reader of the owner project, and a manager of another project.
func TestRunbookAccessPersonas(t *testing.T) {
	h := newRBAC(t, ceiling(112))
	create := func(user string, body map[string]any) resp {
		body["steps"] = rbSteps()
		return h.as(user, "POST", "/v1/runbooks", v112, body)
	}
	for _, rb := range []map[string]any{{"name": "owned", "owner": "owner"}, {"name": "others", "owner": "other"},
		{"name": "shared", "public": true}, {"name": "nobodys"}} {
		if r := create("sysadmin", rb); r.status != 201 {
			t.Fatalf("sysadmin creates %v: %d %s", rb["name"], r.status, r.body)
		}
	}
	names := func(user, query string) []string {
		t.Helper()
		var out []string
		for _, x := range h.want(200, user, "GET", "/v1/runbooks"+query, v112, nil).json(t)["runbooks"].([]any) {
			out = append(out, x.(map[string]any)["name"].(string))
		}
		slices.Sort(out)
		return out
	}

	// List: the system sees all; a project its own and the public ones.
	for user, want := range map[string][]string{
		"sysadmin":     {"nobodys", "others", "owned", "shared"},
		"sysreader":    {"nobodys", "others", "owned", "shared"},
		"ownermanager": {"owned", "shared"},
		"ownerreader":  {"owned", "shared"},
		"othermanager": {"others", "shared"},
		"lesseereader": {"shared"},
	} {
		if got := names(user, ""); !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want %v", user, got, want)
		}
	}
	if got := names("ownerreader", "?project=false"); !slices.Equal(got, []string{"owned", "shared"}) {
		t.Errorf("ownerreader ?project=false lists %v", got)
	}
	if got := names("sysreader", "?project=true"); !slices.Equal(got, []string{"shared"}) {
		t.Errorf("sysreader ?project=true lists %v", got)
	}
	// project=true is an owner other than the caller's project: list_all.
	if got := h.want(403, "ownerreader", "GET", "/v1/runbooks?project=true", v112, nil).faultstring(t); got != "Access was denied to the following resource: baremetal:runbook:list_all" {
		t.Errorf("ownerreader ?project=true: %q", got)
	}
	h.want(403, "noroles", "GET", "/v1/runbooks", v112, nil)
	// Below 1.92 the route answers its own 404 before any policy.
	h.want(404, "ownerreader", "GET", "/v1/runbooks", "1.91", nil)

	// Show: the owner project's readers, the system's, anyone's public.
	for _, c := range []struct {
		user, name string
		status     int
	}{
		{"sysreader", "owned", 200}, {"sysreader", "nobodys", 200},
		{"ownerreader", "owned", 200}, {"ownermanager", "owned", 200}, {"ownerreader", "shared", 200},
		{"ownerreader", "others", 403}, {"ownerreader", "nobodys", 403},
		{"othermanager", "owned", 403}, {"othermanager", "others", 200}, {"othermanager", "shared", 200},
	} {
		h.want(c.status, c.user, "GET", "/v1/runbooks/"+c.name, v112, nil)
	}

	// Create: a project caller's runbook is its project's; another owner
	// or public are 400s; readers and members lack runbook:create.
	if got := create("ownermanager", map[string]any{"name": "mgr-own"}); got.status != 201 || got.json(t)["owner"] != "owner" {
		t.Errorf("ownermanager creates: %d %s", got.status, got.body)
	}
	if got := create("ownermanager", map[string]any{"name": "mgr-same", "owner": "owner"}); got.status != 201 || got.json(t)["owner"] != "owner" {
		t.Errorf("ownermanager creates with its owner: %d %s", got.status, got.body)
	}
	wantFault(t, create("ownermanager", map[string]any{"name": "mgr-other", "owner": "other"}), 400,
		"Cannot create a runbook as a project scoped admin with an owner other than your own project.")
	wantFault(t, create("ownermanager", map[string]any{"name": "mgr-pub", "public": true}), 400,
		"Cannot create a public runbook as a project scoped admin.")
	// The schema is checked first.
	wantFault(t, h.as("ownermanager", "POST", "/v1/runbooks", v112, map[string]any{"name": "x", "public": true}), 400,
		"Schema error for runbook: 'steps' is a required property")
	if got := create("ownermanager", map[string]any{"name": "mgr-priv", "public": false}); got.status != 201 || got.json(t)["public"] != false {
		t.Errorf("ownermanager creates public=false: %d %s", got.status, got.body)
	}
	for _, user := range []string{"ownerreader", "ownermember", "sysreader"} {
		wantFault(t, create(user, map[string]any{"name": "by-" + user}), 403, "Access was denied to the following resource: baremetal:runbook:create")
	}
	// The system keeps the owner and public it gives.
	if got := create("sysmember", map[string]any{"name": "sys-for-other", "owner": "other"}); got.status != 201 || got.json(t)["owner"] != "other" {
		t.Errorf("sysmember creates for other: %d %s", got.status, got.body)
	}
	if got := create("sysmember", map[string]any{"name": "sys-pub", "public": true}); got.status != 201 || got.json(t)["public"] != true {
		t.Errorf("sysmember creates public: %d %s", got.status, got.body)
	}
	if got := names("othermanager", ""); !slices.Equal(got, []string{"others", "shared", "sys-for-other", "sys-pub"}) {
		t.Errorf("othermanager lists %v after creates", got)
	}

	// Use: a node the owner project owns, in manageable, that carries no
	// runbook's trait: a caller runbook:use admits reaches the trait
	// check (400), one it refuses gets 403 first.
	id := h.want(201, "sysadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "name": "rb-node", "owner": "owner"}).json(t)["uuid"].(string)
	// waitIdle is waitState as the system reader.
	waitIdle := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := h.want(200, "sysreader", "GET", "/v1/nodes/"+id, latest, nil).json(t)
			if n["provision_state"] == want && n["reservation"] == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node in %v (last_error %v), want %s", n["provision_state"], n["last_error"], want)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}
	h.want(202, "sysadmin", "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "manage"})
	waitIdle("manageable")
	notApproved := "This runbook has not been approved for use on this node " + id + ". The node does not have any of the runbook's traits ['CUSTOM_T']. Please ask an administrator to add a matching trait to your node."
	for _, name := range []string{"owned", "others", "shared", "nobodys"} {
		h.want(204, "sysadmin", "PUT", "/v1/runbooks/"+name+"/traits/CUSTOM_T", v112, nil)
	}
	use := func(user, name string) resp {
		return h.as(user, "PUT", "/v1/nodes/"+id+"/states/provision", v112, map[string]any{"target": "clean", "runbook": name})
	}
	denied := "Access was denied to the following resource: baremetal:runbook:use"
	for _, c := range []struct {
		user, name string
		status     int
		msg        string
	}{
		{"sysmember", "owned", 400, notApproved}, {"sysmember", "others", 400, notApproved}, {"sysmember", "shared", 400, notApproved},
		{"ownermanager", "owned", 400, notApproved},
		{"ownermanager", "others", 403, denied},
		// A public runbook has no owner: runbook:use admits no project.
		{"ownermanager", "shared", 403, denied}, {"ownermanager", "nobodys", 403, denied},
		// A member may provision the node but not use a runbook.
		{"ownermember", "owned", 403, denied},
		// The node's rule first: a reader may not provision, another
		// project does not see the node.
		{"sysreader", "owned", 403, "Access was denied to the following resource: baremetal:node:set_provision_state"},
		{"othermanager", "others", 404, "Node " + id + " could not be found."},
		// The runbook is found before it is judged.
		{"ownermanager", "missing", 404, "Runbook missing could not be found."},
	} {
		r := use(c.user, c.name)
		if r.status != c.status || r.faultstring(t) != c.msg {
			t.Errorf("%s uses %s: %d %s, want %d %q", c.user, c.name, r.status, r.body, c.status, c.msg)
		}
	}
	// Below 1.92 the runbook is not acceptable whoever asks.
	wantFault(t, h.as("ownermember", "PUT", "/v1/nodes/"+id+"/states/provision", "1.91", map[string]any{"target": "clean", "runbook": "others"}), 406, "Request not acceptable.")
	// With the trait, the owner project's manager runs its runbook.
	h.want(204, "sysadmin", "PUT", "/v1/nodes/"+id+"/traits/CUSTOM_T", latest, nil)
	h.want(202, "ownermanager", "PUT", "/v1/nodes/"+id+"/states/provision", v112, map[string]any{"target": "clean", "runbook": "owned"})
	waitIdle("manageable")
}
