package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/httpapi/identity"
	"castiron/storage"
)

// Node sub-resources: history (1.78), inventory (1.81), children (1.83), vendor passthru (1.1), console (1.1),
// RAID (1.12) and VIFs (1.28), as Ironic's v1/node.py and driver.py
// controllers serve them (bios and firmware: hwconfig.go).

// invalidBool is Ironic's args.boolean error (oslo's bool_from_string).
func invalidBool(name, val string) error {
	return errInvalid("Invalid %s: Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", name, val)
}

// queryBool reads an optional boolean query parameter; nil when absent.
func queryBool(q url.Values, name string) (*bool, error) {
	if !q.Has(name) {
		return nil, nil
	}
	b, err := parseBoolString(q.Get(name))
	if err != nil {
		return nil, invalidBool(name, q.Get(name))
	}
	return &b, nil
}

func splitFields(raw string) []string {
	var out []string
	for _, f := range strings.Split(raw, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// returnFields is Ironic's api_utils.get_request_return_fields for the
// BIOS and firmware collections: detail and fields need queryOK, and not
// both at once.
func returnFields(q url.Values, queryOK bool) (detail *bool, fields []string, err error) {
	if detail, err = queryBool(q, "detail"); err != nil {
		return nil, nil, err
	}
	if q.Has("fields") {
		fields = splitFields(q.Get("fields"))
	}
	if detail != nil && !queryOK {
		return nil, nil, errInvalid("Invalid query parameter ?detail=%s received.", pyrepr.Bool(*detail))
	}
	if q.Has("fields") && !queryOK {
		return nil, nil, errInvalid("Invalid query parameter ?fields=%s received.", pyrepr.Repr(fields))
	}
	if q.Has("fields") && detail != nil && *detail {
		return nil, nil, errInvalid("Can not specify ?detail=True and fields in the same request.")
	}
	return detail, fields, nil
}

// --- History (1.78) ---

// historySortable are the node_history columns a history list may sort by.
var historySortable = []string{"uuid", "created_at", "severity", "event_type", "event", "conductor"}

// emptyNil is nil for "", so unset event columns read null as in Ironic.
func emptyNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

type historyEntry struct {
	e      *storage.Event
	detail bool
	self   string
	ver    Version
}

// MarshalJSON writes the entry in Ironic's key order.
func (h historyEntry) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	kv := func(k string, v any, first bool) {
		if !first {
			buf.WriteString(", ")
		}
		buf.WriteString(jsonString(k))
		buf.WriteString(": ")
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
	e := h.e
	buf.WriteByte('{')
	kv("uuid", e.UUID, true)
	kv("created_at", ironicTime(e.CreatedAt), false)
	kv("severity", emptyNil(e.Severity), false)
	if h.detail {
		kv("event_type", emptyNil(e.EventType), false)
		kv("event", e.Event, false)
		kv("conductor", emptyNil(e.Conductor), false)
		kv("user", emptyNil(e.User), false)
		if h.ver.AtLeast(113) {
			kv("project", emptyNil(e.Project), false)
		}
		if h.ver.AtLeast(115) {
			kv("state", emptyNil(e.ToState), false)
			kv("target_provision_state", emptyNil(e.TargetProvisionState), false)
			kv("duration_seconds", e.DurationSeconds, false)
		}
	} else {
		// The summary view truncates long events to 255 characters.
		ev := []rune(e.Event)
		if len(ev) > 255 {
			ev = append(ev[:251], []rune("...")...)
		}
		kv("event", string(ev), false)
	}
	kv("links", []link{{Href: h.self, Rel: "self"}}, false)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func historyEntryOf(r *http.Request, nodeUUID string, e *storage.Event, detail bool) historyEntry {
	return historyEntry{e: e, detail: detail, self: baseURL(r) + "/v1/nodes/" + nodeUUID + "/history/" + e.UUID, ver: versionOf(r)}
}

// listHistory is GET /v1/nodes/{ident}/history.
func (a *API) listHistory(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	detail, err := queryBool(qs, "detail")
	if err != nil {
		return err
	}
	if m := qs.Get("marker"); m != "" {
		if _, err := uuid.Parse(m); err != nil {
			return errInvalid("Expected UUID for marker: %s", m)
		}
	}
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	page, err := parsePage(qs, historySortable)
	if err != nil {
		return err
	}
	events, err := a.cond.Store().ListEvents(r.Context(), n.UUID, page)
	if err != nil {
		return err
	}
	isDetail := detail != nil && *detail
	items := make([]historyEntry, len(events))
	for i, e := range events {
		items[i] = historyEntryOf(r, n.UUID, e, isDetail)
	}
	out := map[string]any{"history": items}
	if len(events) > 0 && len(events) == page.Limit {
		out["next"] = historyNext(r, page, events[len(events)-1].UUID)
	}
	return writeJSON(w, http.StatusOK, out)
}

// historyNext is the next-page link: the request's query (detail, sort) with
// limit and the marker moved to the last event. Ironic's own link echoes the
// marker object's repr and a fields list the endpoint then refuses; castiron
// writes one a client can follow.
func historyNext(r *http.Request, p storage.Page, last string) string {
	return pageAfter(r, "/v1/nodes/"+r.PathValue("ident")+"/history", p, "created_at", last)
}

// getHistoryEvent is GET /v1/nodes/{ident}/history/{event}: one event, in
// the detailed view.
func (a *API) getHistoryEvent(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	e, err := a.cond.Store().GetEvent(r.Context(), n.UUID, r.PathValue("event"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, historyEntryOf(r, n.UUID, e, true))
}

// --- Inventory (1.81) ---

// getInventory is GET /v1/nodes/{ident}/inventory.
func (a *API) getInventory(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	stored, ok := n.DriverInternalInfo[engine.InventoryKey].(map[string]any)
	if !ok {
		return fault.New(fault.NotFound, "Node inventory record for node %s could not be found.", n.UUID)
	}
	plugin := stored["plugin_data"]
	if plugin == nil {
		plugin = map[string]any{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"inventory": stored["inventory"], "plugin_data": plugin})
}

// --- Children (1.83) ---

// getChildren is GET /v1/nodes/{ident}/children.
func (a *API) getChildren(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	q := storage.NodeQuery{ParentNode: &n.UUID, IncludeChildren: true}
	if id := identity.From(r.Context()); id != nil && !id.Unrestricted {
		// Ironic's check_list_policy: a project reader sees its project's
		// children only.
		if q.Project, err = listScope(a.enforcer(), id.Creds, "node", ""); err != nil {
			return err
		}
	}
	kids, err := a.cond.Store().ListNodes(r.Context(), q)
	if err != nil {
		return err
	}
	uuids := make([]string, len(kids))
	for i, k := range kids {
		uuids[i] = k.UUID
	}
	// Ironic's links here is one object, not a list.
	return writeJSON(w, http.StatusOK, map[string]any{
		"children": uuids,
		"links":    link{Href: baseURL(r) + "/v1/nodes?parent_node=" + n.UUID, Rel: "children"},
	})
}

// --- Vendor passthru (1.1) ---

// getNodeVendorMethods is GET /v1/nodes/{ident}/vendor_passthru/methods:
// castiron's vendor interfaces expose no methods.
func (a *API) getNodeVendorMethods(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident")); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{})
}

// getDriverVendorMethods is GET /v1/drivers/{name}/vendor_passthru/methods.
func (a *API) getDriverVendorMethods(w http.ResponseWriter, r *http.Request) error {
	if _, ok := a.cond.Hardware().Get(r.PathValue("name")); !ok {
		return errDriverNotFound(r.PathValue("name"))
	}
	return writeJSON(w, http.StatusOK, map[string]any{})
}

// vendorMethod reads ?method= as Ironic's vendor_passthru does.
func vendorMethod(r *http.Request) (string, error) {
	m := r.URL.Query().Get("method")
	if m == "" {
		return "", errInvalid("Method not specified")
	}
	return m, nil
}

// callNodeVendor is /v1/nodes/{ident}/vendor_passthru?method=...: no method
// has a handler.
func (a *API) callNodeVendor(w http.ResponseWriter, r *http.Request) error {
	m, err := vendorMethod(r)
	if err != nil {
		return err
	}
	if _, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident")); err != nil {
		return err
	}
	return errInvalid("No handler for method %s", m)
}

// callDriverVendor is /v1/drivers/{name}/vendor_passthru?method=....
func (a *API) callDriverVendor(w http.ResponseWriter, r *http.Request) error {
	m, err := vendorMethod(r)
	if err != nil {
		return err
	}
	if _, ok := a.cond.Hardware().Get(r.PathValue("name")); !ok {
		return errDriverNotFound(r.PathValue("name"))
	}
	return errInvalid("No handler for method %s", m)
}

// --- Console (1.1) ---

// getConsole is GET /v1/nodes/{ident}/states/console (and Ironic's
// reachable-by-accident GET /v1/nodes/states/console/{ident}).
func (a *API) getConsole(w http.ResponseWriter, r *http.Request) error {
	enabled, info, err := a.cond.ConsoleInfo(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	var ci any
	if info != nil {
		// The web console's URL is a path of this API's own address.
		if u, ok := info["url"].(string); ok && strings.HasPrefix(u, "/") {
			info["url"] = baseURL(r) + u
		}
		ci = info
	}
	return writeJSON(w, http.StatusOK, map[string]any{"console_enabled": enabled, "console_info": ci})
}

// putConsole is PUT /v1/nodes/{ident}/states/console {"enabled": bool}.
func (a *API) putConsole(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "console")
	if err != nil {
		return err
	}
	raw, ok := body["enabled"]
	if !ok {
		return errInvalid("Missing argument: \"enabled\"")
	}
	for k := range body {
		if k != "enabled" {
			return errInvalid("Unknown argument: \"%s\"", k)
		}
	}
	var enabled bool
	switch t := raw.(type) {
	case bool:
		enabled = t
	case string:
		b, err := parseBoolString(t)
		if err != nil {
			return invalidBool("enabled", t)
		}
		enabled = b
	default:
		return invalidBool("enabled", pyrepr.Repr(raw))
	}
	return accepted(w, a.cond.SetConsole(actorContext(r), r.PathValue("ident"), enabled), baseURL(r)+"/v1/nodes/"+r.PathValue("ident")+"/states/console")
}

// --- RAID (1.12) ---

// unsupportedAs404 is Ironic's RAID endpoints' treatment of
// UnsupportedDriverExtension: the same message, code 404.
func unsupportedAs404(err error) error {
	if errors.Is(err, engine.ErrUnsupportedExtension) {
		return fault.New(fault.NotFound, "%s", err.Error())
	}
	return err
}

// putRAID is PUT /v1/nodes/{ident}/states/raid; the body is the target RAID
// configuration itself (possibly {} to clear it).
func (a *API) putRAID(w http.ResponseWriter, r *http.Request) error {
	if !versionOf(r).AtLeast(12) {
		return errNotAcceptable()
	}
	body, err := decodeObject(r, "target_raid_config")
	if err != nil {
		return err
	}
	return noContent(w, unsupportedAs404(a.cond.SetTargetRAIDConfig(actorContext(r), r.PathValue("ident"), body)))
}

// getRAIDProperties is GET /v1/drivers/{name}/raid/logical_disk_properties.
func (a *API) getRAIDProperties(w http.ResponseWriter, r *http.Request) error {
	if !versionOf(r).AtLeast(12) {
		return errNotAcceptable()
	}
	props, ok := a.cond.RAIDLogicalDiskProperties(r.PathValue("name"))
	if !ok {
		return errDriverNotFound(r.PathValue("name"))
	}
	return writeJSON(w, http.StatusOK, props)
}

// --- VIFs (1.28) ---

// listVIFs is GET /v1/nodes/{ident}/vifs.
func (a *API) listVIFs(w http.ResponseWriter, r *http.Request) error {
	ids, err := a.cond.ListVIFs(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	vifs := make([]map[string]string, len(ids))
	for i, id := range ids {
		vifs[i] = map[string]string{"id": id}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"vifs": vifs})
}

// postVIF is POST /v1/nodes/{ident}/vifs {"id": ..., ["port_uuid" | "portgroup_uuid"]}.
func (a *API) postVIF(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "vif")
	if err != nil {
		return err
	}
	raw, ok := body["id"]
	if !ok {
		return errInvalid("Schema error for vif: 'id' is a required property")
	}
	id, ok := raw.(string)
	if !ok {
		return errInvalid("Schema error for vif: %s is not of type 'string'", pyrepr.Repr(raw))
	}
	if id == "" {
		return errInvalid("Expected UUID or name for id: %s", id)
	}
	req := engine.VIFRequest{ID: id}
	if versionOf(r).AtLeast(67) {
		_, hasPort := body["port_uuid"]
		_, hasGroup := body["portgroup_uuid"]
		if hasPort && hasGroup {
			return errInvalid("Cannot specify both port_uuid and portgroup_uuid")
		}
		req.PortUUID, _ = body["port_uuid"].(string)
		req.PortgroupUUID, _ = body["portgroup_uuid"].(string)
	}
	return noContent(w, a.cond.AttachVIF(actorContext(r), r.PathValue("ident"), req))
}

// deleteVIF is DELETE /v1/nodes/{ident}/vifs/{vif}.
func (a *API) deleteVIF(w http.ResponseWriter, r *http.Request) error {
	return removed(w, r, func(ctx context.Context) error {
		return a.cond.DetachVIF(ctx, r.PathValue("ident"), r.PathValue("vif"))
	})
}
