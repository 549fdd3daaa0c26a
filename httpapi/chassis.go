package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"castiron/engine"
	"castiron/engine/jsonschema"
	"castiron/storage"
)

type chassisField = field[storage.Chassis]

// chassisTable is Ironic's chassis table (API 1.1) in its view order.
var chassisTable = func() *resource[storage.Chassis] {
	res := newResource("chassis", []string{"uuid", "description", "links"},
		chassisField{"uuid", 1, fCreate | fPatch | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, c *storage.Chassis) any { return c.UUID },
			func(c *storage.Chassis, v any) error {
				// Removing the uuid is changing it, which the engine refuses.
				u, _ := v.(string)
				if v != nil && !argUUIDLike(u) {
					return errInvalid("Expected UUID for uuid: %s", u)
				}
				c.UUID = u
				return nil
			}},
		chassisField{"created_at", 1, fSort, nil, nil, func(_ *viewCtx, c *storage.Chassis) any { return ironicTime(c.CreatedAt) }, nil},
		chassisField{"updated_at", 1, fSort, nil, nil, func(_ *viewCtx, c *storage.Chassis) any { return timeOrNil(c.UpdatedAt) }, nil},
		strField("description", 1, fCreate|fPatch|fSort, engine.MaxChassisDescription, func(c *storage.Chassis) **string { return &c.Description }),
		objField("extra", 1, nil, func(c *storage.Chassis) *storage.JSONObject { return &c.Extra }),
		chassisField{"links", 1, 0, nil, nil, func(v *viewCtx, c *storage.Chassis) any { return selfLinks(v, "chassis", c.UUID) }, nil},
		// Ironic's convert_with_links assigns the nodes links with a trailing
		// comma, so every Ironic since 2020 answers a list holding the list of
		// links; its response schema documents that shape, and clients cope.
		chassisField{"nodes", 1, 0, nil, nil, func(v *viewCtx, c *storage.Chassis) any {
			return [][]link{selfLinks(v, "chassis", c.UUID+"/nodes")}
		}, nil},
	)
	// CHASSIS_SCHEMA's property order, which Ironic's message follows.
	res.patchOrder = []string{"uuid", "extra", "description"}
	return res
}()

func chassisUUIDParam(r *http.Request) (string, error) {
	id := r.PathValue("uuid")
	return id, checkChassisUUID(id)
}

func checkChassisUUID(id string) error {
	if !argUUIDLike(id) {
		return errInvalid("Expected UUID for chassis_uuid: %s", id)
	}
	return nil
}

// listChassis is GET /v1/chassis and /v1/chassis/detail.
func (a *API) listChassis(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fields, page, err := chassisTable.collQuery(r, detail, []string{"extra"})
		if err != nil {
			return err
		}
		items, err := a.cond.Store().ListChassis(r.Context(), page)
		if err != nil {
			return err
		}
		chassisTable.writePage(w, r, a.view(r), collResourcePath(r), "chassis", items, func(c *storage.Chassis) string { return c.UUID }, fields, page)
		return nil
	}
}

// getChassis is GET /v1/chassis/{uuid}.
func (a *API) getChassis(w http.ResponseWriter, r *http.Request) error {
	id, err := chassisUUIDParam(r)
	if err != nil {
		return err
	}
	fields, err := chassisTable.parseFields(r.URL.Query().Get("fields"), versionOf(r))
	if err != nil {
		return err
	}
	c, err := a.cond.Store().GetChassis(r.Context(), id)
	if err != nil {
		return err
	}
	return chassisTable.writeOK(w, a.view(r), c, fields)
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
	body, err := chassisTable.readBody(r)
	if err != nil {
		return err
	}
	c := &storage.Chassis{}
	return chassisTable.create(w, r, a.view(r), "chassis", c, body,
		func() error { c.UUID = strings.ToLower(c.UUID); return nil }, a.cond.CreateChassis)
}

// patchChassis is PATCH /v1/chassis/{uuid} with Ironic's JSON patch.
func (a *API) patchChassis(w http.ResponseWriter, r *http.Request) error {
	ops, err := chassisTable.patchOps(r)
	if err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdateChassis(actorContext(r), r.PathValue("uuid"), func(c *storage.Chassis) error {
		return chassisTable.patch(v, c, ops, patchHooks{})
	})
	if err != nil {
		return err
	}
	return chassisTable.writeOK(w, a.view(r), updated, nil)
}

// deleteChassis is DELETE /v1/chassis/{uuid}.
func (a *API) deleteChassis(w http.ResponseWriter, r *http.Request) error {
	return deleteItem(w, r, "uuid", checkChassisUUID, a.cond.DeleteChassis)
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
