package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"castiron/engine"
	"castiron/fault"
	"castiron/storage"
)

type portgroupField = viewField[storage.Portgroup]

// portgroupFields is Ironic's portgroup view (API 1.23). mode and properties
// appear at 1.26; physical_network (1.102), category (1.103) and
// dynamic_portgroup (1.111) are past castiron's maximum version.
var portgroupFields = []portgroupField{
	{"uuid", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.UUID }},
	{"created_at", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return ironicTime(pg.CreatedAt) }},
	{"updated_at", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return timeOrNil(pg.UpdatedAt) }},
	{"address", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return strOrNil(pg.Address) }},
	{"extra", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.Extra }},
	{"internal_info", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.InternalInfo }},
	{"mode", 26, func(_ *viewCtx, pg *storage.Portgroup) any { return strOrNil(pg.Mode) }},
	{"name", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return strOrNil(pg.Name) }},
	{"properties", 26, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.Properties }},
	{"standalone_ports_supported", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.StandalonePortsSupported }},
	{"node_uuid", 23, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.NodeUUID }},
	{"links", 23, func(v *viewCtx, pg *storage.Portgroup) any {
		return []link{{Href: v.base + "/v1/portgroups/" + pg.UUID, Rel: "self"}, {Href: v.base + "/portgroups/" + pg.UUID, Rel: "bookmark"}}
	}},
	{"ports", 23, func(v *viewCtx, pg *storage.Portgroup) any {
		p := "portgroups/" + pg.UUID + "/ports"
		return []link{{Href: v.base + "/v1/" + p, Rel: "self"}, {Href: v.base + "/" + p, Rel: "bookmark"}}
	}},
}

var portgroupFieldIndex = indexFields(portgroupFields)

// portgroupSummary is Ironic's _DEFAULT_RETURN_FIELDS for portgroup lists.
var portgroupSummary = []string{"uuid", "address", "name", "links"}

var portgroupSortable = []string{"uuid", "name", "address", "created_at", "updated_at", "mode", "standalone_ports_supported"}

// portgroupUnsortable is Ironic's invalid_sort_key_list for portgroups.
var portgroupUnsortable = []string{"extra", "internal_info", "properties"}

// portgroupPatchable is Ironic's PATCH_ALLOWED_FIELDS for portgroups (up to
// 1.101), in its order.
var portgroupPatchable = []string{"address", "extra", "mode", "name", "node_uuid", "properties", "standalone_ports_supported"}

// portgroupCreatable are the properties of Ironic's PORTGROUP_SCHEMA.
var portgroupCreatable = []string{"address", "extra", "mode", "name", "node_uuid", "properties", "standalone_ports_supported", "uuid"}

// portgroupUUID resolves ?portgroup= of a port list (a UUID or a name) as
// Ironic's port list does: an unknown portgroup is a 404.
func (a *API) portgroupUUID(ctx context.Context, ident string) (string, error) {
	if !argUUIDLike(ident) && !argLogicalName(ident) {
		return "", errInvalid("Expected UUID or name for portgroup: %s", ident)
	}
	pg, err := a.cond.Store().GetPortgroup(ctx, ident)
	if err != nil {
		return "", err
	}
	return pg.UUID, nil
}

func portgroupIdentParam(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	if !argUUIDLike(id) && !argLogicalName(id) {
		return "", errInvalid("Expected UUID or name for %s: %s", name, id)
	}
	return id, nil
}

// checkPortgroupKeys is Ironic's check_allowed_portgroup_fields: mode and
// properties, as fields or sort key, need 1.26.
func checkPortgroupKeys(ver Version, keys ...string) error {
	for _, k := range keys {
		if (k == "mode" || k == "properties") && !ver.AtLeast(26) {
			return errNotAcceptable()
		}
	}
	return nil
}

// listPortgroups is GET /v1/portgroups[/detail] and
// /v1/nodes/{ident}/portgroups[/detail].
func (a *API) listPortgroups(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ver := versionOf(r)
		qs := r.URL.Query()
		q := storage.PortgroupQuery{}
		nodeIdent := r.PathValue("ident")
		if nodeIdent == "" {
			if nodeIdent = qs.Get("node"); nodeIdent != "" && !argUUIDLike(nodeIdent) && !argLogicalName(nodeIdent) {
				return errInvalid("Expected UUID or name for node: %s", nodeIdent)
			}
		}
		if addr := qs.Get("address"); addr != "" {
			mac, err := engine.NormalizeMAC(addr)
			if err != nil {
				return errInvalid("Expected valid MAC address for address: %s", addr)
			}
			q.Address = &mac
		}
		if nodeIdent != "" && q.Address != nil {
			return errInvalid("Filtering by node, address, or shard simultaneously is not supported.")
		}
		var fields []string
		if !detail {
			d, given, err := collDetailParam(r)
			if err != nil {
				return err
			}
			if raw := qs.Get("fields"); raw != "" {
				if err := checkPortgroupKeys(ver, strings.Split(raw, ",")...); err != nil {
					return err
				}
			}
			if fields, err = parseFields(qs.Get("fields"), ver, portgroupFields, portgroupFieldIndex); err != nil {
				return err
			}
			if fields != nil && d {
				return errInvalid("Can not specify ?detail=True and fields in the same request.")
			}
			if fields == nil && !(given && d) {
				fields = portgroupSummary
			}
		}
		k := qs.Get("sort_key")
		if err := checkPortgroupKeys(ver, k); err != nil {
			return err
		}
		for _, bad := range portgroupUnsortable {
			if k == bad {
				return errInvalid("The sort_key value %s is an invalid field for sorting", k)
			}
		}
		if err := collMarkerParam(r); err != nil {
			return err
		}
		page, err := parsePage(qs, portgroupSortable)
		if err != nil {
			return err
		}
		q.Page = page
		if nodeIdent != "" {
			n, err := a.cond.Store().GetNode(r.Context(), nodeIdent)
			if err != nil {
				return err
			}
			q.NodeUUID = &n.UUID
		}
		items, err := a.cond.Store().ListPortgroups(r.Context(), q)
		if err != nil {
			return err
		}
		collRender(w, r, a.view(r), "portgroups", items, func(pg *storage.Portgroup) string { return pg.UUID },
			portgroupFields, portgroupFieldIndex, fields, page)
		return nil
	}
}

func (a *API) writePortgroup(w http.ResponseWriter, r *http.Request, status int, pg *storage.Portgroup, fields []string) error {
	collWriteOne(w, a.view(r), status, pg, portgroupFields, portgroupFieldIndex, fields)
	return nil
}

// getPortgroup is GET /v1/portgroups/{ident} (UUID or name).
func (a *API) getPortgroup(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	id, err := portgroupIdentParam(r, "ident")
	if err != nil {
		return errInvalid("Expected UUID or name for portgroup_ident: %s", r.PathValue("ident"))
	}
	raw := r.URL.Query().Get("fields")
	if raw != "" {
		if err := checkPortgroupKeys(ver, strings.Split(raw, ",")...); err != nil {
			return err
		}
	}
	fields, err := parseFields(raw, ver, portgroupFields, portgroupFieldIndex)
	if err != nil {
		return err
	}
	pg, err := a.cond.Store().GetPortgroup(r.Context(), id)
	if err != nil {
		return err
	}
	return a.writePortgroup(w, r, http.StatusOK, pg, fields)
}

// applyPortgroupDoc checks a portgroup document (a POST body, or the patched
// portgroup under the name "patch") against Ironic's PORTGROUP_SCHEMA and
// its validators (MAC address, UUIDs, boolean), and sets pg's fields from
// it. Creation fills uuid; a patch never changes it.
func applyPortgroupDoc(pg *storage.Portgroup, doc map[string]any, what string) error {
	for _, k := range argSortedKeys(doc) {
		if !slices.Contains(portgroupCreatable, k) {
			return errInvalid("Schema error for %s: Additional properties are not allowed ('%s' was unexpected)", what, k)
		}
	}
	if _, has := doc["node_uuid"]; !has {
		return errInvalid("Schema error for %s: 'node_uuid' is a required property", what)
	}
	types := map[string][]string{
		"address": {"string", "null"}, "extra": {"object", "null"}, "mode": {"string", "null"},
		"name": {"string", "null"}, "node_uuid": {"string"}, "properties": {"object", "null"},
		"standalone_ports_supported": {"string", "boolean", "null"}, "uuid": {"string", "null"},
	}
	for _, k := range portgroupCreatable {
		if v, has := doc[k]; has {
			if err := argCheckType(what, v, types[k]...); err != nil {
				return err
			}
		}
	}
	pg.Address = nil
	if s, ok := doc["address"].(string); ok {
		mac, err := engine.NormalizeMAC(s)
		if err != nil {
			return errInvalid("Expected valid MAC address for address: %s", s)
		}
		pg.Address = &mac
	}
	node := doc["node_uuid"].(string)
	if !argUUIDLike(node) {
		return errInvalid("Expected UUID for node_uuid: %s", node)
	}
	pg.NodeUUID = node
	pg.StandalonePortsSupported = true
	if v := doc["standalone_ports_supported"]; v != nil {
		b, err := argBool("standalone_ports_supported", v)
		if err != nil {
			return err
		}
		pg.StandalonePortsSupported = b
	}
	if what != "patch" {
		if u, ok := doc["uuid"].(string); ok {
			if !argUUIDLike(u) {
				return errInvalid("Expected UUID for uuid: %s", u)
			}
			pg.UUID = strings.ToLower(u)
		}
	}
	pg.Name = nil
	if s, ok := doc["name"].(string); ok && s != "" {
		pg.Name = &s
	}
	pg.Mode = nil
	if s, ok := doc["mode"].(string); ok {
		pg.Mode = &s
	}
	pg.Extra = storage.JSONObject{}
	if m, ok := doc["extra"].(map[string]any); ok {
		pg.Extra = m
	}
	pg.Properties = storage.JSONObject{}
	if m, ok := doc["properties"].(map[string]any); ok {
		pg.Properties = m
	}
	return nil
}

// pythonTruth is Python's truth of a JSON value.
func pythonTruth(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	case map[string]any:
		return len(t) > 0
	case []any:
		return len(t) > 0
	case int64:
		return t != 0
	case float64:
		return t != 0
	}
	return true
}

// createPortgroup is POST /v1/portgroups.
func (a *API) createPortgroup(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := decodeObject(r, "portgroup")
	if err != nil {
		return err
	}
	pg := &storage.Portgroup{}
	if err := applyPortgroupDoc(pg, body, "portgroup"); err != nil {
		return err
	}
	// Ironic looks the node up before the version and name checks.
	if _, err := a.cond.Store().GetNode(r.Context(), pg.NodeUUID); fault.Is(err, fault.NotFound) {
		return fault.New(fault.Invalid, "%s", err.Error())
	} else if err != nil {
		return err
	}
	if !ver.AtLeast(26) && (pythonTruth(body["mode"]) || pythonTruth(body["properties"])) {
		return errNotAcceptable()
	}
	if s, ok := body["name"].(string); ok && s != "" && !argLogicalName(s) {
		return errInvalid("Cannot create portgroup with invalid name '%s'", s)
	}
	if err := a.cond.CreatePortgroup(actorContext(r), pg); err != nil {
		return err
	}
	w.Header().Set("Location", baseURL(r)+"/v1/portgroups/"+pg.UUID)
	return a.writePortgroup(w, r, http.StatusCreated, pg, nil)
}

// patchPortgroup is PATCH /v1/portgroups/{ident} with Ironic's JSON patch.
func (a *API) patchPortgroup(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	ident := r.PathValue("ident")
	if !argUUIDLike(ident) && !argLogicalName(ident) {
		return errInvalid("Expected UUID or name for portgroup_ident: %s", ident)
	}
	raw, err := decodeAny(r)
	if err != nil {
		return err
	}
	ops, err := patchdocParse(raw)
	if err != nil {
		return err
	}
	if _, err := a.cond.Store().GetPortgroup(r.Context(), ident); err != nil {
		return err
	}
	if !ver.AtLeast(26) && (patchdocTouches(ops, "/mode") || patchdocTouches(ops, "/properties")) {
		return errNotAcceptable()
	}
	if err := patchdocCheckFields(ops, portgroupPatchable); err != nil {
		return err
	}
	for _, op := range ops {
		if op["path"] == "/name" && op["op"] != "remove" && pythonTruth(op["value"]) {
			if s, ok := op["value"].(string); !ok || !argLogicalName(s) {
				return errInvalid("Portgroup %s: Cannot change name to invalid name '%s'", ident, argPyStr(op["value"]))
			}
		}
	}
	updated, err := a.cond.UpdatePortgroup(actorContext(r), ident, func(pg *storage.Portgroup) error {
		// The document Ironic patches: the object's dict with node_uuid
		// in place of node_id.
		doc := map[string]any{
			"id": pg.ID, "uuid": pg.UUID, "name": strOrNil(pg.Name), "node_uuid": pg.NodeUUID,
			"address": strOrNil(pg.Address), "extra": pg.Extra, "internal_info": pg.InternalInfo,
			"standalone_ports_supported": pg.StandalonePortsSupported, "mode": strOrNil(pg.Mode),
			"properties": pg.Properties, "created_at": ironicTime(pg.CreatedAt), "updated_at": timeOrNil(pg.UpdatedAt),
		}
		patched, err := patchdocApply(doc, ops)
		if err != nil {
			return err
		}
		for _, k := range []string{"mode", "node_uuid", "standalone_ports_supported"} {
			// Ironic refuses removing mode; node_uuid and a null
			// standalone_ports_supported it cannot store either (a 500
			// there).
			if v, has := patched[k]; !has || (v == nil && k != "mode") {
				return errInvalid("'%s' is a mandatory attribute and can not be removed", k)
			}
		}
		// patched_validate_with_schema drops what the schema lacks.
		for _, k := range []string{"id", "uuid", "internal_info", "created_at", "updated_at"} {
			delete(patched, k)
		}
		internal := pg.InternalInfo
		if err := applyPortgroupDoc(pg, patched, "patch"); err != nil {
			return err
		}
		pg.InternalInfo = internal
		return nil
	})
	if err != nil {
		return err
	}
	return a.writePortgroup(w, r, http.StatusOK, updated, nil)
}

// argPyStr is Python's str() of a JSON value, for messages that format one.
func argPyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// deletePortgroup is DELETE /v1/portgroups/{ident}.
func (a *API) deletePortgroup(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if !argUUIDLike(ident) && !argLogicalName(ident) {
		return errInvalid("Expected a logical name or UUID but received %s.", ident)
	}
	if err := a.cond.DeletePortgroup(actorContext(r), ident); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listPortgroupPorts is GET /v1/portgroups/{portgroup}/ports[/detail]
// (1.24): the port list filtered by the portgroup.
func (a *API) listPortgroupPorts(detail bool) handlerFunc {
	list := a.listPorts(detail)
	return func(w http.ResponseWriter, r *http.Request) error {
		ident, err := portgroupIdentParam(r, "portgroup")
		if err != nil {
			return err
		}
		qs := r.URL.Query()
		if qs.Get("node") != "" || qs.Get("node_uuid") != "" {
			// Ironic's exclusive port filters: OperationNotPermitted.
			return fault.New(fault.Forbidden, "Operation not permitted.")
		}
		pg, err := a.cond.Store().GetPortgroup(r.Context(), ident)
		if err != nil {
			return err
		}
		return list(w, collWithQuery(r, "portgroup", pg.UUID))
	}
}
