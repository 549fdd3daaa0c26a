package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

func TestEvents(t *testing.T) {
	h := newAPI(t)
	ev := func(kv ...any) map[string]any {
		m := map[string]any{"event": "network.bind_port", "port_id": "11111111-2222-3333-4444-555555555555",
			"mac_address": "52:54:00:12:34:56", "status": "ACTIVE"}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil && kv[i] != "device_id" {
				delete(m, kv[i].(string))
				continue
			}
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	events := func(evs ...any) map[string]any { return map[string]any{"events": evs} }

	for _, body := range []any{
		events(ev()),
		events(ev("event", "network.unbind_port", "device_id", nil, "binding:vnic_type", "baremetal",
			"binding:host_id", "22222222-3333-4444-5555-666666666666"), ev("event", "network.delete_port", "mac_address", "52:54:00:AB:CD:EF")),
	} {
		r := h.expect(http.StatusNoContent, "POST", "/v1/events", latest, body)
		if len(r.body) != 0 {
			t.Fatalf("204 with a body: %s", r.body)
		}
	}

	h.wantFaults(t, "POST", "/v1/events", []verFault{
		{latest, map[string]any{}, 400, "Schema error for evts: 'events' is a required property"},
		{latest, "", 400, "Schema error for evts: 'events' is a required property"},
		{latest, []any{}, 400, "Schema error for evts: [] is not of type 'object'"},
		{latest, map[string]any{"events": []any{}}, 400, "Schema error for evts: [] should be non-empty"},
		{latest, map[string]any{"events": nil}, 400, "Schema error for evts: None is not of type 'array'"},
		{latest, map[string]any{"events": map[string]any{}}, 400, "Schema error for evts: {} is not of type 'array'"},
		{latest, events(map[string]any{}), 400, "Schema error for evts: 'event' is a required property"},
		{latest, events(5), 400, "Schema error for evts: 5 is not of type 'object'"},
		{latest, events(ev("event", "foo")), 400, "Schema error for evts: 'foo' is not one of ['network.bind_port', 'network.unbind_port', 'network.delete_port']"},
		{latest, events(ev("port_id", nil)), 400, "Schema error for evts: 'port_id' is a required property"},
		{latest, events(ev("port_id", "x")), 400, "Expected UUID for port_id: x"},
		{latest, events(ev("mac_address", "zz")), 400, "Expected valid MAC address for mac_address: zz"},
		{latest, events(ev("mac_address", "52-54-00-12-34-56")), 400, "Expected valid MAC address for mac_address: 52-54-00-12-34-56"},
		{latest, events(ev("binding:host_id", "x")), 400, "Expected UUID for binding:host_id: x"},
		{latest, events(ev("device_id", "x")), 400, "Expected UUID for device_id: x"},
		{latest, events(ev("extra", 1)), 400, "Schema error for evts: Additional properties are not allowed ('extra' was unexpected)"},
		{latest, events(ev("status", 5)), 400, "Schema error for evts: 5 is not of type 'string'"},
		{latest, events(ev("binding:vnic_type", 5)), 400, "Schema error for evts: 5 is not of type 'string', 'null'"},
		{latest, map[string]any{"events": []any{ev()}, "other": 1}, 400, "Schema error for evts: Additional properties are not allowed ('other' was unexpected)"},
		// jsonschema's best match: the shallowest error.
		{latest, events(ev("event", "foo"), map[string]any{}), 400, "Schema error for evts: 'event' is a required property"},
		{latest, events(ev("mac_address", nil, "status", 5)), 400, "Schema error for evts: 'mac_address' is a required property"},
		// The second event is checked too.
		{latest, events(ev(), ev("port_id", "y")), 400, "Expected UUID for port_id: y"},
		// Ironic checks the body before the version.
		{"1.53", events(ev()), 404, "Resource could not be found."},
		{"1.53", map[string]any{}, 400, "Schema error for evts: 'events' is a required property"},
	})
	r := h.expect(http.StatusMethodNotAllowed, "GET", "/v1/events", latest, nil)
	if r.header.Get("Allow") != "POST" || !strings.Contains(string(r.body), `\"code\": 405`) {
		t.Fatalf("GET /v1/events: %v %s", r.header, r.body)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/events", "1.53", nil)
}
