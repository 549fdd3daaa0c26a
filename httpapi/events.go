package httpapi

import (
	"net/http"
	"regexp"
	"strings"

	"castiron/engine/jsonschema"
	"sync"
)

// External events (API 1.54): Neutron tells Ironic about port bindings.
// castiron has no network integration, so, like Ironic (which only logs
// them too), it checks each event exactly as Ironic does and logs it.

// networkEventTypes are the events Ironic accepts, in its order.
var networkEventTypes = []string{"network.bind_port", "network.unbind_port", "network.delete_port"}

// networkEventFields are the properties of Ironic's network event schema.
var networkEventFields = []string{"event", "port_id", "mac_address", "status", "device_id", "binding:host_id", "binding:vnic_type"}

// eventMACRE is oslo's is_valid_mac (on the lower-cased address).
var eventMACRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`) })

// Ironic's EVENTS_SCHEMA and NETWORK_EVENT_SCHEMA.
var (
	eventsSchema = jsonschema.Object(true, []string{"events"},
		jsonschema.P("events", &jsonschema.Schema{Types: []string{"array"}, MinItems: 1,
			Items: jsonschema.Object(false, []string{"event"},
				jsonschema.P("event", &jsonschema.Schema{Types: []string{"string"}, Enum: networkEventTypes}))}))
	networkEventSchema = func() *jsonschema.Schema {
		s := jsonschema.Object(true, []string{"event", "port_id", "mac_address", "status"})
		for _, k := range networkEventFields {
			types := []string{"string"}
			if k == "device_id" || k == "binding:host_id" || k == "binding:vnic_type" {
				types = append(types, "null")
			}
			s.Props = append(s.Props, jsonschema.P(k, jsonschema.Types(types...)))
		}
		return s
	}()
)

// checkEvents is Ironic's EVENTS_SCHEMA followed by events_valid (each
// event against NETWORK_EVENT_VALIDATOR).
func checkEvents(body map[string]any) ([]map[string]any, error) {
	if err := jsonschema.Check("Schema error for evts", eventsSchema, body); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, item := range body["events"].([]any) {
		ev := item.(map[string]any)
		if err := jsonschema.Check("Schema error for evts", networkEventSchema, ev); err != nil {
			return nil, err
		}
		if s := ev["port_id"].(string); !argUUIDLike(s) {
			return nil, errInvalid("Expected UUID for port_id: %s", s)
		}
		if s := ev["mac_address"].(string); !eventMACRE().MatchString(strings.ToLower(s)) {
			return nil, errInvalid("Expected valid MAC address for mac_address: %s", s)
		}
		for _, k := range []string{"device_id", "binding:host_id"} {
			if s, ok := ev[k].(string); ok && !argUUIDLike(s) {
				return nil, errInvalid("Expected UUID for %s: %s", k, s)
			}
		}
		out = append(out, ev)
	}
	return out, nil
}

// postEvents is POST /v1/events: 204 for valid events.
func (a *API) postEvents(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "evts")
	if err != nil {
		return err
	}
	events, err := checkEvents(body)
	if err != nil {
		return err
	}
	// Ironic validates the body first, then the version.
	if !versionOf(r).AtLeast(54) {
		return notFoundResource()
	}
	for _, ev := range events {
		a.log.InfoContext(r.Context(), "external event received", "event", ev["event"], "port_id", ev["port_id"],
			"mac_address", ev["mac_address"], "status", ev["status"], "device_id", ev["device_id"],
			"binding_host_id", ev["binding:host_id"], "binding_vnic_type", ev["binding:vnic_type"],
			"user", userOf(r))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getEvents answers GET /v1/events as Ironic: 405 (POST only), or 404
// below 1.54.
func (a *API) getEvents(w http.ResponseWriter, r *http.Request) error {
	if !versionOf(r).AtLeast(54) {
		writeRaw(w, http.StatusNotFound, codeBody(http.StatusNotFound, ""))
		return nil
	}
	w.Header().Set("Allow", "POST")
	writeRaw(w, http.StatusMethodNotAllowed, codeBody(http.StatusMethodNotAllowed, ""))
	return nil
}
