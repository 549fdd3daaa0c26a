package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"castiron/engine"
	"castiron/storage"
)

type chassisField = viewField[storage.Chassis]

// chassisFields is Ironic's chassis view (API 1.1).
var chassisFields = []chassisField{
	{"uuid", 1, func(_ *viewCtx, c *storage.Chassis) any { return c.UUID }},
	{"created_at", 1, func(_ *viewCtx, c *storage.Chassis) any { return ironicTime(c.CreatedAt) }},
	{"updated_at", 1, func(_ *viewCtx, c *storage.Chassis) any { return timeOrNil(c.UpdatedAt) }},
	{"description", 1, func(_ *viewCtx, c *storage.Chassis) any { return strOrNil(c.Description) }},
	{"extra", 1, func(_ *viewCtx, c *storage.Chassis) any { return c.Extra }},
	{"links", 1, func(v *viewCtx, c *storage.Chassis) any {
		return []link{{Href: v.base + "/v1/chassis/" + c.UUID, Rel: "self"}, {Href: v.base + "/chassis/" + c.UUID, Rel: "bookmark"}}
	}},
	// Ironic's convert_with_links assigns the nodes links with a trailing
	// comma, so every Ironic since 2020 answers a list holding the list of
	// links; its response schema documents that shape, and clients cope.
	{"nodes", 1, func(v *viewCtx, c *storage.Chassis) any {
		p := "chassis/" + c.UUID + "/nodes"
		return [][]link{{{Href: v.base + "/v1/" + p, Rel: "self"}, {Href: v.base + "/" + p, Rel: "bookmark"}}}
	}},
}

var chassisFieldIndex = indexFields(chassisFields)

// chassisSummary is Ironic's DEFAULT_RETURN_FIELDS for chassis lists.
var chassisSummary = []string{"uuid", "description", "links"}

// chassisSortable: every column but the JSON one (Ironic refuses extra).
var chassisSortable = []string{"uuid", "description", "created_at", "updated_at"}

// chassisPatchable is CHASSIS_SCHEMA's properties, in Ironic's order (its
// "Only the following can be updated" message lists them so).
var chassisPatchable = []string{"uuid", "extra", "description"}

func chassisUUIDParam(r *http.Request) (string, error) {
	id := r.PathValue("uuid")
	if !argUUIDLike(id) {
		return "", errInvalid("Expected UUID for chassis_uuid: %s", id)
	}
	return id, nil
}

// listChassis is GET /v1/chassis and /v1/chassis/detail.
func (a *API) listChassis(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ver := versionOf(r)
		qs := r.URL.Query()
		var fields []string
		if !detail {
			d, given, err := collDetailParam(r)
			if err != nil {
				return err
			}
			if fields, err = parseFields(qs.Get("fields"), ver, chassisFields, chassisFieldIndex); err != nil {
				return err
			}
			if fields != nil && d {
				return errInvalid("Can not specify ?detail=True and fields in the same request.")
			}
			if fields == nil && !(given && d) {
				fields = chassisSummary
			}
		}
		if k := qs.Get("sort_key"); k == "extra" {
			return errInvalid("The sort_key value %s is an invalid field for sorting", k)
		}
		if err := collMarkerParam(r); err != nil {
			return err
		}
		page, err := parsePage(qs, chassisSortable)
		if err != nil {
			return err
		}
		items, err := a.cond.Store().ListChassis(r.Context(), page)
		if err != nil {
			return err
		}
		collRender(w, r, a.view(r), "chassis", items, func(c *storage.Chassis) string { return c.UUID },
			chassisFields, chassisFieldIndex, fields, page)
		return nil
	}
}

func (a *API) writeChassis(w http.ResponseWriter, r *http.Request, status int, c *storage.Chassis, fields []string) error {
	collWriteOne(w, a.view(r), status, c, chassisFields, chassisFieldIndex, fields)
	return nil
}

// getChassis is GET /v1/chassis/{uuid}.
func (a *API) getChassis(w http.ResponseWriter, r *http.Request) error {
	id, err := chassisUUIDParam(r)
	if err != nil {
		return err
	}
	fields, err := parseFields(r.URL.Query().Get("fields"), versionOf(r), chassisFields, chassisFieldIndex)
	if err != nil {
		return err
	}
	c, err := a.cond.Store().GetChassis(r.Context(), id)
	if err != nil {
		return err
	}
	return a.writeChassis(w, r, http.StatusOK, c, fields)
}

// applyChassisDoc validates a chassis document (a POST body, or the patched
// chassis under the name "patch") against Ironic's CHASSIS_SCHEMA and its
// uuid validator, and sets c's fields from it. A patched document without a
// uuid clears c.UUID, which the engine refuses as a UUID change.
func applyChassisDoc(c *storage.Chassis, doc map[string]any, what string) error {
	for _, k := range argSortedKeys(doc) {
		if k != "uuid" && k != "extra" && k != "description" {
			return errInvalid("Schema error for %s: Additional properties are not allowed ('%s' was unexpected)", what, k)
		}
	}
	if err := argCheckType(what, doc["uuid"], "string", "null"); err != nil {
		return err
	}
	if err := argCheckType(what, doc["extra"], "object", "null"); err != nil {
		return err
	}
	if err := argCheckType(what, doc["description"], "string", "null"); err != nil {
		return err
	}
	if d, ok := doc["description"].(string); ok && len([]rune(d)) > engine.MaxChassisDescription {
		return errInvalid("Schema error for %s: %s is too long", what, pyRepr(d))
	}
	if u, ok := doc["uuid"].(string); ok && !argUUIDLike(u) {
		return errInvalid("Expected UUID for uuid: %s", u)
	}
	if u, ok := doc["uuid"].(string); ok {
		c.UUID = u
	} else if _, has := doc["uuid"]; has && what == "patch" {
		c.UUID = "" // removing the uuid is changing it
	}
	c.Description = nil
	if d, ok := doc["description"].(string); ok {
		c.Description = &d
	}
	c.Extra = storage.JSONObject{}
	if e, ok := doc["extra"].(map[string]any); ok {
		c.Extra = e
	}
	return nil
}

func argSortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// createChassis is POST /v1/chassis.
func (a *API) createChassis(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "chassis")
	if err != nil {
		return err
	}
	c := &storage.Chassis{}
	if err := applyChassisDoc(c, body, "chassis"); err != nil {
		return err
	}
	c.UUID = strings.ToLower(c.UUID)
	if err := a.cond.CreateChassis(actorContext(r), c); err != nil {
		return err
	}
	w.Header().Set("Location", baseURL(r)+"/v1/chassis/"+c.UUID)
	return a.writeChassis(w, r, http.StatusCreated, c, nil)
}

// patchChassis is PATCH /v1/chassis/{uuid} with Ironic's JSON patch.
func (a *API) patchChassis(w http.ResponseWriter, r *http.Request) error {
	raw, err := decodeAny(r)
	if err != nil {
		return err
	}
	ops, err := patchdocParse(raw)
	if err != nil {
		return err
	}
	if err := patchdocCheckFields(ops, chassisPatchable); err != nil {
		return err
	}
	updated, err := a.cond.UpdateChassis(actorContext(r), r.PathValue("uuid"), func(c *storage.Chassis) error {
		// The document Ironic patches: the object's dict.
		doc := map[string]any{
			"id": c.ID, "uuid": c.UUID, "description": strOrNil(c.Description), "extra": c.Extra,
			"created_at": ironicTime(c.CreatedAt), "updated_at": timeOrNil(c.UpdatedAt),
		}
		patched, err := patchdocApply(doc, ops)
		if err != nil {
			return err
		}
		for _, k := range []string{"id", "created_at", "updated_at"} {
			delete(patched, k)
		}
		if _, has := patched["uuid"]; !has {
			patched["uuid"] = nil
		}
		return applyChassisDoc(c, patched, "patch")
	})
	if err != nil {
		return err
	}
	return a.writeChassis(w, r, http.StatusOK, updated, nil)
}

// deleteChassis is DELETE /v1/chassis/{uuid}.
func (a *API) deleteChassis(w http.ResponseWriter, r *http.Request) error {
	id, err := chassisUUIDParam(r)
	if err != nil {
		return err
	}
	if err := a.cond.DeleteChassis(actorContext(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listChassisNodes is GET /v1/chassis/{uuid}/nodes[/detail]: the node list
// filtered by the chassis (an unknown chassis is a 404, as Ironic's
// chassis_uuid filter answers).
func (a *API) listChassisNodes(detail bool) handlerFunc {
	list := a.listNodes(detail)
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := chassisUUIDParam(r)
		if err != nil {
			return err
		}
		c, err := a.cond.Store().GetChassis(r.Context(), id)
		if err != nil {
			return err
		}
		return list(w, collWithQuery(r, "chassis_uuid", c.UUID))
	}
}

// checkChassisRemoval is Ironic's allow_remove_chassis_uuid, called by the
// node PATCH handler: unsetting a node's chassis_uuid needs API 1.25.
func checkChassisRemoval(ver Version, before any, n *storage.Node) error {
	if before != nil && n.ChassisUUID == nil && !ver.AtLeast(25) {
		return errNotAcceptable()
	}
	return nil
}
