package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"castiron/storage"
)

func TestVersionNegotiation(t *testing.T) {
	h := newAPI(t)
	max := fmt.Sprintf("1.%d", MaxMinor)
	cases := []struct {
		name, header, value string
		status              int
		wantVer             string
		rangeHdrs           bool
		desc                string
	}{
		{"none is 1.1", "", "", 200, "1.1", true, ""},
		{"latest", hdrVersion, "latest", 200, max, true, ""},
		{"explicit", hdrVersion, "1.42", 200, "1.42", true, ""},
		{"standard header", hdrStdVersion, "baremetal 1.60", 200, "1.60", true, ""},
		{"too low", hdrVersion, "1.0", 406, "", true, "Version 1.0 was requested but the minor version is not supported by this service. The supported version range is: [1.1, " + max + "]."},
		{"too high", hdrVersion, "1.999", 406, "", true, "Version 1.999 was requested but the minor version is not supported by this service. The supported version range is: [1.1, " + max + "]."},
		{"major 2", hdrVersion, "2.1", 406, "", true, "Mutually exclusive versions requested. Version 2.1 requested but not supported by this service. The supported version range is: [1.1, " + max + "]."},
		{"garbage", hdrVersion, "abc", 406, "", false, "Invalid value for X-OpenStack-Ironic-API-Version header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", h.srv.URL+"/v1/nodes", nil)
			if c.header != "" {
				req.Header.Set(c.header, c.value)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.status {
				t.Fatalf("status %d, want %d", res.StatusCode, c.status)
			}
			if got := res.Header.Get(hdrVersion); got != c.wantVer {
				t.Errorf("version header %q, want %q", got, c.wantVer)
			}
			if has := res.Header.Get(hdrMaxVersion) == max && res.Header.Get(hdrMinVersion) == "1.1"; has != c.rangeHdrs {
				t.Errorf("min/max headers present=%v, want %v", has, c.rangeHdrs)
			}
		})
		if c.desc != "" {
			r := h.do("GET", "/v1/nodes", "", nil)
			req, _ := http.NewRequest("GET", h.srv.URL+"/v1/nodes", nil)
			req.Header.Set(c.header, c.value)
			res, _ := http.DefaultClient.Do(req)
			b := make([]byte, 4096)
			n, _ := res.Body.Read(b)
			res.Body.Close()
			r = resp{status: res.StatusCode, body: b[:n]}
			if got := r.faultstring(t); got != c.desc {
				t.Errorf("%s: description %q, want %q", c.name, got, c.desc)
			}
		}
	}
}

func TestRootAndV1Documents(t *testing.T) {
	h := newAPI(t)
	root := h.expect(200, "GET", "/", "", nil).json(t)
	if root["name"] != "OpenStack Ironic API" || root["default_version"].(map[string]any)["version"] != fmt.Sprintf("1.%d", MaxMinor) {
		t.Fatalf("root = %v", root)
	}
	v1 := h.expect(200, "GET", "/v1", latest, nil).json(t)
	for _, k := range []string{"nodes", "ports", "drivers", "conductors", "media_types", "links"} {
		if _, ok := v1[k]; !ok {
			t.Errorf("GET /v1 lacks %q", k)
		}
	}
	old := h.expect(200, "GET", "/v1/", "", nil).json(t)
	if _, ok := old["conductors"]; ok {
		t.Error("GET /v1 at 1.1 links conductors (1.49)")
	}
}

func TestRoutingErrorsAreIronicJSON(t *testing.T) {
	h := newAPI(t)
	r := h.expect(404, "GET", "/v1/bogus", latest, nil)
	if string(r.body) != `{"error_message": "{\"code\": 404, \"title\": \"Not Found\", \"description\": \"\"}"}` {
		t.Fatalf("404 body %s", r.body)
	}
	r = h.expect(405, "POST", "/v1/nodes/detail", latest, nil)
	if r.header.Get("Allow") == "" || !strings.Contains(string(r.body), `\"code\": 405`) {
		t.Fatalf("405: Allow=%q body %s", r.header.Get("Allow"), r.body)
	}
	h.expect(404, "GET", "/v1/conductors", "1.48", nil)
	if got := h.do("GET", "/v1/conductors", "1.48", nil).faultstring(t); got != "Resource could not be found." {
		t.Fatalf("hidden endpoint message %q", got)
	}
}

func TestNodeCreateAndValidation(t *testing.T) {
	h := newAPI(t)
	r := h.expect(201, "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "name": "node-a", "properties": map[string]any{"cpus": 4}})
	n := r.json(t)
	if n["provision_state"] != "enroll" || n["power_state"] != nil || n["conductor"] != "test-conductor" {
		t.Fatalf("created node %v", n)
	}
	if loc := r.header.Get("Location"); loc != h.srv.URL+"/v1/nodes/"+n["uuid"].(string) {
		t.Fatalf("Location %q", loc)
	}
	if n["properties"].(map[string]any)["cpus"] != float64(4) {
		t.Fatalf("properties %v", n["properties"])
	}
	// Before 1.11 nodes start available; 1.1 shows available as null.
	old := h.expect(201, "POST", "/v1/nodes", "1.10", map[string]any{"driver": "fake-hardware"}).json(t)
	if old["provision_state"] != "available" {
		t.Fatalf("1.10 create: %v", old["provision_state"])
	}
	if got := h.expect(200, "GET", "/v1/nodes/"+old["uuid"].(string), "1.1", nil).json(t); got["provision_state"] != nil {
		t.Fatalf("1.1 shows %v, want null", got["provision_state"])
	}
	if _, has := h.expect(200, "GET", "/v1/nodes/"+n["uuid"].(string), "1.4", nil).json(t)["name"]; has { // by name it is a 404 before 1.5
		t.Fatal("name visible at 1.4")
	}

	bad := []struct {
		name   string
		ver    string
		body   any
		status int
		msg    string
	}{
		{"unknown field", latest, map[string]any{"driver": "fake-hardware", "bogus_field": 1}, 400, "Schema error for node: Additional properties are not allowed ('bogus_field' was unexpected)"},
		{"empty", latest, "", 400, "Schema error for node: 'driver' is a required property"},
		{"array", latest, "[]", 400, "Schema error for node: [] is not of type 'object'"},
		{"malformed", latest, `{"driver": `, 400, ""},
		{"not json", latest, "hello", 400, ""},
		{"unknown driver", latest, map[string]any{"driver": "no-such-driver"}, 400, `No valid host was found. Reason: No conductor service registered which supports driver no-such-driver for conductor group "".`},
		{"duplicate name", latest, map[string]any{"driver": "fake-hardware", "name": "node-a"}, 409, "A node with name node-a already exists."},
		{"field above version", "1.49", map[string]any{"driver": "fake-hardware", "owner": "x"}, 406, ""},
		{"bad interface", latest, map[string]any{"driver": "fake-hardware", "deploy_interface": "bogus"}, 400, ""},
		{"bad name", latest, map[string]any{"driver": "fake-hardware", "name": "has space"}, 400, ""},
		{"read-only field", latest, map[string]any{"driver": "fake-hardware", "provision_state": "active"}, 400, ""},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := h.expect(c.status, "POST", "/v1/nodes", c.ver, c.body)
			if c.msg != "" && r.faultstring(t) != c.msg {
				t.Fatalf("message %q, want %q", r.faultstring(t), c.msg)
			}
		})
	}
	big := `{"driver": "fake-hardware", "extra": {"x": "` + strings.Repeat("a", MaxBodyBytes) + `"}}`
	h.expect(413, "POST", "/v1/nodes", latest, big)
}

func TestNodeListFiltersFieldsAndPaging(t *testing.T) {
	h := newAPI(t)
	var uuids []string
	for i := 0; i < 5; i++ {
		n := h.createNode(map[string]any{"name": fmt.Sprintf("n%d", i), "description": fmt.Sprintf("rack %d", i%2), "resource_class": "gold"})
		uuids = append(uuids, n["uuid"].(string))
	}
	h.expect(202, "PUT", "/v1/nodes/n0/maintenance", latest, map[string]any{"reason": "fan"})

	list := func(q string) []any {
		return h.expect(200, "GET", "/v1/nodes"+q, latest, nil).json(t)["nodes"].([]any)
	}
	for _, c := range []struct {
		query string
		want  int
		fatal string
	}{
		{"", 5, "%d nodes"},
		{"?maintenance=true", 1, "maintenance filter: %d"},
		{"?description_contains=rack%201", 2, "description_contains: %d"},
		{"?conductor=test-conductor", 5, "conductor filter: %d"},
		{"?conductor=nobody", 0, "unknown conductor filter: %d"},
		{"?provision_state=enroll&driver=fake-hardware&resource_class=gold", 5, "combined filters: %d"},
	} {
		if got := len(list(c.query)); got != c.want {
			t.Fatalf(c.fatal, got)
		}
	}
	first := list("")[0].(map[string]any)
	if len(first) != 7 {
		t.Fatalf("summary has %d fields: %v", len(first), first)
	}
	detail := list("/detail")[0].(map[string]any)
	if _, ok := detail["driver_info"]; !ok {
		t.Fatal("detail lacks driver_info")
	}
	f := list("?fields=uuid,name,provision_state")[0].(map[string]any)
	if len(f) != 4 || f["links"] == nil {
		t.Fatalf("fields: %v", f)
	}
	if h.expect(400, "GET", "/v1/nodes?fields=nonexistent", latest, nil).faultstring(t) == "" {
		t.Fatal("no message")
	}
	h.expect(406, "GET", "/v1/nodes?fields=owner", "1.49", nil)
	h.expect(406, "GET", "/v1/nodes?conductor=x", "1.48", nil)
	if got := h.expect(400, "GET", "/v1/nodes?limit=-1", latest, nil).faultstring(t); got != "Limit must be positive" {
		t.Fatalf("limit message %q", got)
	}
	h.expect(400, "GET", "/v1/nodes?sort_key=properties", latest, nil)
	h.expect(400, "GET", "/v1/nodes?sort_dir=up", latest, nil)
	h.expect(404, "GET", "/v1/nodes?chassis_uuid=00000000-0000-0000-0000-000000000001", latest, nil)

	// Paging through with next links visits every node once, in order.
	var seen []string
	next := h.srv.URL + "/v1/nodes?limit=2"
	for next != "" {
		page := h.expect(200, "GET", strings.TrimPrefix(next, h.srv.URL), latest, nil).json(t)
		for _, n := range page["nodes"].([]any) {
			seen = append(seen, n.(map[string]any)["uuid"].(string))
		}
		next, _ = page["next"].(string)
	}
	if strings.Join(seen, ",") != strings.Join(uuids, ",") {
		t.Fatalf("paged %v, want %v", seen, uuids)
	}
	desc := list("?sort_key=name&sort_dir=desc")
	if desc[0].(map[string]any)["name"] != "n4" {
		t.Fatalf("sort desc: %v", desc[0])
	}
	// Bookmark path without /v1.
	h.expect(200, "GET", "/nodes/n1", latest, nil)
}

func TestNodePatch(t *testing.T) {
	h := newAPI(t)
	n := h.createNode(map[string]any{"name": "p1", "driver_info": map[string]any{"ipmi_password": "secret", "ipmi_address": "10.0.0.1"}})
	id := n["uuid"].(string)
	got := h.expect(200, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "add", "path": "/extra/foo", "value": "bar"},
		map[string]any{"op": "replace", "path": "/name", "value": "p2"},
		map[string]any{"op": "add", "path": "/properties/cpus", "value": 8},
		map[string]any{"op": "replace", "path": "/deploy_interface", "value": "direct"},
	}).json(t)
	if got["extra"].(map[string]any)["foo"] != "bar" || got["name"] != "p2" || got["deploy_interface"] != "direct" {
		t.Fatalf("patched: %v", got)
	}
	if got["driver_info"].(map[string]any)["ipmi_password"] != "******" {
		t.Fatalf("password shown: %v", got["driver_info"])
	}
	// The password survives a patch of another driver_info key.
	h.expect(200, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "add", "path": "/driver_info/ipmi_port", "value": 623}})
	stored, _ := h.store.GetNode(t.Context(), id)
	if stored.DriverInfo["ipmi_password"] != "secret" {
		t.Fatalf("stored password %v", stored.DriverInfo["ipmi_password"])
	}
	got = h.expect(200, "PATCH", "/v1/nodes/"+id, latest, []any{
		map[string]any{"op": "remove", "path": "/name"},
		map[string]any{"op": "remove", "path": "/deploy_interface"},
	}).json(t)
	if got["name"] != nil || got["deploy_interface"] != "fake" {
		t.Fatalf("after remove: name %v deploy %v", got["name"], got["deploy_interface"])
	}
	r := h.expect(400, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "replace", "path": "/uuid", "value": "x"}})
	if !strings.HasPrefix(r.faultstring(t), "Cannot patch /uuid. Only the following can be updated: automated_clean, bios_interface, boot_interface, chassis_uuid, conductor_group,") {
		t.Fatalf("message %q", r.faultstring(t))
	}
	h.expect(400, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "replace", "path": "/provision_state", "value": "active"}})
	h.expect(400, "PATCH", "/v1/nodes/"+id, latest, `[{"op": "replace"`)
	h.expect(400, "PATCH", "/v1/nodes/"+id, latest, map[string]any{"op": "replace"})
	h.expect(400, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "replace", "path": "/extra/missing", "value": 1}})
	h.expect(400, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "replace", "path": "/driver", "value": "no-such"}})
	h.expect(400, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "replace", "path": "/properties", "value": "notadict"}})
	h.expect(406, "PATCH", "/v1/nodes/"+id, "1.49", []any{map[string]any{"op": "replace", "path": "/owner", "value": "x"}})
	h.expect(404, "PATCH", "/v1/nodes/nope", latest, []any{map[string]any{"op": "replace", "path": "/extra", "value": map[string]any{}}})
	// Changing the driver with reset_interfaces picks the new defaults.
	got = h.expect(200, "PATCH", "/v1/nodes/"+id+"?reset_interfaces=true", latest, []any{
		map[string]any{"op": "replace", "path": "/driver", "value": "manual-management"}}).json(t)
	if got["driver"] != "manual-management" || got["deploy_interface"] != "direct" {
		t.Fatalf("driver change: %v %v", got["driver"], got["deploy_interface"])
	}
}

func TestNodeLifecycleWithFakeHardware(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "life"})

	r := h.provision(id, "provide", nil)
	if r.status != 400 || r.faultstring(t) != fmt.Sprintf(`The requested action "provide" can not be performed on node "%s" while it is in state "enroll".`, id) {
		t.Fatalf("provide in enroll: %d %s", r.status, r.body)
	}
	r = h.provision(id, "manage", nil)
	if r.status != 202 || r.header.Get("Location") != h.srv.URL+"/v1/nodes/"+id+"/states" || len(r.body) != 0 {
		t.Fatalf("manage: %d %v %s", r.status, r.header, r.body)
	}
	n := h.waitState(id, "manageable")
	if n["power_state"] != nil {
		// Ironic's fake get_power_state answers node.power_state: null
		// until the first power action.
		t.Fatalf("verify invented a power state for a node never powered: %v", n["power_state"])
	}
	h.expect(400, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "manage"})
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "provide"})
	h.waitState(id, "available")
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active"})
	n = h.waitState(id, "active")
	if n["target_provision_state"] != nil || n["power_state"] != "power on" {
		t.Fatalf("active node: %v %v", n["target_provision_state"], n["power_state"])
	}
	r = h.expect(409, "DELETE", "/v1/nodes/"+id, latest, nil)
	if !strings.HasPrefix(r.faultstring(t), fmt.Sprintf(`Can not delete node "%s" while it is in provision state "active".`, id)) {
		t.Fatalf("delete active: %s", r.faultstring(t))
	}
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "deleted"})
	h.waitState(id, "available")
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "manage"})
	h.waitState(id, "manageable")
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean",
		"clean_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata"}}})
	h.waitState(id, "manageable")
	h.expect(400, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "clean"})
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "inspect"})
	n = h.waitState(id, "manageable")
	if n["inspection_finished_at"] == nil || n["inspection_started_at"] == nil {
		t.Fatalf("inspection times: %v %v", n["inspection_started_at"], n["inspection_finished_at"])
	}
	// Provision verbs need their microversion.
	h.expect(406, "PUT", "/v1/nodes/"+id+"/states/provision", "1.5", map[string]any{"target": "inspect"})
	h.expect(406, "PUT", "/v1/nodes/"+id+"/states/provision", "1.72", map[string]any{"target": "deploy"})
	h.expect(400, "PUT", "/v1/nodes/"+id+"/states/provision", latest, `{"target": `)
	h.expect(400, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "provide", "bogus": 1})
	h.expect(404, "PUT", "/v1/nodes/no-such-node/states/provision", latest, map[string]any{"target": "manage"})
	h.expect(204, "DELETE", "/v1/nodes/"+id, latest, nil)
	h.expect(404, "GET", "/v1/nodes/"+id, latest, nil)

}

func TestAbortWaitStates(t *testing.T) {
	h := newAPI(t)
	id := h.createNode(map[string]any{"inspect_interface": "agent", "deploy_interface": "direct",
		"instance_info": map[string]any{"image_source": "http://127.0.0.1/img.raw"}})["uuid"].(string)
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "manage"})
	h.waitState(id, "manageable")
	h.expect(404, "DELETE", "/v1/nodes/"+id+"/states/provision", latest, nil)

	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "inspect"})
	h.waitState(id, "inspect wait")
	if got := h.expect(200, "GET", "/v1/nodes/"+id, "1.38", nil).json(t)["provision_state"]; got != "inspecting" {
		t.Fatalf("inspect wait at 1.38 reads %v", got)
	}
	h.expect(406, "PUT", "/v1/nodes/"+id+"/states/provision", "1.40", map[string]any{"target": "abort"})
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "abort"})
	n := h.waitState(id, "inspect failed")
	if n["last_error"] != "Inspection was aborted by request." || n["power_state"] != "power off" {
		t.Fatalf("after abort: %v %v", n["last_error"], n["power_state"])
	}
	// Abort where nothing waits is Ironic's 400.
	h.expect(400, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "abort"})

	// Deploy: wait call-back, then DELETE /states/provision aborts it.
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "manage"})
	h.waitState(id, "manageable")
	h.expect(200, "PATCH", "/v1/nodes/"+id, latest, []any{map[string]any{"op": "add", "path": "/automated_clean", "value": false}})
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "provide"})
	h.waitState(id, "available")
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "active"})
	h.waitState(id, "wait call-back")
	h.expect(406, "PUT", "/v1/nodes/"+id+"/states/provision", "1.109", map[string]any{"target": "abort"})
	h.expect(202, "DELETE", "/v1/nodes/"+id+"/states/provision", latest, nil)
	n = h.waitState(id, "deploy failed")
	if lastErr, _ := n["last_error"].(string); !strings.HasPrefix(lastErr, "By request, the deploy operation was aborted") || n["target_provision_state"] != "active" {
		t.Fatalf("deploy abort: %v %v", n["last_error"], n["target_provision_state"])
	}
	h.expect(404, "DELETE", "/v1/nodes/"+id+"/states/provision", latest, nil)

	// A non-interruptible step makes DELETE answer 403 and marks the abort
	// for when the step ends.
	h.expect(202, "PUT", "/v1/nodes/"+id+"/states/provision", latest, map[string]any{"target": "deploy"})
	h.waitState(id, "wait call-back")
	if _, err := h.store.UpdateNode(t.Context(), id, func(n *storage.Node) (*storage.Event, error) {
		n.DeployStep = storage.JSONObject{"step": "flash_firmware", "interface": "deploy", "abortable": false}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.expect(403, "DELETE", "/v1/nodes/"+id+"/states/provision", latest, nil)
	stored, _ := h.store.GetNode(t.Context(), id)
	if stored.DriverInternalInfo["abort_after_step"] != true || stored.ProvisionState != "wait call-back" {
		t.Fatalf("after 403: %v %v", stored.DriverInternalInfo, stored.ProvisionState)
	}
}
