package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver"
	"castiron/engine/driver/fake"
	"castiron/storage"
)

// TestPortLookupByIdent: Ironic's get_one/patch take port_ident
// (args.uuid_or_name) and objects.Port.get finds a port by integer id, UUID,
// MAC address or name; the lookup is not gated on the microversion. DELETE
// keeps port_uuid=args.uuid.
func TestPortLookupByIdent(t *testing.T) {
	h, node := apiWithNode(t, map[string]any{"name": "pl-node"})
	p := h.expect(http.StatusCreated, "POST", "/v1/ports", "1.88",
		map[string]any{"node_uuid": node, "address": "52:54:00:00:0c:01", "name": "eth0"}).json(t)
	id := p["uuid"].(string)

	got := h.expect(http.StatusOK, "GET", "/v1/ports/eth0", "1.88", nil).json(t)
	if got["uuid"] != id || got["name"] != "eth0" {
		t.Fatalf("GET by name: %v", got)
	}
	// Not gated: Ironic's Port.get accepts the name at any version (the
	// name field itself stays hidden).
	got = h.expect(http.StatusOK, "GET", "/v1/ports/eth0", "1.1", nil).json(t)
	if _, has := got["name"]; has || got["uuid"] != id {
		t.Fatalf("GET by name at 1.1: %v", got)
	}
	h.expect(http.StatusOK, "GET", "/v1/ports/eth0?fields=uuid,name", "1.88", nil)
	h.expect(http.StatusOK, "GET", "/ports/eth0", "1.88", nil) // bookmark
	// Integer id (Ironic: strutils.is_int_like first).
	stored, err := h.store.GetPort(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.expect(http.StatusOK, "GET", fmt.Sprintf("/v1/ports/%d", stored.ID), latest, nil).json(t); got["uuid"] != id {
		t.Fatalf("GET by id: %v", got)
	}

	wantFault(t, h.do("GET", "/v1/ports/nope", latest, nil), 404, "Port nope could not be found.")
	// A MAC with colons is not a logical name: args.uuid_or_name refuses it.
	wantFault(t, h.do("GET", "/v1/ports/52:54:00:00:0c:01", latest, nil), 400,
		"Expected UUID or name for port_ident: 52:54:00:00:0c:01")
	wantFault(t, h.do("GET", "/v1/ports/a%20b", latest, nil), 400, "Expected UUID or name for port_ident: a b")

	// PATCH by name.
	patched := h.expect(http.StatusOK, "PATCH", "/v1/ports/eth0", "1.88",
		[]any{map[string]any{"op": "add", "path": "/extra/k", "value": "v"}}).json(t)
	if patched["uuid"] != id || patched["extra"].(map[string]any)["k"] != "v" {
		t.Fatalf("PATCH by name: %v", patched)
	}
	renamed := h.expect(http.StatusOK, "PATCH", "/v1/ports/eth0", "1.88",
		[]any{map[string]any{"op": "replace", "path": "/name", "value": "eth1"}}).json(t)
	if renamed["name"] != "eth1" {
		t.Fatalf("rename: %v", renamed)
	}
	wantFault(t, h.do("PATCH", "/v1/ports/eth0", "1.88",
		[]any{map[string]any{"op": "add", "path": "/extra/k", "value": "v"}}), 404, "Port eth0 could not be found.")
	wantFault(t, h.do("PATCH", "/v1/ports/a%20b", "1.88",
		[]any{map[string]any{"op": "add", "path": "/extra/k", "value": "v"}}), 400, "Expected UUID or name for port_ident: a b")
	// DELETE takes a UUID only (Ironic: port_uuid=args.uuid).
	wantFault(t, h.do("DELETE", "/v1/ports/eth1", latest, nil), 400, "Expected UUID for port_uuid: eth1")
	h.expect(http.StatusNoContent, "DELETE", "/v1/ports/"+id, latest, nil)
	wantFault(t, h.do("GET", "/v1/ports/eth1", latest, nil), 404, "Port eth1 could not be found.")
}

// TestPortShardFilter: GET /v1/ports?shard= (1.82) lists the ports of the
// nodes in those shards.
func TestPortShardFilter(t *testing.T) {
	h, a := apiWithNode(t, map[string]any{"name": "sa", "shard": "s1"})
	b := h.createNode(map[string]any{"name": "sb", "shard": "s2"})["uuid"].(string)
	c := h.createNode(map[string]any{"name": "sc"})["uuid"].(string)
	ports := map[string]string{}
	for i, n := range []string{a, b, c} {
		ports[n] = h.expect(http.StatusCreated, "POST", "/v1/ports", latest,
			map[string]any{"node_uuid": n, "address": fmt.Sprintf("52:54:00:00:0d:0%d", i)}).json(t)["uuid"].(string)
	}
	list := func(q string) []string {
		t.Helper()
		var out []string
		for _, p := range h.expect(http.StatusOK, "GET", "/v1/ports"+q, "1.82", nil).json(t)["ports"].([]any) {
			out = append(out, p.(map[string]any)["uuid"].(string))
		}
		return out
	}
	if got := list("?shard=s1"); len(got) != 1 || got[0] != ports[a] {
		t.Fatalf("shard=s1: %v", got)
	}
	if got := list("?shard=s1,%20S2,s1"); len(got) != 2 { // string_list: stripped, lower-cased, unique
		t.Fatalf("shard=s1,S2: %v", got)
	}
	if got := list("?shard=other"); len(got) != 0 {
		t.Fatalf("shard=other: %v", got)
	}
	if got := list("?shard="); len(got) != 3 { // empty list: no filter (Ironic: `if shard`)
		t.Fatalf("shard=: %v", got)
	}
	if got := h.expect(http.StatusOK, "GET", "/v1/ports/detail?shard=s2", "1.82", nil).json(t)["ports"].([]any); len(got) != 1 ||
		got[0].(map[string]any)["node_uuid"] != b {
		t.Fatalf("detail shard=s2: %v", got)
	}
	// address wins over shard (Ironic's elif order).
	if got := list("?shard=s1&address=52:54:00:00:0d:01"); len(got) != 1 || got[0] != ports[b] {
		t.Fatalf("shard+address: %v", got)
	}
	// Paging inside the shard set.
	page := h.expect(http.StatusOK, "GET", "/v1/ports?shard=s1,s2&limit=1", "1.82", nil).json(t)
	if len(page["ports"].([]any)) != 1 || page["next"] == nil {
		t.Fatalf("limit: %v", page)
	}

	wantFault(t, h.do("GET", "/v1/ports?shard=s1", "1.81", nil), 406,
		"Request not acceptable. The minimal required API version should be 1.82")
	wantFault(t, h.do("GET", "/v1/ports?shard=s1&node=sa", "1.82", nil), 403, "Operation not permitted.")
	wantFault(t, h.do("GET", "/v1/nodes/sa/ports?shard=s1", "1.82", nil), 403, "Operation not permitted.")
}

// optionalDriver is the fake driver plus every optional management feature,
// to test the success paths no shipped fake-hardware interface has (Ironic's
// fake management implements neither inject_nmi nor boot mode setters).
type optionalDriver struct {
	*fake.Driver
	mu    sync.Mutex
	calls []string
	fail  error
}

func (d *optionalDriver) record(c string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, c)
	return d.fail
}

func (d *optionalDriver) InjectNMI(_ context.Context, n driver.Node) error {
	return d.record("nmi " + n.UUID)
}

func (d *optionalDriver) SetBootMode(_ context.Context, n driver.Node, mode string) error {
	return d.record("boot_mode " + mode)
}

func (d *optionalDriver) SetSecureBoot(_ context.Context, n driver.Node, on bool) error {
	return d.record(fmt.Sprintf("secure_boot %v", on))
}

func (d *optionalDriver) setFail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = err
}

func (d *optionalDriver) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

// newOptionalAPI is newAPI with one more hardware type, "fake-optional",
// whose management implements the optional driver interfaces.
func newOptionalAPI(t *testing.T) (*apiHarness, *optionalDriver) {
	t.Helper()
	plain := fake.New()
	opt := &optionalDriver{Driver: fake.New()}
	optHW := engine.NewFakeHardware(opt)
	optHW.Name = "fake-optional"
	h := serveAPI(t, engine.Config{Hostname: "test-conductor"},
		[]*engine.HardwareType{engine.NewFakeHardware(plain), engine.NewManualManagement(plain), optHW},
		func(o *Options) { o.LockRetry = 0 })
	return h, opt
}

func TestInjectNMI(t *testing.T) {
	h, opt := newOptionalAPI(t)
	plain := h.createNode(map[string]any{"name": "nmi-fake"})["uuid"].(string)
	manual := h.createNode(map[string]any{"name": "nmi-manual", "driver": "manual-management"})["uuid"].(string)
	withNMI := h.createNode(map[string]any{"name": "nmi-opt", "driver": "fake-optional"})["uuid"].(string)
	const path = "/v1/nodes/%s/management/inject_nmi"

	// Below 1.29: Ironic's NotFound, on the /v1 and bookmark paths.
	wantFault(t, h.do("PUT", fmt.Sprintf(path, withNMI), "1.28", nil), 404, "Resource could not be found.")
	if r := h.do("PUT", fmt.Sprintf("/nodes/%s/management/inject_nmi", withNMI), "1.28", nil); r.status != 404 {
		t.Fatalf("bookmark below 1.29: %d", r.status)
	}
	if n := len(opt.Calls()); n != 0 {
		t.Fatalf("driver called below 1.29: %v", opt.Calls())
	}

	// A driver with the feature: 204, by UUID and by name.
	r := h.expect(http.StatusNoContent, "PUT", fmt.Sprintf(path, withNMI), "1.29", nil)
	if len(r.body) != 0 {
		t.Fatalf("204 with a body: %s", r.body)
	}
	h.expect(http.StatusNoContent, "PUT", fmt.Sprintf(path, "nmi-opt"), latest, nil)
	if c := opt.Calls(); len(c) != 2 || c[0] != "nmi "+withNMI {
		t.Fatalf("driver calls %v", c)
	}

	// Ironic's fake and noop management have no inject_nmi.
	wantFault(t, h.do("PUT", fmt.Sprintf(path, plain), latest, nil), 400,
		"Driver fake-hardware does not support inject_nmi (disabled or not implemented).")
	wantFault(t, h.do("PUT", fmt.Sprintf(path, manual), latest, nil), 400,
		"Driver manual-management does not support inject_nmi (disabled or not implemented).")
	wantFault(t, h.do("PUT", fmt.Sprintf(path, "no-such-node"), latest, nil), 404, "Node no-such-node could not be found.")
	if r := h.do("GET", fmt.Sprintf(path, withNMI), latest, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET inject_nmi: %d %s", r.status, r.body)
	}

	// A driver error is a 500 naming the node.
	opt.setFail(fmt.Errorf("BMC said no"))
	r = h.do("PUT", fmt.Sprintf(path, withNMI), latest, nil)
	if r.status != 500 || !strings.Contains(r.faultstring(t), "BMC said no") || !strings.Contains(r.faultstring(t), withNMI) {
		t.Fatalf("driver failure: %d %s", r.status, r.body)
	}
	opt.setFail(nil)

	// A locked node: 409 NodeLocked, no driver call.
	before := len(opt.Calls())
	h.db(withNMI, func(n *storage.Node) { n.Reservation = ptrTo("other-host") })
	wantFault(t, h.do("PUT", fmt.Sprintf(path, withNMI), latest, nil), 409,
		fmt.Sprintf("Node %s is locked by host other-host, please retry after the current operation is completed.", withNMI))
	if len(opt.Calls()) != before {
		t.Fatalf("driver called for a locked node")
	}
}

func ptrTo[T any](v T) *T { return &v }

// waitNode polls GET /v1/nodes/{id} until cond holds.
func waitNode(t *testing.T, h *apiHarness, ident string, cond func(n map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := h.expect(http.StatusOK, "GET", "/v1/nodes/"+ident, latest, nil).json(t)
		if cond(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never reached the condition: %v", ident, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBootModeAndSecureBoot(t *testing.T) {
	h, opt := newOptionalAPI(t)
	plain := h.createNode(map[string]any{"name": "bm-fake"})["uuid"].(string)
	withSet := h.createNode(map[string]any{"name": "bm-opt", "driver": "fake-optional"})["uuid"].(string)
	const bm, sb = "/v1/nodes/%s/states/boot_mode", "/v1/nodes/%s/states/secure_boot"
	unlocked := func(n map[string]any) bool { return n["reservation"] == nil }

	// Below 1.76: the node is looked up first, then Ironic's NotFound.
	wantFault(t, h.do("PUT", fmt.Sprintf(bm, withSet), "1.75", map[string]any{"target": "uefi"}), 404,
		"This endpoint is supported starting with the API version 1.76")
	wantFault(t, h.do("PUT", fmt.Sprintf(sb, withSet), "1.75", map[string]any{"target": true}), 404,
		"This endpoint is supported starting with the API version 1.76")
	wantFault(t, h.do("PUT", fmt.Sprintf(bm, "nope"), "1.75", map[string]any{"target": "uefi"}), 404, "Node nope could not be found.")

	// Success with a driver that can: 202 + Location, then the field.
	r := h.expect(http.StatusAccepted, "PUT", fmt.Sprintf(bm, "bm-opt"), "1.76", map[string]any{"target": "uefi"})
	if loc := r.header.Get("Location"); !strings.HasSuffix(loc, "/v1/nodes/bm-opt/states") {
		t.Fatalf("Location %q", loc)
	}
	n := waitNode(t, h, withSet, func(n map[string]any) bool { return n["boot_mode"] == "uefi" && unlocked(n) })
	if n["last_error"] != nil {
		t.Fatalf("last_error %v", n["last_error"])
	}
	h.expect(http.StatusAccepted, "PUT", fmt.Sprintf(sb, withSet), latest, map[string]any{"target": true})
	waitNode(t, h, withSet, func(n map[string]any) bool { return n["secure_boot"] == true && unlocked(n) })
	h.expect(http.StatusAccepted, "PUT", fmt.Sprintf(sb, withSet), latest, map[string]any{"target": "off"}) // args.boolean
	waitNode(t, h, withSet, func(n map[string]any) bool { return n["secure_boot"] == false && unlocked(n) })
	states := h.expect(http.StatusOK, "GET", "/v1/nodes/"+withSet+"/states", latest, nil).json(t)
	if states["boot_mode"] != "uefi" || states["secure_boot"] != false {
		t.Fatalf("states: %v", states)
	}
	if c := opt.Calls(); len(c) != 3 || c[0] != "boot_mode uefi" || c[1] != "secure_boot true" || c[2] != "secure_boot false" {
		t.Fatalf("driver calls %v", c)
	}

	// A driver failure leaves last_error and the field unchanged.
	opt.setFail(fmt.Errorf("BMC said no"))
	h.expect(http.StatusAccepted, "PUT", fmt.Sprintf(bm, withSet), latest, map[string]any{"target": "bios"})
	n = waitNode(t, h, withSet, func(n map[string]any) bool { return n["last_error"] != nil && unlocked(n) })
	if n["boot_mode"] != "uefi" || n["last_error"] != "Failed to change boot mode to 'bios: BMC said no" {
		t.Fatalf("after failure: boot_mode %v last_error %v", n["boot_mode"], n["last_error"])
	}
	opt.setFail(nil)

	// Ironic's fake management has neither setter: 202, then last_error.
	h.expect(http.StatusAccepted, "PUT", fmt.Sprintf(bm, plain), latest, map[string]any{"target": "uefi"})
	n = waitNode(t, h, plain, func(n map[string]any) bool { return n["last_error"] != nil && unlocked(n) })
	if n["boot_mode"] != nil || n["last_error"] != "Failed to change boot mode to 'uefi: Driver fake-hardware does not support set_boot_mode (disabled or not implemented)." {
		t.Fatalf("fake boot_mode: %v / %v", n["boot_mode"], n["last_error"])
	}
	h.expect(http.StatusAccepted, "PUT", fmt.Sprintf(sb, plain), latest, map[string]any{"target": true})
	n = waitNode(t, h, plain, func(n map[string]any) bool {
		return unlocked(n) && n["last_error"] == "Failed to change secure_boot state to 'True': Driver fake-hardware does not support set_secure_boot_state (disabled or not implemented)."
	})
	if n["secure_boot"] != nil {
		t.Fatalf("fake secure_boot: %v", n["secure_boot"])
	}

	// Bad targets.
	for _, tc := range []struct {
		path string
		body any
		msg  string
	}{
		{bm, map[string]any{"target": "legacy"}, "Invalid boot mode legacy requested for node. Allowed boot modes are: bios, uefi"},
		{bm, map[string]any{"target": nil}, "Invalid boot mode None requested for node. Allowed boot modes are: bios, uefi"},
		{bm, map[string]any{"target": 5}, "Expected string for target: 5"},
		{bm, map[string]any{}, "Missing mandatory parameter: target"},
		{bm, map[string]any{"target": "uefi", "x": 1}, `Unknown argument: "x"`},
		{sb, map[string]any{"target": nil}, "Invalid secure_boot None requested for node. Allowed secure_boot states are: True, False) "},
		{sb, map[string]any{"target": "maybe"}, "Invalid target: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"},
	} {
		wantFault(t, h.do("PUT", fmt.Sprintf(tc.path, withSet), latest, tc.body), 400, tc.msg)
	}

	// Unstable state: Ironic's Conflict, its message never formatted.
	h.db(withSet, func(n *storage.Node) { n.ProvisionState = "deploying" })
	wantFault(t, h.do("PUT", fmt.Sprintf(bm, withSet), latest, map[string]any{"target": "bios"}), 409,
		"Node is in %(state)s state. Since node is transitioning, the boot mode will not be set as this may interfere with ongoing changes and result in erroneous modification. Try again later.")
	wantFault(t, h.do("PUT", fmt.Sprintf(sb, withSet), latest, map[string]any{"target": true}), 409,
		"Node is in %(state)s state. Since node is transitioning, the boot mode will not be set as this may interfere with ongoing changes and result in erroneous modification. Try again later.")
	// Locked: NodeLocked.
	h.db(withSet, func(n *storage.Node) { n.ProvisionState = "manageable"; n.Reservation = ptrTo("other-host") })
	wantFault(t, h.do("PUT", fmt.Sprintf(bm, withSet), latest, map[string]any{"target": "bios"}), 409,
		fmt.Sprintf("Node %s is locked by host other-host, please retry after the current operation is completed.", withSet))
	if r := h.do("GET", fmt.Sprintf(bm, withSet), latest, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET boot_mode: %d", r.status)
	}
}

func (d *optionalDriver) SetIndicatorState(_ context.Context, n driver.Node, component, name, state string) error {
	return d.record("indicator " + name + "@" + component + "=" + state)
}

func TestIndicators(t *testing.T) {
	h, opt := newOptionalAPI(t)
	plain := h.createNode(map[string]any{"name": "ind-fake"})["uuid"].(string)
	manual := h.createNode(map[string]any{"name": "ind-manual", "driver": "manual-management"})["uuid"].(string)
	withSet := h.createNode(map[string]any{"name": "ind-opt", "driver": "fake-optional"})["uuid"].(string)

	// Ironic's fake management: two indicators, chassis first.
	got := h.expect(http.StatusOK, "GET", "/v1/nodes/ind-fake/management/indicators", "1.63", nil).json(t)
	list := got["indicators"].([]any)
	if len(list) != 2 {
		t.Fatalf("indicators: %v", got)
	}
	first, second := list[0].(map[string]any), list[1].(map[string]any)
	if first["name"] != "led-0@chassis" || first["component"] != "chassis" || first["readonly"] != true ||
		fmt.Sprint(first["states"]) != "[off on]" {
		t.Fatalf("first indicator: %v", first)
	}
	if second["name"] != "led@system" || second["readonly"] != false || fmt.Sprint(second["states"]) != "[blinking off on]" {
		t.Fatalf("second indicator: %v", second)
	}
	links := first["links"].([]any)
	if self := links[0].(map[string]any); self["rel"] != "self" || self["href"] != h.srv.URL+"/v1/nodes/ind-fake/management/indicators/led-0@chassis" {
		t.Fatalf("self link %v", self)
	}
	if bm := links[1].(map[string]any); bm["rel"] != "bookmark" || bm["href"] != h.srv.URL+"/nodes/ind-fake/management/indicators/led-0@chassis" {
		t.Fatalf("bookmark link %v", bm)
	}
	// Ironic never checks MINOR_63_INDICATORS: the endpoints answer at 1.1.
	h.expect(http.StatusOK, "GET", "/v1/nodes/"+plain+"/management/indicators", "1.1", nil)

	for _, ind := range []string{"led@system", "led-0@chassis"} {
		if st := h.expect(http.StatusOK, "GET", "/v1/nodes/"+plain+"/management/indicators/"+ind, latest, nil).json(t); st["state"] != "on" || len(st) != 1 {
			t.Fatalf("%s: %v", ind, st)
		}
	}
	base := "/v1/nodes/" + plain + "/management/indicators/"
	wantFault(t, h.do("GET", base+"led@disk", latest, nil), 400, "Invalid component disk specified.")
	wantFault(t, h.do("GET", base+"nope@system", latest, nil), 400, "Invalid indicator nope specified.")
	wantFault(t, h.do("GET", base+"led", latest, nil), 400, `Malformed indicator name "led"`)
	wantFault(t, h.do("GET", "/v1/nodes/nope/management/indicators/led@system", latest, nil), 404, "Node nope could not be found.")
	wantFault(t, h.do("GET", "/v1/nodes/nope/management/indicators", latest, nil), 404, "Node nope could not be found.")
	wantFault(t, h.do("PUT", base+"led@system", latest, map[string]any{"state": "off"}), 400,
		"Driver fake-hardware does not support set_indicator_state (disabled or not implemented).")
	wantFault(t, h.do("PUT", base+"led", latest, map[string]any{"state": "off"}), 400, `Malformed indicator name "led"`)
	wantFault(t, h.do("PUT", base+"led@system", latest, map[string]any{}), 400, "Missing mandatory parameter: state")
	wantFault(t, h.do("PUT", base+"led@system", latest, map[string]any{"state": 1}), 400, "Expected string for state: 1")
	wantFault(t, h.do("PUT", base+"led@system", latest, map[string]any{"state": "on", "x": 1}), 400, `Unknown argument: "x"`)
	if r := h.do("DELETE", base+"led@system", latest, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE indicator: %d", r.status)
	}

	// The noop management interface (manual-management) has none.
	wantFault(t, h.do("GET", "/v1/nodes/"+manual+"/management/indicators", latest, nil), 400,
		"Driver manual-management does not support get_supported_indicators (disabled or not implemented).")
	wantFault(t, h.do("GET", "/v1/nodes/"+manual+"/management/indicators/led@system", latest, nil), 400,
		"Driver manual-management does not support get_indicator_state (disabled or not implemented).")

	// A driver with a setter: 204 and the call.
	r := h.expect(http.StatusNoContent, "PUT", "/v1/nodes/ind-opt/management/indicators/led@system", latest, map[string]any{"state": "blinking"})
	if len(r.body) != 0 {
		t.Fatalf("204 with body %s", r.body)
	}
	if c := opt.Calls(); len(c) != 1 || c[0] != "indicator led@system=blinking" {
		t.Fatalf("driver calls %v", c)
	}
	// Locked node: 409.
	h.db(withSet, func(n *storage.Node) { n.Reservation = ptrTo("other-host") })
	locked := fmt.Sprintf("Node %s is locked by host other-host, please retry after the current operation is completed.", withSet)
	wantFault(t, h.do("PUT", "/v1/nodes/ind-opt/management/indicators/led@system", latest, map[string]any{"state": "off"}), 409, locked)
	wantFault(t, h.do("GET", "/v1/nodes/ind-opt/management/indicators", latest, nil), 409, locked)
}
