package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/storage"
)

// volPower drives the node's power to target and waits until it is there.
func volPower(h *apiHarness, id, target string) {
	h.t.Helper()
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/power", latest, map[string]any{"target": target})
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := h.expect(200, "GET", "/v1/nodes/"+id+"/states", latest, nil).json(h.t)
		if st["power_state"] == target && st["target_power_state"] == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("power %v, want %s", st["power_state"], target)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// volReserve sets or clears the node's reservation as a running task would.
func volReserve(h *apiHarness, id string, host *string) {
	h.t.Helper()
	if _, err := h.store.UpdateNode(context.Background(), id, func(n *storage.Node) (*storage.Event, error) {
		n.Reservation = host
		return nil, nil
	}); err != nil {
		h.t.Fatal(err)
	}
}

// pecanDescription digs the description out of a pecan error body.
func volPecanDesc(t *testing.T, r resp) any {
	t.Helper()
	var inner map[string]any
	if err := json.Unmarshal([]byte(r.json(t)["error_message"].(string)), &inner); err != nil {
		t.Fatalf("error_message is not JSON: %s", r.body)
	}
	return inner["description"]
}

func volFault(t *testing.T, r resp, want string) {
	t.Helper()
	if got := r.faultstring(t); got != want {
		t.Fatalf("faultstring\n got %q\nwant %q", got, want)
	}
}

// listFault is a list query and Ironic's status and message for it.
type listFault struct {
	query  string
	status int
	want   string
}

// listFaults checks each query of the list at path (subtest "list <query>").
func listFaults(t *testing.T, h *apiHarness, path string, cases []listFault) {
	t.Helper()
	for _, tc := range cases {
		t.Run("list "+tc.query, func(t *testing.T) {
			volFault(t, h.expect(tc.status, "GET", path+tc.query, latest, nil), tc.want)
		})
	}
}

func TestVolumeRootAndVersions(t *testing.T) {
	h := newAPI(t)
	root := h.expect(200, "GET", "/v1/volume", "1.32", nil).json(t)
	base := h.srv.URL
	want := map[string]any{
		"links":      []any{map[string]any{"href": base + "/v1/volume/", "rel": "self"}, map[string]any{"href": base + "/volume/", "rel": "bookmark"}},
		"connectors": []any{map[string]any{"href": base + "/v1/volume/connectors", "rel": "self"}, map[string]any{"href": base + "/volume/connectors", "rel": "bookmark"}},
		"targets":    []any{map[string]any{"href": base + "/v1/volume/targets", "rel": "self"}, map[string]any{"href": base + "/volume/targets", "rel": "bookmark"}},
	}
	if fmt.Sprint(root) != fmt.Sprint(want) {
		t.Fatalf("GET /v1/volume = %v", root)
	}
	// The node's links use the ident as given, and the node is not looked up.
	nodeRoot := h.expect(200, "GET", "/v1/nodes/some-node/volume", latest, nil).json(t)
	if l := nodeRoot["targets"].([]any)[0].(map[string]any)["href"]; l != base+"/v1/nodes/some-node/volume/targets" {
		t.Fatalf("node volume links: %v", nodeRoot)
	}

	r := h.expect(404, "GET", "/v1/volume", "1.31", nil)
	if d := volPecanDesc(t, r); d != "The API is not supported for this version" {
		t.Fatalf("description %v", d)
	}
	for _, p := range []string{"/v1/volume/connectors", "/v1/volume/targets", "/v1/nodes/x/volume/connectors"} {
		if d := volPecanDesc(t, h.expect(404, "GET", p, "1.31", nil)); d != "" {
			t.Fatalf("%s: description %v", p, d)
		}
	}
	h.expect(404, "POST", "/v1/volume/connectors", "1.31", map[string]any{})
	h.expect(405, "PUT", "/v1/volume/connectors", latest, map[string]any{})
}

func TestVolumeConnectors(t *testing.T) {
	h := newAPI(t)
	node := h.createNode(map[string]any{"name": "vol-a"})
	id := node["uuid"].(string)
	other := h.createNode(map[string]any{"name": "vol-b", "owner": "someone"})["uuid"].(string)

	// Create.
	body := map[string]any{"node_uuid": id, "type": "iqn", "connector_id": "iqn.2017-05.org.openstack:01:d9a51732c3f", "extra": map[string]any{"k": "v"}}
	r := h.expect(201, "POST", "/v1/volume/connectors", latest, body)
	c := r.json(t)
	cid := c["uuid"].(string)
	if loc := r.header.Get("Location"); loc != h.srv.URL+"/v1/volume/connectors/"+cid {
		t.Fatalf("Location %q", loc)
	}
	var keys []string
	for k := range c {
		keys = append(keys, k)
	}
	if c["node_uuid"] != id || c["type"] != "iqn" || c["extra"].(map[string]any)["k"] != "v" || c["updated_at"] != nil || len(c) != 8 ||
		!strings.HasPrefix(string(r.body), `{"uuid": "`+cid+`", "created_at": "`) {
		t.Fatalf("created connector: %s", r.body)
	}
	given := strings.ToUpper(uuid.NewString())
	c2 := h.expect(201, "POST", "/v1/volume/connectors", latest,
		map[string]any{"uuid": given, "node_uuid": strings.ToUpper(id), "type": "ip", "connector_id": "192.168.1.2", "extra": nil}).json(t)
	if c2["uuid"] != strings.ToLower(given) || c2["node_uuid"] != id || len(c2["extra"].(map[string]any)) != 0 {
		t.Fatalf("second connector: %v", c2)
	}

	for _, tc := range []struct {
		name   string
		path   string
		body   any
		status int
		want   string
	}{
		{"missing", "/v1/volume/connectors", map[string]any{"node_uuid": id, "type": "iqn"}, 400,
			"Schema error for connector: 'connector_id' is a required property"},
		{"unknown field", "/v1/volume/connectors", map[string]any{"node_uuid": id, "type": "iqn", "connector_id": "x", "name": "n"}, 400,
			"Schema error for connector: Additional properties are not allowed ('name' was unexpected)"},
		{"wrong type", "/v1/volume/connectors", map[string]any{"node_uuid": id, "type": 5, "connector_id": "x"}, 400,
			"Schema error for connector: 5 is not of type 'string'"},
		{"not an object", "/v1/volume/connectors", []any{}, 400, "Schema error for connector: [] is not of type 'object'"},
		{"node name", "/v1/volume/connectors", map[string]any{"node_uuid": "vol-a", "type": "iqn", "connector_id": "x"}, 400,
			"Expected UUID for node_uuid: vol-a"},
		{"bad uuid", "/v1/volume/connectors", map[string]any{"uuid": "x", "node_uuid": id, "type": "iqn", "connector_id": "x"}, 400,
			"Expected UUID for uuid: x"},
		{"unknown node", "/v1/volume/connectors", map[string]any{"node_uuid": "8a4a4a8f-7d3c-4a47-b0ba-1f0b6f7e0a11", "type": "iqn", "connector_id": "x"}, 400,
			"Invalid input for field/attribute node_uuid. Value: '8a4a4a8f-7d3c-4a47-b0ba-1f0b6f7e0a11'. "},
		{"duplicate type and id", "/v1/volume/connectors", map[string]any{"node_uuid": other, "type": "iqn", "connector_id": body["connector_id"]}, 409,
			"A volume connector with type iqn and connector ID iqn.2017-05.org.openstack:01:d9a51732c3f already exists."},
		{"duplicate uuid", "/v1/volume/connectors", map[string]any{"uuid": cid, "node_uuid": other, "type": "mac", "connector_id": "x"}, 409,
			"A volume connector with UUID " + cid + " already exists."},
		{"below a node", "/v1/nodes/" + id + "/volume/connectors", map[string]any{"node_uuid": id, "type": "mac", "connector_id": "x"}, 400,
			"Malformed request URI."},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			volFault(t, h.expect(tc.status, "POST", tc.path, latest, tc.body), tc.want)
		})
	}

	// Show.
	got := h.expect(200, "GET", "/v1/volume/connectors/"+cid, latest, nil).json(t)
	if got["connector_id"] != body["connector_id"] || got["links"].([]any)[1].(map[string]any)["href"] != h.srv.URL+"/volume/connectors/"+cid {
		t.Fatalf("show: %v", got)
	}
	r = h.expect(200, "GET", "/v1/volume/connectors/"+cid+"?fields=TYPE,node_uuid", latest, nil)
	if string(r.body) != fmt.Sprintf(`{"type": "iqn", "links": [{"href": "%s/v1/volume/connectors/%s", "rel": "self"}, {"href": "%s/volume/connectors/%s", "rel": "bookmark"}], "node_uuid": "%s"}`,
		h.srv.URL, cid, h.srv.URL, cid, id) {
		t.Fatalf("show fields: %s", r.body)
	}
	volFault(t, h.expect(400, "GET", "/v1/volume/connectors/"+cid+"?fields=bogus", latest, nil),
		"Schema error: 'bogus' is not one of ['connector_id', 'created_at', 'extra', 'links', 'node_uuid', 'type', 'updated_at', 'uuid']")
	volFault(t, h.expect(400, "GET", "/v1/volume/connectors/not-a-uuid", latest, nil), "Expected UUID for connector_uuid: not-a-uuid")
	missing := uuid.NewString()
	volFault(t, h.expect(404, "GET", "/v1/volume/connectors/"+missing, latest, nil), "Volume connector "+missing+" could not be found.")
	volFault(t, h.expect(400, "GET", "/v1/nodes/"+id+"/volume/connectors/"+cid, latest, nil), "Malformed request URI.")

	// List.
	list := h.expect(200, "GET", "/v1/volume/connectors", latest, nil).json(t)["connectors"].([]any)
	first := list[0].(map[string]any)
	if len(list) != 2 || first["uuid"] != cid || len(first) != 5 || first["connector_id"] == nil || first["extra"] != nil {
		t.Fatalf("list: %v", list)
	}
	detail := h.expect(200, "GET", "/v1/volume/connectors?detail=true", latest, nil).json(t)["connectors"].([]any)
	if len(detail[0].(map[string]any)) != 8 {
		t.Fatalf("detail: %v", detail)
	}
	for _, q := range []string{"?node=vol-a", "?node=" + id} {
		l := h.expect(200, "GET", "/v1/volume/connectors"+q, latest, nil).json(t)["connectors"].([]any)
		if len(l) != 2 {
			t.Fatalf("%s: %v", q, l)
		}
	}
	if l := h.expect(200, "GET", "/v1/volume/connectors?node=vol-b", latest, nil).json(t)["connectors"].([]any); len(l) != 0 {
		t.Fatalf("other node: %v", l)
	}
	if l := h.expect(200, "GET", "/v1/nodes/"+id+"/volume/connectors?fields=type", latest, nil).json(t)["connectors"].([]any); len(l) != 2 || len(l[0].(map[string]any)) != 2 {
		t.Fatalf("below node: %v", l)
	}
	page := h.expect(200, "GET", "/v1/volume/connectors?limit=1&sort_key=connector_id&sort_dir=desc", latest, nil).json(t)
	wantNext := fmt.Sprintf("%s/v1/volume/connectors?sort_key=connector_id&sort_dir=desc&fields=uuid,node_uuid,type,connector_id&limit=1&marker=%s", h.srv.URL, cid)
	if l := page["connectors"].([]any); len(l) != 1 || l[0].(map[string]any)["uuid"] != cid || page["next"] != wantNext {
		t.Fatalf("page: %v", page)
	}
	// castiron keeps the node filter in the next link (Ironic drops it).
	page = h.expect(200, "GET", "/v1/nodes/"+id+"/volume/connectors?limit=1&detail=True", latest, nil).json(t)
	if want := fmt.Sprintf("%s/v1/volume/connectors?sort_key=id&sort_dir=asc&detail=True&node=%s&limit=1&marker=%s", h.srv.URL, id, cid); page["next"] != want {
		t.Fatalf("next below node: %v, want %s", page["next"], want)
	}
	if l := h.expect(200, "GET", "/v1/volume/connectors?marker="+cid, latest, nil).json(t)["connectors"].([]any); len(l) != 1 || l[0].(map[string]any)["uuid"] != c2["uuid"] {
		t.Fatalf("after marker: %v", l)
	}
	listFaults(t, h, "/v1/volume/connectors", []listFault{
		{"?fields=uuid&detail=True", 400, "Can't fetch a subset of fields with 'detail' set"},
		{"?detail=maybe", 400, "Invalid detail: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"},
		{"?fields=uuid,nope", 400, "Schema error: 'nope' is not one of ['connector_id', 'created_at', 'extra', 'links', 'node_uuid', 'type', 'updated_at', 'uuid']"},
		{"?sort_key=extra", 400, "The sort_key value extra is an invalid field for sorting"},
		{"?sort_key=bogus", 400, `The sort_key value "bogus" is an invalid field for sorting`},
		{"?sort_dir=up", 400, "Schema error: 'up' is not one of ['asc', 'desc']"},
		{"?limit=0", 400, "Limit must be positive"},
		{"?limit=ten", 400, "Expected an integer for limit: ten"},
		{"?marker=nope", 400, "Expected UUID for marker: nope"},
		{"?marker=" + missing, 404, "Volume connector " + missing + " could not be found."},
		{"?node=" + missing, 404, "Node " + missing + " could not be found."},
		{"?node=no%20such", 400, "Expected UUID or name for node: no such"},
		{"?project=p1", 400, "Schema error: Additional properties are not allowed ('project' was unexpected)"},
	})
	// Ironic looks a parent node up by UUID only.
	volFault(t, h.expect(404, "GET", "/v1/nodes/vol-a/volume/connectors", latest, nil), "Node vol-a could not be found.")

	// Update: the node must be powered off (a new node has no power state).
	patch := []any{map[string]any{"op": "replace", "path": "/connector_id", "value": "iqn.new"}}
	volFault(t, h.expect(400, "PATCH", "/v1/volume/connectors/"+cid, latest, patch),
		fmt.Sprintf(`The requested action "volume connector update" can not be performed on node "%s" while it is in state "None".`, id))
	volPower(h, id, "power on")
	volFault(t, h.expect(400, "PATCH", "/v1/volume/connectors/"+cid, latest, patch),
		fmt.Sprintf(`The requested action "volume connector update" can not be performed on node "%s" while it is in state "power on".`, id))
	volPower(h, id, "power off")
	volReserve(h, id, volStr("other-host"))
	volFault(t, h.expect(409, "PATCH", "/v1/volume/connectors/"+cid, latest, patch),
		fmt.Sprintf("Node %s is locked by host other-host, please retry after the current operation is completed.", id))
	volReserve(h, id, nil)
	up := h.expect(200, "PATCH", "/v1/volume/connectors/"+cid, latest, append(patch,
		map[string]any{"op": "add", "path": "/extra/rack", "value": "r1"},
		map[string]any{"op": "remove", "path": "/extra/k"})).json(t)
	if up["connector_id"] != "iqn.new" || fmt.Sprint(up["extra"]) != "map[rack:r1]" || up["updated_at"] == nil {
		t.Fatalf("patched: %v", up)
	}
	for _, tc := range []struct {
		name   string
		patch  any
		status int
		want   string
	}{
		{"not a list", map[string]any{}, 400, "Schema error for patch: {} is not of type 'array'"},
		{"bad op", []any{map[string]any{"op": "move", "path": "/extra"}}, 400, "Schema error for patch: 'move' is not one of ['add', 'replace', 'remove']"},
		{"read-only field", []any{map[string]any{"op": "replace", "path": "/uuid", "value": "x"}}, 400,
			"Cannot patch /uuid. Only the following can be updated: connector_id, extra, node_uuid, type"},
		{"node not a uuid", []any{map[string]any{"op": "replace", "path": "/node_uuid", "value": "vol-b"}}, 400,
			"Expected a UUID for node_uuid, but received vol-b."},
		{"unknown node", []any{map[string]any{"op": "replace", "path": "/node_uuid", "value": missing}}, 400,
			"Unable to apply the requested node_uuid '" + missing + "'. Requested value was invalid."},
		{"node of another owner", []any{map[string]any{"op": "replace", "path": "/node_uuid", "value": other}}, 400,
			"Unable to apply the requested node_uuid '" + other + "'. Requested value was invalid."},
		{"remove required", []any{map[string]any{"op": "remove", "path": "/type"}}, 400, "Schema error for patch: 'type' is a required property"},
		{"null type", []any{map[string]any{"op": "replace", "path": "/type", "value": nil}}, 400, "Schema error for patch: None is not of type 'string'"},
		{"missing member", []any{map[string]any{"op": "remove", "path": "/extra/nope"}}, 400,
			"Couldn't apply patch '{'op': 'remove', 'path': '/extra/nope'}'. Reason: can't remove a non-existent object 'nope'"},
		{"duplicate", []any{map[string]any{"op": "replace", "path": "/type", "value": "ip"}, map[string]any{"op": "replace", "path": "/connector_id", "value": "192.168.1.2"}}, 409,
			"A volume connector with type ip and connector ID 192.168.1.2 already exists."},
		{"bad uuid", nil, 400, "Expected UUID for connector_uuid: nope"},
		{"unknown", nil, 404, "Volume connector " + missing + " could not be found."},
		{"below a node", nil, 400, "Malformed request URI."},
	} {
		t.Run("patch "+tc.name, func(t *testing.T) {
			path, p := "/v1/volume/connectors/"+cid, tc.patch
			switch tc.name {
			case "bad uuid":
				path = "/v1/volume/connectors/nope"
			case "unknown":
				path = "/v1/volume/connectors/" + missing
			case "below a node":
				path = "/v1/nodes/" + id + "/volume/connectors/" + cid
			}
			if p == nil {
				p = patch
			}
			volFault(t, h.expect(tc.status, "PATCH", path, latest, p), tc.want)
		})
	}
	// Moving it to another node checks that node.
	third := h.createNode(map[string]any{"name": "vol-c"})["uuid"].(string)
	move := []any{map[string]any{"op": "replace", "path": "/node_uuid", "value": third}}
	volFault(t, h.expect(400, "PATCH", "/v1/volume/connectors/"+cid, latest, move),
		fmt.Sprintf(`The requested action "volume connector update" can not be performed on node "%s" while it is in state "None".`, third))
	volPower(h, third, "power off")
	if moved := h.expect(200, "PATCH", "/v1/volume/connectors/"+cid, latest, move).json(t); moved["node_uuid"] != third {
		t.Fatalf("moved: %v", moved)
	}

	// Delete: only powered off, in enroll too (Ironic 21.4, which the stock
	// tempest plugin checks).
	c2node := c2["node_uuid"].(string)
	volPower(h, c2node, "power on")
	volFault(t, h.expect(400, "DELETE", "/v1/volume/connectors/"+c2["uuid"].(string), latest, nil),
		fmt.Sprintf(`The requested action "volume connector deletion" can not be performed on node "%s" while it is in state "power on".`, c2node))
	volPower(h, c2node, "power off")
	h.expect(204, "DELETE", "/v1/volume/connectors/"+c2["uuid"].(string), latest, nil)
	volFault(t, h.expect(404, "DELETE", "/v1/volume/connectors/"+c2["uuid"].(string), latest, nil),
		"Volume connector "+c2["uuid"].(string)+" could not be found.")
	avail := h.expect(201, "POST", "/v1/nodes", "1.10", map[string]any{"driver": "fake-hardware"}).json(t)["uuid"].(string)
	c3 := h.expect(201, "POST", "/v1/volume/connectors", latest, map[string]any{"node_uuid": avail, "type": "wwpn", "connector_id": "50:01"}).json(t)["uuid"].(string)
	volPower(h, avail, "power on")
	volFault(t, h.expect(400, "DELETE", "/v1/volume/connectors/"+c3, latest, nil),
		fmt.Sprintf(`The requested action "volume connector deletion" can not be performed on node "%s" while it is in state "power on".`, avail))
	volFault(t, h.expect(400, "DELETE", "/v1/nodes/"+avail+"/volume/connectors/"+c3, latest, nil), "Malformed request URI.")
	volPower(h, avail, "power off")
	volReserve(h, avail, volStr("other-host"))
	h.expect(409, "DELETE", "/v1/volume/connectors/"+c3, latest, nil)
	volReserve(h, avail, nil)
	h.expect(204, "DELETE", "/v1/volume/connectors/"+c3, latest, nil)
	volFault(t, h.expect(400, "DELETE", "/v1/volume/connectors/nope", latest, nil), "Expected UUID for connector_uuid: nope")

	// Deleting the node deletes its connectors.
	h.expect(204, "DELETE", "/v1/nodes/"+third, latest, nil)
	h.expect(404, "GET", "/v1/volume/connectors/"+cid, latest, nil)
}

func volStr(s string) *string { return &s }

func TestVolumeTargets(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "tgt"})
	body := map[string]any{
		"node_uuid": id, "volume_type": "iscsi", "boot_index": 0, "volume_id": "04452bed-5367-4202-8bf5-de4335ac56d2",
		"properties": map[string]any{"target_iqn": "iqn.x", "auth_password": "secret!", "nested": map[string]any{"token": "t"}},
	}
	r := h.expect(201, "POST", "/v1/volume/targets", latest, body)
	tg := r.json(t)
	tid := tg["uuid"].(string)
	props := tg["properties"].(map[string]any)
	if r.header.Get("Location") != h.srv.URL+"/v1/volume/targets/"+tid || tg["boot_index"] != float64(0) || len(tg) != 10 ||
		props["auth_password"] != "******" || props["target_iqn"] != "iqn.x" || props["nested"].(map[string]any)["token"] != "******" {
		t.Fatalf("created target: %s", r.body)
	}
	if !strings.Contains(string(r.body), `"boot_index": 0, "extra": {}, "properties": {`) {
		t.Fatalf("key order: %s", r.body)
	}
	second := h.expect(201, "POST", "/v1/volume/targets", latest, map[string]any{"node_uuid": id, "volume_type": "fibre_channel", "boot_index": 1, "volume_id": "v1"}).json(t)

	volFault(t, h.expect(409, "POST", "/v1/volume/targets", latest, map[string]any{"node_uuid": id, "volume_type": "iscsi", "boot_index": 1, "volume_id": "v2"}),
		"A volume target with boot index '1' for the same node already exists.")
	volFault(t, h.expect(400, "POST", "/v1/volume/targets", latest, map[string]any{"node_uuid": id, "volume_type": "iscsi", "boot_index": "2", "volume_id": "v2"}),
		"Schema error for target: '2' is not of type 'integer'")
	volFault(t, h.expect(400, "POST", "/v1/volume/targets", latest, map[string]any{"node_uuid": id, "volume_type": "iscsi", "boot_index": 2}),
		"Schema error for target: 'volume_id' is a required property")
	volFault(t, h.expect(400, "POST", "/v1/nodes/"+id+"/volume/targets", latest, map[string]any{"node_uuid": id, "volume_type": "iscsi", "boot_index": 2, "volume_id": "v2"}),
		"Malformed request URI.")

	list := h.expect(200, "GET", "/v1/volume/targets", latest, nil).json(t)["targets"].([]any)
	if len(list) != 2 || len(list[0].(map[string]any)) != 6 || list[0].(map[string]any)["volume_id"] != body["volume_id"] {
		t.Fatalf("list: %v", list)
	}
	byIndex := h.expect(200, "GET", "/v1/nodes/"+id+"/volume/targets?sort_key=boot_index&sort_dir=desc", latest, nil).json(t)["targets"].([]any)
	if byIndex[0].(map[string]any)["uuid"] != second["uuid"] {
		t.Fatalf("sorted: %v", byIndex)
	}
	volFault(t, h.expect(400, "GET", "/v1/volume/targets?sort_key=properties", latest, nil), "The sort_key value properties is an invalid field for sorting")
	volFault(t, h.expect(400, "GET", "/v1/volume/targets/"+tid+"?fields=type", latest, nil),
		"Schema error: 'type' is not one of ['boot_index', 'created_at', 'extra', 'links', 'node_uuid', 'properties', 'updated_at', 'uuid', 'volume_id', 'volume_type']")
	if got := h.expect(200, "GET", "/v1/volume/targets/"+tid, latest, nil).json(t); got["properties"].(map[string]any)["auth_password"] != "******" {
		t.Fatalf("show: %v", got)
	}

	volPower(h, id, "power off")
	p := []any{map[string]any{"op": "replace", "path": "/boot_index", "value": 1}}
	volFault(t, h.expect(409, "PATCH", "/v1/volume/targets/"+tid, latest, p), "A volume target with boot index '1' for the same node already exists.")
	volFault(t, h.expect(400, "PATCH", "/v1/volume/targets/"+tid, latest, []any{map[string]any{"op": "replace", "path": "/boot_index", "value": "x"}}),
		"Schema error for patch: 'x' is not of type 'integer'")
	volFault(t, h.expect(400, "PATCH", "/v1/volume/targets/"+tid, latest, []any{map[string]any{"op": "replace", "path": "/created_at", "value": "x"}}),
		"Cannot patch /created_at. Only the following can be updated: boot_index, extra, node_uuid, properties, volume_id, volume_type")
	up := h.expect(200, "PATCH", "/v1/volume/targets/"+tid, latest, []any{
		map[string]any{"op": "replace", "path": "/boot_index", "value": 5},
		map[string]any{"op": "remove", "path": "/properties"},
		map[string]any{"op": "add", "path": "/extra/a", "value": 1},
	}).json(t)
	if up["boot_index"] != float64(5) || len(up["properties"].(map[string]any)) != 0 || up["extra"].(map[string]any)["a"] != float64(1) {
		t.Fatalf("patched: %v", up)
	}
	volPower(h, id, "power on")
	// Powered on: no deletion, in enroll too.
	volFault(t, h.expect(400, "DELETE", "/v1/volume/targets/"+tid, latest, nil),
		fmt.Sprintf(`The requested action "volume target deletion" can not be performed on node "%s" while it is in state "power on".`, id))
	volPower(h, id, "power off")
	h.expect(204, "DELETE", "/v1/volume/targets/"+tid, latest, nil)
	volPower(h, id, "power on")
	volFault(t, h.expect(404, "DELETE", "/v1/volume/targets/"+tid, latest, nil), "Volume target "+tid+" could not be found.")
	volFault(t, h.expect(400, "PATCH", "/v1/volume/targets/"+second["uuid"].(string), latest, p),
		fmt.Sprintf(`The requested action "volume target update" can not be performed on node "%s" while it is in state "power on".`, id))
	volFault(t, h.expect(400, "GET", "/v1/volume/targets/detail", latest, nil), "Expected UUID for target_uuid: detail")
	h.expect(404, "GET", "/v1/volume/targets", "1.31", nil)
}
