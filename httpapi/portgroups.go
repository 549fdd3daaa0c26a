package httpapi

import (
	"context"
	"net/http"
	"strings"

	"castiron/engine"
	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

type portgroupField = field[storage.Portgroup]

// portgroupTable is Ironic's portgroup table (API 1.23) in its view order.
// mode and properties (1.26) are shown from 1.23, as Ironic 21.4 shows them
// (the stock tempest plugin reads them there).
var portgroupTable = func() *resource[storage.Portgroup] {
	res := newResource("portgroup", []string{"uuid", "address", "name", "links"},
		portgroupField{"uuid", 23, fCreate | fSort, jsonschema.Types("string", "null"), nil, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.UUID }, nil},
		portgroupField{"created_at", 23, fSort, nil, nil, func(_ *viewCtx, pg *storage.Portgroup) any { return ironicTime(pg.CreatedAt) }, nil},
		portgroupField{"updated_at", 23, fSort, nil, nil, func(_ *viewCtx, pg *storage.Portgroup) any { return timeOrNil(pg.UpdatedAt) }, nil},
		portgroupField{"address", 23, fCreate | fPatch | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, pg *storage.Portgroup) any { return strOrNil(pg.Address) },
			func(pg *storage.Portgroup, v any) error {
				pg.Address = nil
				if s, ok := v.(string); ok {
					mac, err := engine.NormalizeMAC(s)
					if err != nil {
						return errInvalid("Expected valid MAC address for address: %s", s)
					}
					pg.Address = &mac
				}
				return nil
			}},
		objField("extra", 23, nil, func(pg *storage.Portgroup) *storage.JSONObject { return &pg.Extra }),
		portgroupField{"internal_info", 23, 0, nil, nil, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.InternalInfo }, nil},
		portgroupField{"mode", 26, fCreate | fPatch | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, pg *storage.Portgroup) any { return strOrNil(pg.Mode) },
			func(pg *storage.Portgroup, v any) error { pg.Mode = optString(v); return nil }},
		portgroupField{"name", 23, fCreate | fPatch | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, pg *storage.Portgroup) any { return strOrNil(pg.Name) },
			func(pg *storage.Portgroup, v any) error {
				pg.Name = nil
				if s, ok := v.(string); ok && s != "" {
					pg.Name = &s
				}
				return nil
			}},
		objField("properties", 26, nil, func(pg *storage.Portgroup) *storage.JSONObject { return &pg.Properties }),
		portgroupField{"standalone_ports_supported", 23, fCreate | fPatch | fSort, jsonschema.Types("string", "boolean", "null"), nil,
			func(_ *viewCtx, pg *storage.Portgroup) any { return pg.StandalonePortsSupported },
			func(pg *storage.Portgroup, v any) error {
				pg.StandalonePortsSupported = true
				if v == nil {
					return nil
				}
				b, err := argBool("standalone_ports_supported", v)
				pg.StandalonePortsSupported = b
				return err
			}},
		portgroupField{"node_uuid", 23, fCreate | fPatch | fRequired, jsonschema.Types("string"), nil,
			func(_ *viewCtx, pg *storage.Portgroup) any { return pg.NodeUUID },
			func(pg *storage.Portgroup, v any) error {
				node := v.(string)
				if !argUUIDLike(node) {
					return errInvalid("Expected UUID for node_uuid: %s", node)
				}
				pg.NodeUUID = node
				return nil
			}},
		strField("physical_network", 102, fCreate|fPatch|fSort, 64, func(pg *storage.Portgroup) **string { return &pg.PhysicalNetwork }),
		strField("category", 103, fCreate|fPatch|fSort, 80, func(pg *storage.Portgroup) **string { return &pg.Category }),
		portgroupField{"dynamic_portgroup", 111, fSort, nil, nil, func(_ *viewCtx, pg *storage.Portgroup) any { return pg.DynamicPortgroup }, nil},
		portgroupField{"links", 23, 0, nil, nil, func(v *viewCtx, pg *storage.Portgroup) any { return selfLinks(v, "portgroups", pg.UUID) }, nil},
		portgroupField{"ports", 23, 0, nil, nil, func(v *viewCtx, pg *storage.Portgroup) any {
			return selfLinks(v, "portgroups", pg.UUID+"/ports")
		}, nil},
	)
	res.shownFrom = map[string]int{"mode": 23, "properties": 23}
	// Ironic's PATCH_ALLOWED_FIELDS order.
	res.patchOrder = []string{"address", "extra", "mode", "name", "node_uuid", "properties", "standalone_ports_supported",
		"physical_network", "category"}
	res.gateFirstOp = true
	return res
}()

// portgroupUnsortable is Ironic's invalid_sort_key_list for portgroups.
var portgroupUnsortable = []string{"extra", "internal_info", "properties"}

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

// listPortgroups is GET /v1/portgroups[/detail] and
// /v1/nodes/{ident}/portgroups[/detail].
func (a *API) listPortgroups(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
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
		var shards, groups []string
		if qs.Has("shard") {
			if !versionOf(r).AtLeast(106) {
				// Ironic's check_allow_portgroup_filter_by_shard.
				return fault.New(fault.NotAcceptable, "Request not acceptable. The minimal required API version should be 1.106")
			}
			shards = argStringList(qs.Get("shard"))
		}
		if qs.Has("conductor_groups") {
			groups = argStringList(qs.Get("conductor_groups")) // 1.99, not gated by Ironic
		}
		exclusive := 0
		for _, set := range []bool{nodeIdent != "", q.Address != nil, len(shards) > 0, len(groups) > 0} {
			if set {
				exclusive++
			}
		}
		if exclusive > 1 {
			return errInvalid("Filtering by node, address, or shard simultaneously is not supported.")
		}
		if len(shards) > 0 {
			q.Shards = shards
		}
		if len(groups) > 0 {
			q.ConductorGroups = groups
		}
		fields, page, err := portgroupTable.collQuery(r, detail, portgroupUnsortable)
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
		q.Project = listProject(r)
		items, err := a.cond.Store().ListPortgroups(r.Context(), q)
		if err != nil {
			return err
		}
		portgroupTable.writePage(w, r, a.view(r), collResourcePath(r), "portgroups", items, func(pg *storage.Portgroup) string { return pg.UUID }, fields, page)
		return nil
	}
}

// getPortgroup is GET /v1/portgroups/{ident} (UUID or name).
func (a *API) getPortgroup(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	id, err := portgroupIdentParam(r, "ident")
	if err != nil {
		return errInvalid("Expected UUID or name for portgroup_ident: %s", r.PathValue("ident"))
	}
	fields, err := portgroupTable.parseFields(r.URL.Query().Get("fields"), ver)
	if err != nil {
		return err
	}
	pg, err := lookupWithSuffix(r, id, a.cond.Store().GetPortgroup)
	if err != nil {
		return err
	}
	return portgroupTable.writeOK(w, a.view(r), pg, fields)
}

// createPortgroup is POST /v1/portgroups.
func (a *API) createPortgroup(w http.ResponseWriter, r *http.Request) error {
	body, err := portgroupTable.readBody(r)
	if err != nil {
		return err
	}
	pg := &storage.Portgroup{StandalonePortsSupported: true}
	if u, ok := body["uuid"].(string); ok {
		if !argUUIDLike(u) {
			return errInvalid("Expected UUID for uuid: %s", u)
		}
		pg.UUID = strings.ToLower(u)
	}
	return portgroupTable.create(w, r, a.view(r), "portgroups", pg, body, func() error {
		if _, err := a.cond.Store().GetNode(r.Context(), pg.NodeUUID); fault.Is(err, fault.NotFound) {
			return fault.New(fault.Invalid, "%s", engine.Word(err).Error())
		} else if err != nil {
			return err
		}
		if s, ok := body["name"].(string); ok && s != "" && !argLogicalName(s) {
			return errInvalid("Cannot create portgroup with invalid name '%s'", s)
		}
		return nil
	}, a.cond.CreatePortgroup)
}

// portgroupMandatory refuses a patch that removes mode (as Ironic does),
// node_uuid or standalone_ports_supported, or nulls either of the latter
// (Ironic cannot store them: a 500 there).
func portgroupMandatory(_, after map[string]any) error {
	for _, k := range []string{"mode", "node_uuid", "standalone_ports_supported"} {
		if v, has := after[k]; !has || (v == nil && k != "mode") {
			return errInvalid("'%s' is a mandatory attribute and can not be removed", k)
		}
	}
	return nil
}

// patchPortgroup is PATCH /v1/portgroups/{ident} with Ironic's JSON patch.
func (a *API) patchPortgroup(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	ident := r.PathValue("ident")
	if !argUUIDLike(ident) && !argLogicalName(ident) {
		return errInvalid("Expected UUID or name for portgroup_ident: %s", ident)
	}
	ops, err := readPatch(r)
	if err != nil {
		return err
	}
	cur, err := a.cond.Store().GetPortgroup(r.Context(), ident)
	if err != nil {
		return err
	}
	if err := portgroupTable.checkPatch(ops, ver); err != nil {
		return err
	}
	for _, name := range patchValues(ops, "/name") {
		if pyrepr.Truth(name) && !jsvLogicalName(name) {
			return errInvalid("Portgroup %s: Cannot change name to invalid name '%s'", ident, pyrepr.Str(name))
		}
	}
	moved, err := a.linkPatch(r, ops, cur.NodeUUID)
	if err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdatePortgroup(actorContext(r), ident, func(pg *storage.Portgroup) error {
		return portgroupTable.patch(v, pg, ops, patchHooks{pre: func(before, after map[string]any) error {
			if moved != nil {
				// Ironic stores the linked node's UUID, whatever named it.
				after["node_uuid"] = moved.UUID
			}
			return portgroupMandatory(before, after)
		}})
	})
	if err != nil {
		return err
	}
	return portgroupTable.writeOK(w, a.view(r), updated, nil)
}

// deletePortgroup is DELETE /v1/portgroups/{ident}.
func (a *API) deletePortgroup(w http.ResponseWriter, r *http.Request) error {
	return deleteItem(w, r, "ident", func(ident string) error {
		if !argUUIDLike(ident) && !argLogicalName(ident) {
			return errInvalid("Expected a logical name or UUID but received %s.", ident)
		}
		return nil
	}, a.cond.DeletePortgroup)
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
