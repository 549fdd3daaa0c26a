package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestChassisCRUD(t *testing.T) {
	h := newAPI(t)
	r := h.expect(http.StatusCreated, "POST", "/v1/chassis", "", map[string]any{"description": "rack 1", "extra": map[string]any{"a": 1}})
	c := r.json(t)
	id := c["uuid"].(string)
	if loc := r.header.Get("Location"); loc != h.srv.URL+"/v1/chassis/"+id {
		t.Fatalf("Location %q", loc)
	}
	if got, want := argSortedKeys(c), []string{"created_at", "description", "extra", "links", "nodes", "updated_at", "uuid"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("created chassis fields %v, want %v", got, want)
	}
	if c["description"] != "rack 1" || c["extra"].(map[string]any)["a"] != float64(1) || c["updated_at"] != nil {
		t.Fatalf("created chassis %v", c)
	}
	// Ironic's nodes links are a list holding the list of links.
	nodes := c["nodes"].([]any)
	inner := nodes[0].([]any)
	if len(nodes) != 1 || len(inner) != 2 || inner[0].(map[string]any)["href"] != h.srv.URL+"/v1/chassis/"+id+"/nodes" ||
		inner[1].(map[string]any)["href"] != h.srv.URL+"/chassis/"+id+"/nodes" {
		t.Fatalf("nodes links %v", c["nodes"])
	}

	got := h.expect(http.StatusOK, "GET", "/v1/chassis/"+id, "", nil).json(t)
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("GET = %v, want %v", got, c)
	}
	h.expect(http.StatusOK, "GET", "/chassis/"+strings.ToUpper(id), "", nil) // bookmark, any UUID spelling
	f := h.expect(http.StatusOK, "GET", "/v1/chassis/"+id+"?fields=extra", "1.8", nil).json(t)
	if !reflect.DeepEqual(argSortedKeys(f), []string{"extra", "links"}) {
		t.Fatalf("fields=extra: %v", f)
	}

	// Lists: summary, detail endpoint, ?detail (1.43), fields.
	second := h.expect(http.StatusCreated, "POST", "/v1/chassis", latest, map[string]any{}).json(t)
	list := h.expect(http.StatusOK, "GET", "/v1/chassis", "", nil).json(t)["chassis"].([]any)
	if len(list) != 2 || !reflect.DeepEqual(argSortedKeys(list[0].(map[string]any)), []string{"description", "links", "uuid"}) {
		t.Fatalf("summary list %v", list)
	}
	if list[1].(map[string]any)["description"] != nil {
		t.Fatalf("second chassis %v", list[1])
	}
	detail := h.expect(http.StatusOK, "GET", "/v1/chassis/detail", "", nil).json(t)["chassis"].([]any)
	if len(detail) != 2 || len(detail[0].(map[string]any)) != 7 {
		t.Fatalf("detail list %v", detail)
	}
	viaParam := h.expect(http.StatusOK, "GET", "/v1/chassis?detail=True", "1.43", nil).json(t)["chassis"].([]any)
	if !reflect.DeepEqual(viaParam, detail) {
		t.Fatalf("?detail=True %v, want %v", viaParam, detail)
	}
	fl := h.expect(http.StatusOK, "GET", "/v1/chassis?fields=uuid,created_at", latest, nil).json(t)["chassis"].([]any)
	if !reflect.DeepEqual(argSortedKeys(fl[0].(map[string]any)), []string{"created_at", "links", "uuid"}) {
		t.Fatalf("fields list %v", fl)
	}

	// Paging: the next link keeps the detail path and works.
	h.expect(http.StatusCreated, "POST", "/v1/chassis", latest, map[string]any{"description": "third"})
	page := h.expect(http.StatusOK, "GET", "/v1/chassis/detail?limit=2", latest, nil).json(t)
	next, _ := page["next"].(string)
	if len(page["chassis"].([]any)) != 2 || !strings.HasPrefix(next, h.srv.URL+"/v1/chassis/detail?") || !strings.Contains(next, "marker="+second["uuid"].(string)) {
		t.Fatalf("page 1 %v", page)
	}
	u, _ := url.Parse(next)
	page2 := h.expect(http.StatusOK, "GET", u.RequestURI(), latest, nil).json(t)
	rest := page2["chassis"].([]any)
	if len(rest) != 1 || rest[0].(map[string]any)["description"] != "third" || page2["next"] != nil {
		t.Fatalf("page 2 %v", page2)
	}
	desc := h.expect(http.StatusOK, "GET", "/v1/chassis?sort_key=description&sort_dir=desc", latest, nil).json(t)["chassis"].([]any)
	if desc[0].(map[string]any)["description"] != "third" || desc[2].(map[string]any)["description"] != nil {
		t.Fatalf("sorted %v", desc)
	}

	// PATCH.
	p := h.expect(http.StatusOK, "PATCH", "/v1/chassis/"+id, "", []map[string]any{
		{"op": "replace", "path": "/description", "value": "rack 2"},
		{"op": "add", "path": "/extra/b", "value": map[string]any{"c": true}},
		{"op": "remove", "path": "/extra/a"},
	}).json(t)
	if p["description"] != "rack 2" || !reflect.DeepEqual(p["extra"], map[string]any{"b": map[string]any{"c": true}}) || p["updated_at"] == nil {
		t.Fatalf("patched %v", p)
	}
	p = h.expect(http.StatusOK, "PATCH", "/v1/chassis/"+id, "", []map[string]any{
		{"op": "remove", "path": "/description"}, {"op": "remove", "path": "/extra"},
		{"op": "replace", "path": "/uuid", "value": id}, // unchanged: fine
	}).json(t)
	if p["description"] != nil || !reflect.DeepEqual(p["extra"], map[string]any{}) {
		t.Fatalf("after removals %v", p)
	}

	// DELETE.
	h.expect(http.StatusNoContent, "DELETE", "/v1/chassis/"+second["uuid"].(string), "", nil)
	h.expect(http.StatusNotFound, "GET", "/v1/chassis/"+second["uuid"].(string), "", nil)
}

func TestChassisErrors(t *testing.T) {
	h := newAPI(t)
	c := h.expect(http.StatusCreated, "POST", "/v1/chassis", "", map[string]any{"description": "x"}).json(t)
	id := c["uuid"].(string)
	missing := uuid.NewString()
	long := strings.Repeat("d", 256)
	h.requestFaults(t, append(listQueryFaults("chassis", "uuid"), []requestFault{
		{"get unknown", "GET", "/v1/chassis/" + missing, "", nil, 404, "Chassis " + missing + " could not be found."},
		{"get not a uuid", "GET", "/v1/chassis/rack1", "", nil, 400, "Expected UUID for chassis_uuid: rack1"},
		{"fields before 1.8", "GET", "/v1/chassis/" + id + "?fields=uuid", "1.7", nil, 406, ""},
		{"bad detail", "GET", "/v1/chassis?detail=maybe", latest, nil, 400, ""},
		{"sort by extra", "GET", "/v1/chassis?sort_key=extra", latest, nil, 400, "The sort_key value extra is an invalid field for sorting"},
		{"bad marker", "GET", "/v1/chassis?marker=nope", latest, nil, 400, "Expected UUID for marker: nope"},
		{"unknown marker", "GET", "/v1/chassis?marker=" + missing, latest, nil, 404, "Chassis " + missing + " could not be found."},
		{"post unknown field", "POST", "/v1/chassis", "", map[string]any{"name": "x"}, 400, "Schema error for chassis: Additional properties are not allowed ('name' was unexpected)"},
		{"post description type", "POST", "/v1/chassis", "", map[string]any{"description": 5}, 400, "Schema error for chassis: 5 is not of type 'string', 'null'"},
		{"post extra type", "POST", "/v1/chassis", "", map[string]any{"extra": []any{}}, 400, "Schema error for chassis: [] is not of type 'object', 'null'"},
		{"post description too long", "POST", "/v1/chassis", "", map[string]any{"description": long}, 400, "Schema error for chassis: '" + long + "' is too long"},
		{"post bad uuid", "POST", "/v1/chassis", "", map[string]any{"uuid": "abc"}, 400, "Expected UUID for uuid: abc"},
		{"post duplicate uuid", "POST", "/v1/chassis", "", map[string]any{"uuid": id}, 409, "A chassis with UUID " + id + " already exists."},
		{"post not an object", "POST", "/v1/chassis", "", "[]", 400, "Schema error for chassis: [] is not of type 'object'"},
		{"patch unknown", "PATCH", "/v1/chassis/" + missing, "", []map[string]any{{"op": "remove", "path": "/extra"}}, 404, "Chassis " + missing + " could not be found."},
		{"patch bad field", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "replace", "path": "/created_at", "value": "x"}}, 400, "Cannot patch /created_at. Only the following can be updated: uuid, extra, description"},
		{"patch uuid", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "replace", "path": "/uuid", "value": missing}}, 400, "Cannot overwrite UUID for an existing Chassis."},
		{"patch uuid away", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "remove", "path": "/uuid"}}, 400, "Cannot overwrite UUID for an existing Chassis."},
		{"patch bad uuid", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "replace", "path": "/uuid", "value": "x"}}, 400, "Expected UUID for uuid: x"},
		{"patch too long", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "replace", "path": "/description", "value": long}}, 400, "Schema error for patch: '" + long + "' is too long"},
		{"patch extra type", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "replace", "path": "/extra", "value": "s"}}, 400, "Schema error for patch: 's' is not of type 'object', 'null'"},
		{"patch move", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "move", "from": "/extra", "path": "/description"}}, 400, "Schema error for patch: Additional properties are not allowed ('from' was unexpected)"},
		{"patch test op", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "test", "path": "/description", "value": "x"}}, 400, "Schema error for patch: 'test' is not one of ['add', 'replace', 'remove']"},
		{"patch no path", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "remove"}}, 400, "Schema error for patch: 'path' is a required property"},
		{"patch bad path", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "remove", "path": "extra"}}, 400, `Schema error for patch: 'extra' does not match '^(/[\\w-]+)+$'`},
		{"patch not a list", "PATCH", "/v1/chassis/" + id, "", map[string]any{"op": "remove"}, 400, "Schema error for patch: {'op': 'remove'} is not of type 'array'"},
		{"patch missing member", "PATCH", "/v1/chassis/" + id, "", []map[string]any{{"op": "remove", "path": "/extra/nope"}}, 400, ""},
		{"delete not a uuid", "DELETE", "/v1/chassis/rack1", "", nil, 400, "Expected UUID for chassis_uuid: rack1"},
		{"delete unknown", "DELETE", "/v1/chassis/" + missing, "", nil, 404, "Chassis " + missing + " could not be found."},
		{"put", "PUT", "/v1/chassis/" + id, "", map[string]any{}, 405, ""},
		{"delete collection", "DELETE", "/v1/chassis", "", nil, 405, ""},
	}...))
	// Failed patches changed nothing.
	if got := h.expect(http.StatusOK, "GET", "/v1/chassis/"+id, "", nil).json(t); !reflect.DeepEqual(got, c) {
		t.Fatalf("after failed requests %v, want %v", got, c)
	}
}

func TestNodesInChassis(t *testing.T) {
	h := newAPI(t)
	c := h.expect(http.StatusCreated, "POST", "/v1/chassis", "", map[string]any{}).json(t)
	id := c["uuid"].(string)
	other := h.expect(http.StatusCreated, "POST", "/v1/chassis", "", map[string]any{}).json(t)["uuid"].(string)
	missing := uuid.NewString()

	r := h.expect(http.StatusBadRequest, "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "chassis_uuid": missing})
	if got := r.faultstring(t); got != "Chassis "+missing+" could not be found." {
		t.Fatalf("unknown chassis on create: %q", got)
	}
	in := h.createNode(map[string]any{"name": "in", "chassis_uuid": strings.ToUpper(id)})
	if in["chassis_uuid"] != id {
		t.Fatalf("chassis_uuid %v, want %s", in["chassis_uuid"], id)
	}
	out := h.createNode(map[string]any{"name": "out"})["uuid"].(string)

	list := h.expect(http.StatusOK, "GET", "/v1/chassis/"+id+"/nodes", "", nil).json(t)["nodes"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["uuid"] != in["uuid"] {
		t.Fatalf("chassis nodes %v", list)
	}
	if _, has := list[0].(map[string]any)["driver"]; has {
		t.Fatalf("summary has driver: %v", list[0])
	}
	detail := h.expect(http.StatusOK, "GET", "/v1/chassis/"+id+"/nodes/detail", latest, nil).json(t)["nodes"].([]any)
	if len(detail) != 1 || detail[0].(map[string]any)["driver"] != "fake-hardware" || detail[0].(map[string]any)["chassis_uuid"] != id {
		t.Fatalf("chassis nodes detail %v", detail)
	}
	if l := h.expect(http.StatusOK, "GET", "/v1/chassis/"+other+"/nodes", "", nil).json(t)["nodes"].([]any); len(l) != 0 {
		t.Fatalf("empty chassis lists %v", l)
	}
	if got := h.expect(http.StatusNotFound, "GET", "/v1/chassis/"+missing+"/nodes", "", nil).faultstring(t); got != "Chassis "+missing+" could not be found." {
		t.Fatalf("unknown chassis nodes: %q", got)
	}
	h.expect(http.StatusBadRequest, "GET", "/v1/chassis/nope/nodes", "", nil)

	// A chassis with nodes cannot go.
	r = h.expect(http.StatusBadRequest, "DELETE", "/v1/chassis/"+id, "", nil)
	if got := r.faultstring(t); got != "Cannot complete the requested action because chassis "+id+" contains nodes." {
		t.Fatalf("delete non-empty chassis: %q", got)
	}

	// Node PATCH: an unknown chassis is a 400; moving works; unsetting
	// needs 1.25.
	r = h.expect(http.StatusBadRequest, "PATCH", "/v1/nodes/in", latest, []map[string]any{{"op": "replace", "path": "/chassis_uuid", "value": missing}})
	if got := r.faultstring(t); got != "Chassis "+missing+" could not be found." {
		t.Fatalf("unknown chassis on patch: %q", got)
	}
	n := h.expect(http.StatusOK, "PATCH", "/v1/nodes/in", "1.5", []map[string]any{{"op": "replace", "path": "/chassis_uuid", "value": other}}).json(t)
	if n["chassis_uuid"] != other {
		t.Fatalf("moved node %v", n["chassis_uuid"])
	}
	h.expect(http.StatusNotAcceptable, "PATCH", "/v1/nodes/in", "1.24", []map[string]any{{"op": "remove", "path": "/chassis_uuid"}})
	h.expect(http.StatusNotAcceptable, "PATCH", "/v1/nodes/in", "1.24", []map[string]any{{"op": "replace", "path": "/chassis_uuid", "value": nil}})
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/in", "1.24", []map[string]any{{"op": "replace", "path": "/extra", "value": map[string]any{"x": 1}}})
	n = h.expect(http.StatusOK, "PATCH", "/v1/nodes/in", "1.25", []map[string]any{{"op": "remove", "path": "/chassis_uuid"}}).json(t)
	if n["chassis_uuid"] != nil {
		t.Fatalf("unset chassis_uuid %v", n["chassis_uuid"])
	}
	// Adding a chassis to a node without one is fine at any version.
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+out, "1.1", []map[string]any{{"op": "add", "path": "/chassis_uuid", "value": id}})
	h.expect(http.StatusBadRequest, "DELETE", "/v1/chassis/"+id, "", nil)
	h.expect(http.StatusNoContent, "DELETE", "/v1/chassis/"+other, "", nil)
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/out", latest, nil)
	h.expect(http.StatusNoContent, "DELETE", "/v1/chassis/"+id, "", nil)
}
