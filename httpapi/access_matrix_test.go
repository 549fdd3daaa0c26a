package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"castiron/httpapi/policy"
	"castiron/storage"
)

// matrixPersonas are the callers of the persona × resource × verb matrix,
// in the order of the expectation strings below: system admin, member,
// reader; the owning project's admin, manager, member, reader; the
// lessee project's admin, member, reader; another project's admin.
var matrixPersonas = []string{"sysadmin", "sysmember", "sysreader",
	"owneradmin", "ownermanager", "ownermember", "ownerreader",
	"lesseeadmin", "lesseemember", "lesseereader", "otheradmin"}

// TestAccessMatrix checks Ironic's default policies (enforce_scope and
// enforce_new_defaults) for every persona on each resource and verb class:
// read (GET one), change (PATCH), create (POST on the node) and delete,
// against objects on a node owned by "owner" and leased to "lessee" (an
// allocation owned by "owner"). Each expectation is the status Ironic's
// rules give: what a caller may not see is 404, what it sees but may not
// change 403; creation under a node it may not see is a 403 (Ironic does
// not conceal the node there).
func TestAccessMatrix(t *testing.T) {
	h := newRBAC(t)
	a, _, _, _ := rbacFixture(t, h)
	off := "power off" // volume objects change only on a powered-off node
	h.db(a, func(n *storage.Node) { n.PowerState = &off })
	mac := 0x10
	nextMAC := func() string { mac++; return fmt.Sprintf("52:54:00:00:01:%02x", mac) }
	extra := []any{map[string]any{"op": "add", "path": "/extra/k", "value": "v"}}

	type verbs struct {
		get, patch, post, del string // one status per persona, space separated
	}
	type kind struct {
		name   string
		fresh  func() string // a new object's path, made by the system admin
		create func() (string, any)
		verbs
	}
	kinds := []kind{
		{"node", func() string {
			n := h.want(201, "sysadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware", "owner": "owner", "lessee": "lessee"}).json(t)
			return "/v1/nodes/" + n["uuid"].(string)
		}, func() (string, any) { return "/v1/nodes", map[string]any{"driver": "fake-hardware"} }, verbs{
			get:   "200 200 200 200 200 200 200 200 200 200 404",
			patch: "200 200 403 200 200 200 403 200 200 403 404",
			post:  "201 403 403 201 403 403 403 201 403 403 201", // project admins: nodes of their own project
			del:   "204 403 403 204 403 403 403 403 403 403 404", // an owner admin deletes its own (self_owned_node)
		}},
		{"port", func() string {
			p := h.want(201, "sysadmin", "POST", "/v1/ports", latest, map[string]any{"node_uuid": a, "address": nextMAC()}).json(t)
			return "/v1/ports/" + p["uuid"].(string)
		}, func() (string, any) { return "/v1/ports", map[string]any{"node_uuid": a, "address": nextMAC()} }, verbs{
			get:   "200 200 200 200 200 200 200 200 200 200 404",
			patch: "200 200 403 200 200 403 403 403 403 403 404",
			post:  "201 403 403 201 201 403 403 403 403 403 403",
			del:   "204 403 403 204 204 403 403 403 403 403 404",
		}},
		{"portgroup", func() string {
			p := h.want(201, "sysadmin", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": a, "address": nextMAC()}).json(t)
			return "/v1/portgroups/" + p["uuid"].(string)
		}, func() (string, any) { return "/v1/portgroups", map[string]any{"node_uuid": a, "address": nextMAC()} }, verbs{
			get:   "200 200 200 200 200 200 200 200 200 200 404",
			patch: "200 200 403 200 200 403 403 403 403 403 404",
			post:  "201 403 403 201 201 403 403 403 403 403 403",
			del:   "204 403 403 204 204 403 403 403 403 403 404",
		}},
		{"volume connector", func() string {
			c := h.want(201, "sysadmin", "POST", "/v1/volume/connectors", latest, map[string]any{"node_uuid": a, "type": "iqn", "connector_id": "iqn." + nextMAC()}).json(t)
			return "/v1/volume/connectors/" + c["uuid"].(string)
		}, func() (string, any) {
			return "/v1/volume/connectors", map[string]any{"node_uuid": a, "type": "iqn", "connector_id": "iqn." + nextMAC()}
		}, verbs{
			// volume:update lets owner members and lessee admins/managers
			// change; create and delete the owner's and the lessee's admins.
			get:   "200 200 200 200 200 200 200 200 200 200 404",
			patch: "200 200 403 200 200 200 403 200 403 403 404",
			post:  "201 201 403 201 201 403 403 201 403 403 403",
			del:   "204 204 403 204 204 403 403 204 403 403 404",
		}},
		{"allocation", func() string {
			al := h.want(201, "sysadmin", "POST", "/v1/allocations", latest, map[string]any{"resource_class": "rc", "owner": "owner"}).json(t)
			return "/v1/allocations/" + al["uuid"].(string)
		}, func() (string, any) { return "/v1/allocations", map[string]any{"resource_class": "rc"} }, verbs{
			// Judged by the allocation's owner only: the lessee does not
			// see it; any project member may allocate (for its project).
			get:   "200 200 200 200 200 200 200 404 404 404 404",
			patch: "200 200 403 200 200 200 403 404 404 404 404",
			post:  "201 201 403 201 201 201 403 201 201 403 201",
			del:   "204 204 403 204 204 204 403 404 404 404 404",
		}},
	}
	for _, k := range kinds {
		shared := k.fresh()
		for verb, exp := range map[string]string{"get": k.get, "patch": k.patch, "create": k.post, "delete": k.del} {
			want := strings.Fields(exp)
			if len(want) != len(matrixPersonas) {
				t.Fatalf("%s %s: %d expectations for %d personas", k.name, verb, len(want), len(matrixPersonas))
			}
			for i, user := range matrixPersonas {
				var got resp
				switch verb {
				case "get":
					got = h.as(user, "GET", shared, latest, nil)
				case "patch":
					got = h.as(user, "PATCH", shared, latest, extra)
				case "create":
					path, body := k.create()
					got = h.as(user, "POST", path, latest, body)
				case "delete":
					got = h.as(user, "DELETE", k.fresh(), latest, nil)
				}
				if fmt.Sprint(got.status) != want[i] {
					t.Errorf("%s %s as %s: %d, want %s: %s", verb, k.name, user, got.status, want[i], got.body)
				}
			}
		}
	}
}

// TestAccessRehome: moving a port, portgroup or volume connector to
// another node (PATCH node_uuid) needs that node to be visible to the
// caller and to have the current node's owner (Ironic's
// authorize_node_link, CVE-2026-44918); every refusal is the same 400, for
// system callers too.
func TestAccessRehome(t *testing.T) {
	h := newRBAC(t)
	a, b, portA, portB := rbacFixture(t, h)
	// c: another node of owner's; d: another node nobody owns; e: other's.
	node := func(owner string) string {
		body := map[string]any{"driver": "fake-hardware"}
		if owner != "" {
			body["owner"] = owner
		}
		return h.want(201, "sysadmin", "POST", "/v1/nodes", latest, body).json(t)["uuid"].(string)
	}
	c, d, e := node("owner"), node(""), node("other")
	off := "power off" // volume objects change only on a powered-off node
	for _, n := range []string{a, c} {
		h.db(n, func(n *storage.Node) { n.PowerState = &off })
	}
	move := func(to any) []any { return []any{map[string]any{"op": "replace", "path": "/node_uuid", "value": to}} }
	refused := func(user, path string, to any) {
		t.Helper()
		r := h.want(400, user, "PATCH", path, latest, move(to))
		if !strings.Contains(string(r.body), fmt.Sprintf("Unable to apply the requested node_uuid '%v'. Requested value was invalid.", to)) {
			t.Errorf("%s moving %s to %v: %s", user, path, to, r.body)
		}
	}
	pgA := h.want(201, "sysadmin", "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": a, "address": "52:54:00:00:02:01"}).json(t)["uuid"].(string)
	vcA := h.want(201, "sysadmin", "POST", "/v1/volume/connectors", latest, map[string]any{"node_uuid": a, "type": "iqn", "connector_id": "iqn.rehome"}).json(t)["uuid"].(string)
	for _, path := range []string{"/v1/ports/" + portA, "/v1/portgroups/" + pgA, "/v1/volume/connectors/" + vcA} {
		refused("owneradmin", path, b)                                      // nobody's node: another owner
		refused("owneradmin", path, e)                                      // another project's node, invisible to owner
		refused("owneradmin", path, "11111111-2222-3333-4444-555555555555") // the same answer as for a node it cannot see
		refused("sysadmin", path, e)                                        // system callers too: owners differ
		h.want(200, "owneradmin", "PATCH", path, latest, move(c))
		h.want(200, "ownermanager", "PATCH", path, latest, move(a)) // back, same owner
	}
	// Between nodes nobody owns, a system caller moves freely.
	r := h.want(200, "sysadmin", "PATCH", "/v1/ports/"+portB, latest, move(d)).json(t)
	if r["node_uuid"] != d {
		t.Errorf("port moved to %v, want %s", r["node_uuid"], d)
	}
	// A lessee admin may change volume objects but not move them to its
	// own nodes: the owners differ.
	l := h.want(201, "lesseeadmin", "POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware"}).json(t)["uuid"].(string)
	refused("lesseeadmin", "/v1/volume/connectors/"+vcA, l)
}

// TestRehomeNoauth: without authentication there is no policy, but the
// owners are compared all the same (Ironic's authorize_node_link runs for
// every caller).
func TestRehomeNoauth(t *testing.T) {
	h := newAPI(t)
	owned := h.createNode(map[string]any{"driver": "fake-hardware", "owner": "acme"})["uuid"].(string)
	free := h.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	free2 := h.createNode(map[string]any{"driver": "fake-hardware", "name": "free2"})["uuid"].(string)
	p := h.expect(201, "POST", "/v1/ports", latest, map[string]any{"node_uuid": free, "address": "52:54:00:00:03:01"}).json(t)["uuid"].(string)
	move := func(to string) []any {
		return []any{map[string]any{"op": "replace", "path": "/node_uuid", "value": to}}
	}
	h.expect(400, "PATCH", "/v1/ports/"+p, latest, move(owned))
	h.expect(200, "PATCH", "/v1/ports/"+p, latest, move(free2))
	// A name is looked up and the node's UUID stored.
	pg := h.expect(201, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": free, "address": "52:54:00:00:03:02"}).json(t)["uuid"].(string)
	h.expect(400, "PATCH", "/v1/portgroups/"+pg, latest, move(owned))
	if got := h.expect(200, "PATCH", "/v1/portgroups/"+pg, latest, move("free2")).json(t)["node_uuid"]; got != free2 {
		t.Errorf("portgroup moved by name to %v, want %s", got, free2)
	}
}

// TestShowSecretsPolicy: show_password and show_instance_secrets from a
// policy file unmask driver_info/driver_internal_info and instance_info
// for the callers they let through; everyone else still gets "******", in
// single views and lists, whatever the view cache holds.
func TestShowSecretsPolicy(t *testing.T) {
	e, err := policy.New(map[string]string{
		"show_password":         "role:admin and system_scope:all",
		"show_instance_secrets": "role:member",
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newRBAC(t, func(o *Options) { o.Policy = e })
	a, _, _, _ := rbacFixture(t, h)
	h.want(200, "sysadmin", "PATCH", "/v1/nodes/"+a, latest, []any{map[string]any{"op": "add", "path": "/instance_info/image_url", "value": "http://x/y?temp_url_sig=z"}})
	h.db(a, func(n *storage.Node) { n.DriverInternalInfo = storage.JSONObject{"agent_secret_token": "tok"} })
	for _, c := range []struct {
		user             string
		driver, instance bool
	}{
		{"sysreader", false, false}, {"sysadmin", true, true}, {"ownermember", false, true}, {"sysreader", false, false}, {"sysadmin", true, true},
	} {
		for _, path := range []string{"/v1/nodes/" + a, "/v1/nodes/detail"} {
			n := h.want(200, c.user, "GET", path, latest, nil).json(t)
			if nodes, ok := n["nodes"].([]any); ok {
				n = nodes[0].(map[string]any)
			}
			di, ii, dii := n["driver_info"].(map[string]any), n["instance_info"].(map[string]any), n["driver_internal_info"].(map[string]any)
			if got := di["ipmi_password"] == "s3cret"; got != c.driver {
				t.Errorf("%s %s: driver_info %v, shown %v", c.user, path, di, c.driver)
			}
			if got := dii["agent_secret_token"] == "tok"; got != c.driver {
				t.Errorf("%s %s: driver_internal_info %v, shown %v", c.user, path, dii, c.driver)
			}
			if got := ii["image_url"] == "http://x/y?temp_url_sig=z"; got != c.instance {
				t.Errorf("%s %s: instance_info %v, shown %v", c.user, path, ii, c.instance)
			}
		}
	}

	// noauth: the defaults mask; "@" shows to everyone, as in Ironic.
	open, err := policy.New(map[string]string{"show_password": "@"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range []*policy.Enforcer{nil, open} {
		n := newAPI(t, func(o *Options) { o.Policy = pol })
		id := n.createNode(map[string]any{"driver": "fake-hardware", "driver_info": map[string]any{"ipmi_password": "pw"}})["uuid"].(string)
		got := n.expect(200, "GET", "/v1/nodes/"+id, latest, nil).json(t)["driver_info"].(map[string]any)["ipmi_password"]
		if want := map[bool]string{true: "pw", false: "******"}[pol != nil]; got != want {
			t.Errorf("noauth, show_password %v: ipmi_password %v, want %s", pol != nil, got, want)
		}
	}
}
