package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"castiron/engine"
	"castiron/storage"
)

// addEvents records n events in the node's history through the store.
func addEvents(t *testing.T, h *apiHarness, nodeUUID string, n int, msg string) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		e := &storage.Event{NodeUUID: nodeUUID, Conductor: "test-conductor", EventType: "provisioning",
			Severity: "INFO", Event: fmt.Sprintf("%s %d", msg, i), User: "admin"}
		if err := h.store.AddEvent(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.UUID)
	}
	return ids
}

func TestNodeHistory(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "hist"})
	base := "/v1/nodes/" + id + "/history"

	h.expect(http.StatusNotFound, "GET", base, "1.77", nil)
	empty := h.expect(http.StatusOK, "GET", base, "1.78", nil).json(t)
	if l := empty["history"].([]any); len(l) != 0 {
		t.Fatalf("new node history = %v, want empty", l)
	}

	long := strings.Repeat("x", 300)
	ids := addEvents(t, h, id, 3, "event")
	addEvents(t, h, id, 1, long)

	list := h.expect(http.StatusOK, "GET", "/v1/nodes/hist/history", latest, nil).json(t)
	items := list["history"].([]any)
	if len(items) != 4 {
		t.Fatalf("history has %d entries, want 4: %v", len(items), list)
	}
	first := items[0].(map[string]any)
	if first["uuid"] != ids[0] || first["event"] != "event 0" || first["severity"] != "INFO" || first["created_at"] == nil {
		t.Errorf("first entry = %v", first)
	}
	for _, k := range []string{"event_type", "conductor", "user"} {
		if _, has := first[k]; has {
			t.Errorf("summary entry has %s: %v", k, first)
		}
	}
	links := first["links"].([]any)
	if len(links) != 1 || !strings.HasSuffix(links[0].(map[string]any)["href"].(string), "/v1/nodes/"+id+"/history/"+ids[0]) {
		t.Errorf("links = %v", links)
	}
	if ev := items[3].(map[string]any)["event"].(string); len(ev) != 254 || !strings.HasSuffix(ev, "...") {
		t.Errorf("long event not truncated to 251+...: %d chars", len(ev))
	}
	if _, has := list["next"]; has {
		t.Errorf("unexpected next without limit: %v", list["next"])
	}

	detail := h.expect(http.StatusOK, "GET", base+"?detail=true", latest, nil).json(t)
	d0 := detail["history"].([]any)[0].(map[string]any)
	if d0["event_type"] != "provisioning" || d0["conductor"] != "test-conductor" || d0["user"] != "admin" {
		t.Errorf("detail entry = %v", d0)
	}
	if ev := detail["history"].([]any)[3].(map[string]any)["event"].(string); ev != long+" 0" {
		t.Errorf("detail event truncated: %d chars", len(ev))
	}

	page := h.expect(http.StatusOK, "GET", base+"?limit=2", latest, nil).json(t)
	if l := page["history"].([]any); len(l) != 2 || l[1].(map[string]any)["uuid"] != ids[1] {
		t.Fatalf("page 1 = %v", l)
	}
	next, _ := page["next"].(string)
	if !strings.Contains(next, "/v1/nodes/"+id+"/history?") || !strings.Contains(next, "marker="+ids[1]) || !strings.Contains(next, "limit=2") {
		t.Fatalf("next = %q", next)
	}
	page2 := h.expect(http.StatusOK, "GET", strings.TrimPrefix(next, h.srv.URL), latest, nil).json(t)
	if l := page2["history"].([]any); len(l) != 2 || l[0].(map[string]any)["uuid"] != ids[2] {
		t.Fatalf("page 2 = %v", l)
	}
	desc := h.expect(http.StatusOK, "GET", base+"?sort_dir=desc&limit=1", latest, nil).json(t)
	if l := desc["history"].([]any); l[0].(map[string]any)["event"] != long[:251]+"..." {
		t.Errorf("desc first = %v", l[0])
	}

	one := h.expect(http.StatusOK, "GET", base+"/"+ids[2], latest, nil).json(t)
	if one["uuid"] != ids[2] || one["event"] != "event 2" || one["user"] != "admin" || one["event_type"] != "provisioning" {
		t.Errorf("one = %v", one)
	}
	h.expect(http.StatusNotFound, "GET", base+"/"+ids[2], "1.77", nil)

	for _, c := range []struct {
		path   string
		status int
		msg    string
	}{
		{base + "?detail=maybe", 400, "Invalid detail: Unrecognized value 'maybe'"},
		{base + "?marker=nope", 400, "Expected UUID for marker: nope"},
		{base + "?marker=" + "6f1a2c3e-0000-4000-8000-000000000000", 404, "Node history record 6f1a2c3e-0000-4000-8000-000000000000 could not be found."},
		{base + "?limit=0", 400, "Limit must be positive"},
		{base + "?sort_dir=up", 400, "Invalid sort direction: up."},
		{base + "/6f1a2c3e-0000-4000-8000-000000000001", 404, "Node history record 6f1a2c3e-0000-4000-8000-000000000001 could not be found."},
		{"/v1/nodes/nosuch/history", 404, "Node nosuch could not be found."},
	} {
		r := h.expect(c.status, "GET", c.path, latest, nil)
		if got := r.faultstring(t); !strings.HasPrefix(got, c.msg) {
			t.Errorf("GET %s: %q, want prefix %q", c.path, got, c.msg)
		}
	}

	// Another node's event is not found under this node.
	other := h.createNode(map[string]any{})["uuid"].(string)
	oid := addEvents(t, h, other, 1, "other")[0]
	h.expect(http.StatusNotFound, "GET", base+"/"+oid, latest, nil)

	// Real transitions are recorded by the engine.
	if r := h.provision(id, "manage", nil); r.status != http.StatusAccepted {
		t.Fatalf("manage: %d %s", r.status, r.body)
	}
	h.waitState(id, "manageable")
	all := h.expect(http.StatusOK, "GET", base+"?detail=true", latest, nil).json(t)["history"].([]any)
	if len(all) <= 4 {
		t.Errorf("manage recorded no history: %v", all)
	}
}

func TestNodeInventory(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{})
	path := "/v1/nodes/" + id + "/inventory"

	h.expect(http.StatusNotFound, "GET", path, "1.80", nil)
	r := h.expect(http.StatusNotFound, "GET", path, "1.81", nil)
	if got, want := r.faultstring(t), "Node inventory record for node "+id+" could not be found."; got != want {
		t.Errorf("inventory 404 = %q, want %q", got, want)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/inventory", latest, nil)

	inv := map[string]any{"cpu": map[string]any{"count": int64(4)}, "interfaces": []any{map[string]any{"mac_address": "52:54:00:12:34:56"}}}
	_, err := h.store.UpdateNode(context.Background(), id, func(n *storage.Node) (*storage.Event, error) {
		n.DriverInternalInfo[engine.InventoryKey] = map[string]any{"inventory": inv, "plugin_data": map[string]any{"root_disk": "sda"}}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := h.expect(http.StatusOK, "GET", path, latest, nil).json(t)
	if cpu := got["inventory"].(map[string]any)["cpu"].(map[string]any); cpu["count"] != float64(4) {
		t.Errorf("inventory = %v", got)
	}
	if pd := got["plugin_data"].(map[string]any); pd["root_disk"] != "sda" {
		t.Errorf("plugin_data = %v", got)
	}
}

func TestNodeBIOSAndFirmware(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{})

	h.expect(http.StatusNotFound, "GET", "/v1/nodes/"+id+"/bios", "1.39", nil)
	if b := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios", "1.40", nil).json(t); len(b["bios"].([]any)) != 0 {
		t.Errorf("bios = %v", b)
	}
	h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/bios?detail=true", latest, nil)
	for _, c := range []struct{ path, ver, msg string }{
		{"/bios?detail=true", "1.73", "Invalid query parameter ?detail=True received."},
		{"/bios?fields=name", "1.73", "Invalid query parameter ?fields=['name'] received."},
		{"/bios?fields=name&detail=true", latest, "Can not specify ?detail=True and fields in the same request."},
		{"/bios/ProcVirtualization", latest, "Node " + id + " doesn't have a BIOS setting 'ProcVirtualization'"},
		{"/firmware?fields=component&detail=1", latest, "Can not specify ?detail=True and fields in the same request."},
		{"/firmware?fields=component,vendor", "1.113", "Fields vendor are not allowed in this API version. They require at least API version 1.114."},
	} {
		status := http.StatusBadRequest
		if strings.HasPrefix(c.path, "/bios/") {
			status = http.StatusNotFound
		}
		r := h.expect(status, "GET", "/v1/nodes/"+id+c.path, c.ver, nil)
		if got := r.faultstring(t); got != c.msg {
			t.Errorf("GET %s: %q, want %q", c.path, got, c.msg)
		}
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/"+id+"/bios/X", "1.39", nil)
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/bios", latest, nil)

	h.expect(http.StatusNotFound, "GET", "/v1/nodes/"+id+"/firmware", "1.85", nil)
	if f := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/firmware", "1.86", nil).json(t); len(f["firmware"].([]any)) != 0 {
		t.Errorf("firmware = %v", f)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/firmware", latest, nil)
}

func TestNodeChildren(t *testing.T) {
	h, parent := apiWithNode(t, map[string]any{"name": "parent"})
	c1 := h.createNode(map[string]any{"parent_node": parent})["uuid"].(string)
	c2 := h.createNode(map[string]any{"parent_node": parent})["uuid"].(string)
	h.createNode(map[string]any{})

	h.expect(http.StatusNotFound, "GET", "/v1/nodes/"+parent+"/children", "1.82", nil)
	got := h.expect(http.StatusOK, "GET", "/v1/nodes/parent/children", "1.83", nil).json(t)
	kids := got["children"].([]any)
	if len(kids) != 2 || kids[0] != c1 || kids[1] != c2 {
		t.Errorf("children = %v, want [%s %s]", kids, c1, c2)
	}
	l := got["links"].(map[string]any)
	if l["rel"] != "children" || !strings.HasSuffix(l["href"].(string), "/v1/nodes?parent_node="+parent) {
		t.Errorf("links = %v", l)
	}
	if none := h.expect(http.StatusOK, "GET", "/v1/nodes/"+c1+"/children", latest, nil).json(t); len(none["children"].([]any)) != 0 {
		t.Errorf("leaf children = %v", none)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/children", latest, nil)
}

func TestVendorPassthru(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{})

	for _, p := range []string{"/v1/nodes/" + id + "/vendor_passthru/methods", "/v1/drivers/fake-hardware/vendor_passthru/methods"} {
		if m := h.expect(http.StatusOK, "GET", p, "1.1", nil).json(t); len(m) != 0 {
			t.Errorf("%s = %v, want {}", p, m)
		}
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/vendor_passthru/methods", latest, nil)
	r := h.expect(http.StatusNotFound, "GET", "/v1/drivers/nosuch/vendor_passthru/methods", latest, nil)
	if got := r.faultstring(t); got != "Could not find the following driver(s) or hardware type(s): nosuch." {
		t.Errorf("unknown driver: %q", got)
	}
	for _, c := range []struct{ method, path, msg string }{
		{"POST", "/v1/nodes/" + id + "/vendor_passthru?method=first_method", "No handler for method first_method"},
		{"GET", "/v1/nodes/" + id + "/vendor_passthru?method=x", "No handler for method x"},
		{"PUT", "/v1/nodes/" + id + "/vendor_passthru", "Method not specified"},
		{"POST", "/v1/drivers/fake-hardware/vendor_passthru?method=lookup", "No handler for method lookup"},
		{"DELETE", "/v1/drivers/manual-management/vendor_passthru", "Method not specified"},
	} {
		r := h.expect(http.StatusBadRequest, c.method, c.path, latest, map[string]any{"bar": "baz"})
		if got := r.faultstring(t); got != c.msg {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.msg)
		}
	}
	h.expect(http.StatusNotFound, "POST", "/v1/nodes/nosuch/vendor_passthru?method=x", latest, nil)
}

func TestNodeConsole(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "con"})
	path := "/v1/nodes/" + id + "/states/console"

	c := h.expect(http.StatusOK, "GET", path, "1.1", nil).json(t)
	if c["console_enabled"] != false || c["console_info"] != nil {
		t.Errorf("initial console = %v", c)
	}
	r := h.expect(http.StatusAccepted, "PUT", "/v1/nodes/con/states/console", latest, map[string]any{"enabled": true})
	if loc := r.header.Get("Location"); !strings.HasSuffix(loc, "/v1/nodes/con/states/console") {
		t.Errorf("Location = %q", loc)
	}
	c = h.expect(http.StatusOK, "GET", path, latest, nil).json(t)
	if c["console_enabled"] != true || c["console_info"] == nil {
		t.Errorf("enabled console = %v", c)
	}
	if n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t); n["console_enabled"] != true {
		t.Errorf("node console_enabled = %v", n["console_enabled"])
	}
	// Ironic also routes GET /v1/nodes/states/console/{ident}.
	if q := h.expect(http.StatusOK, "GET", "/v1/nodes/states/console/"+id, latest, nil).json(t); q["console_enabled"] != true {
		t.Errorf("quirk route = %v", q)
	}
	h.expect(http.StatusAccepted, "PUT", path, latest, map[string]any{"enabled": true}) // no-op
	h.expect(http.StatusAccepted, "PUT", path, latest, map[string]any{"enabled": "false"})
	if c = h.expect(http.StatusOK, "GET", path, latest, nil).json(t); c["console_enabled"] != false {
		t.Errorf("disabled console = %v", c)
	}

	for _, cs := range []struct {
		body any
		msg  string
	}{
		{map[string]any{}, `Missing argument: "enabled"`},
		{map[string]any{"enabled": "maybe"}, "Invalid enabled: Unrecognized value 'maybe'"},
		{map[string]any{"enabled": true, "mode": "x"}, `Unknown argument: "mode"`},
	} {
		r := h.expect(http.StatusBadRequest, "PUT", path, latest, cs.body)
		if got := r.faultstring(t); !strings.HasPrefix(got, cs.msg) {
			t.Errorf("PUT %v: %q, want %q", cs.body, got, cs.msg)
		}
	}

	nc := h.createNode(map[string]any{"console_interface": "no-console"})["uuid"].(string)
	if c := h.expect(http.StatusOK, "GET", "/v1/nodes/"+nc+"/states/console", latest, nil).json(t); c["console_enabled"] != false {
		t.Errorf("no-console GET = %v", c)
	}
	r = h.expect(http.StatusBadRequest, "PUT", "/v1/nodes/"+nc+"/states/console", latest, map[string]any{"enabled": true})
	if got := r.faultstring(t); got != "Driver fake-hardware does not support console (disabled or not implemented)." {
		t.Errorf("no-console PUT: %q", got)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/states/console", latest, nil)
}

func TestNodeRAID(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{})
	path := "/v1/nodes/" + id + "/states/raid"
	good := map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": 100, "raid_level": "1", "is_root_volume": true},
		map[string]any{"size_gb": "MAX", "raid_level": "5", "disk_type": "ssd"},
	}}

	h.expect(http.StatusNotAcceptable, "PUT", path, "1.11", good)
	h.expect(http.StatusNoContent, "PUT", path, "1.12", good)
	st := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/states", latest, nil).json(t)
	disks := st["target_raid_config"].(map[string]any)["logical_disks"].([]any)
	if len(disks) != 2 || disks[0].(map[string]any)["size_gb"] != float64(100) || disks[1].(map[string]any)["size_gb"] != "MAX" {
		t.Errorf("target_raid_config = %v", st["target_raid_config"])
	}
	h.expect(http.StatusNoContent, "PUT", path, latest, map[string]any{})
	n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)
	if trc := n["target_raid_config"].(map[string]any); len(trc) != 0 {
		t.Errorf("cleared target_raid_config = %v", trc)
	}

	disk := func(kv ...any) map[string]any {
		d := map[string]any{"size_gb": 10, "raid_level": "0"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(d, kv[i].(string))
			} else {
				d[kv[i].(string)] = kv[i+1]
			}
		}
		return map[string]any{"logical_disks": []any{d}}
	}
	for _, c := range []struct {
		body any
		msg  string
	}{
		{map[string]any{"foo": 1}, "RAID config validation error: 'logical_disks' is a required property"},
		{map[string]any{"logical_disks": "x"}, "RAID config validation error: 'x' is not of type 'array'"},
		{map[string]any{"logical_disks": []any{}}, "RAID config validation error: [] should be non-empty"},
		{map[string]any{"logical_disks": []any{}, "x": 1}, "RAID config validation error: Additional properties are not allowed ('x' was unexpected)"},
		{disk("raid_level", nil), "RAID config validation error: 'raid_level' is a required property"},
		{disk("size_gb", nil), "RAID config validation error: 'size_gb' is a required property"},
		{disk("raid_level", "7"), "RAID config validation error: '7' is not one of ['JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0']"},
		{disk("size_gb", "big"), "RAID config validation error: 'big' is not one of ['MAX']"}, // jsonschema descends into the anyOf branch whose type fits,
		{disk("colour", "red"), "RAID config validation error: Additional properties are not allowed ('colour' was unexpected)"},
		{map[string]any{"logical_disks": []any{
			map[string]any{"size_gb": 1, "raid_level": "0", "is_root_volume": true},
			map[string]any{"size_gb": 1, "raid_level": "0", "is_root_volume": true},
		}}, "Raid config cannot have more than one root volume. 2 root volumes were specified"},
		{[]any{1}, "Schema error for target_raid_config: [1] is not of type 'object'"},
	} {
		r := h.expect(http.StatusBadRequest, "PUT", path, latest, c.body)
		if got := r.faultstring(t); got != c.msg {
			t.Errorf("PUT %v: %q, want %q", c.body, got, c.msg)
		}
	}

	nr := h.createNode(map[string]any{"raid_interface": "no-raid"})["uuid"].(string)
	r := h.expect(http.StatusNotFound, "PUT", "/v1/nodes/"+nr+"/states/raid", latest, good)
	if got := r.faultstring(t); got != "Driver fake-hardware does not support raid (disabled or not implemented)." {
		t.Errorf("no-raid: %q", got)
	}
	h.expect(http.StatusNoContent, "PUT", "/v1/nodes/"+nr+"/states/raid", latest, map[string]any{})
	h.expect(http.StatusNotFound, "PUT", "/v1/nodes/nosuch/states/raid", latest, good)

	props := h.expect(http.StatusOK, "GET", "/v1/drivers/fake-hardware/raid/logical_disk_properties", "1.12", nil).json(t)
	if len(props) != 10 || !strings.HasSuffix(props["raid_level"].(string), "Required.") {
		t.Errorf("logical_disk_properties = %v", props)
	}
	h.expect(http.StatusOK, "GET", "/v1/drivers/manual-management/raid/logical_disk_properties", latest, nil)
	h.expect(http.StatusNotAcceptable, "GET", "/v1/drivers/fake-hardware/raid/logical_disk_properties", "1.11", nil)
	h.expect(http.StatusNotFound, "GET", "/v1/drivers/nosuch/raid/logical_disk_properties", latest, nil)
}

func TestNodeVIFs(t *testing.T) {
	h := newAPI(t)
	addPort := func(node, mac string, pxe bool) string {
		return h.expect(http.StatusCreated, "POST", "/v1/ports", latest,
			map[string]any{"node_uuid": node, "address": mac, "pxe_enabled": pxe}).json(t)["uuid"].(string)
	}
	vifs := func(node string) []any {
		return h.expect(http.StatusOK, "GET", "/v1/nodes/"+node+"/vifs", latest, nil).json(t)["vifs"].([]any)
	}

	// noop network: Ironic's NoopNetwork attaches nothing and lists none.
	noop := h.createNode(map[string]any{})["uuid"].(string)
	addPort(noop, "52:54:00:00:00:01", true)
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/"+noop+"/vifs", "1.27", nil)
	h.expect(http.StatusNoContent, "POST", "/v1/nodes/"+noop+"/vifs", "1.28", map[string]any{"id": "vif-a"})
	if l := vifs(noop); len(l) != 0 {
		t.Errorf("noop vifs = %v", l)
	}
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/"+noop+"/vifs/vif-a", latest, nil)

	// flat network: VIFs go to free ports, PXE-enabled ones first.
	id := h.createNode(map[string]any{"network_interface": "flat"})["uuid"].(string)
	r := h.expect(http.StatusBadRequest, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-a"})
	if got := r.faultstring(t); got != "Unable to attach VIF vif-a, not enough free physical ports." {
		t.Errorf("no ports: %q", got)
	}
	p1 := addPort(id, "52:54:00:00:01:01", false)
	p2 := addPort(id, "52:54:00:00:01:02", true)
	h.expect(http.StatusNoContent, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-a"})
	port := h.expect(http.StatusOK, "GET", "/v1/ports/"+p2, latest, nil).json(t)
	if port["internal_info"].(map[string]any)["tenant_vif_port_id"] != "vif-a" {
		t.Errorf("vif-a not on the PXE port: %v", port["internal_info"])
	}
	r = h.expect(http.StatusConflict, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-a"})
	if got := r.faultstring(t); got != "Unable to attach VIF because VIF vif-a is already attached to Ironic Port "+p2 {
		t.Errorf("twice: %q", got)
	}
	h.expect(http.StatusNoContent, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-b"})
	port = h.expect(http.StatusOK, "GET", "/v1/ports/"+p1, latest, nil).json(t)
	if port["internal_info"].(map[string]any)["tenant_vif_port_id"] != "vif-b" {
		t.Errorf("vif-b not on port 1: %v", port["internal_info"])
	}
	if l := vifs(id); len(l) != 2 {
		t.Errorf("vifs = %v", l)
	}
	r = h.expect(http.StatusBadRequest, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-c"})
	if got := r.faultstring(t); got != "Unable to attach VIF vif-c, not enough free physical ports." {
		t.Errorf("full: %q", got)
	}

	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/"+id+"/vifs/vif-a", latest, nil)
	if l := vifs(id); len(l) != 1 || l[0].(map[string]any)["id"] != "vif-b" {
		t.Errorf("after detach vifs = %v", l)
	}
	r = h.expect(http.StatusBadRequest, "DELETE", "/v1/nodes/"+id+"/vifs/vif-a", latest, nil)
	if got := r.faultstring(t); got != "Unable to detach VIF vif-a from node "+id+" because it is not attached to it." {
		t.Errorf("detach twice: %q", got)
	}
	// 1.67: a chosen port.
	r = h.expect(http.StatusBadRequest, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-c", "port_uuid": p1})
	if got := r.faultstring(t); got != "Unable to attach VIF vif-c, not enough free physical ports." {
		t.Errorf("busy chosen port: %q", got)
	}
	h.expect(http.StatusNoContent, "POST", "/v1/nodes/"+id+"/vifs", latest, map[string]any{"id": "vif-c", "port_uuid": p2})

	for _, c := range []struct {
		body any
		msg  string
	}{
		{map[string]any{}, "Schema error for vif: 'id' is a required property"},
		{map[string]any{"id": 5}, "Schema error for vif: 5 is not of type 'string'"},
		{map[string]any{"id": "x", "port_uuid": p1, "portgroup_uuid": p2}, "Cannot specify both port_uuid and portgroup_uuid"},
	} {
		r := h.expect(http.StatusBadRequest, "POST", "/v1/nodes/"+id+"/vifs", latest, c.body)
		if got := r.faultstring(t); got != c.msg {
			t.Errorf("POST %v: %q, want %q", c.body, got, c.msg)
		}
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/nosuch/vifs", latest, nil)
}
