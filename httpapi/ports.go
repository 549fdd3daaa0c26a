package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

type portField = field[storage.Port]

// portBool is a port's boolean field (Ironic's args.boolean; null stores
// the default).
func portBool(name string, min int, flags fieldFlags, def bool, p func(*storage.Port) *bool) portField {
	return portField{name, min, flags, jsonschema.Types("string", "boolean", "null"), nil, func(_ *viewCtx, x *storage.Port) any { return *p(x) },
		func(x *storage.Port, v any) error {
			*p(x) = def
			if v == nil {
				return nil
			}
			b, err := argBool(name, v)
			*p(x) = b
			return err
		}}
}

// portReqStr is a port's required string field.
func portReqStr(name string, p func(*storage.Port) *string) portField {
	return portField{name, 1, fCreate | fPatch | fRequired | fSort, jsonschema.Types("string"), nil, func(_ *viewCtx, x *storage.Port) any { return *p(x) },
		func(x *storage.Port, v any) error { *p(x) = v.(string); return nil }}
}

// ports is Ironic's port table in its view order.
var portTable = func() *resource[storage.Port] {
	const cp = fCreate | fPatch
	res := newResource("port", []string{"uuid", "address", "links"},
		portField{"created_at", 1, fSort, nil, nil, func(_ *viewCtx, p *storage.Port) any { return ironicTime(p.CreatedAt) }, nil},
		portField{"updated_at", 1, fSort, nil, nil, func(_ *viewCtx, p *storage.Port) any { return timeOrNil(p.UpdatedAt) }, nil},
		portField{"uuid", 1, fCreate | fSort, jsonschema.Types("string", "null"), nil, func(_ *viewCtx, p *storage.Port) any { return p.UUID }, nil},
		portReqStr("address", func(p *storage.Port) *string { return &p.Address }),
		objField("extra", 1, nil, func(p *storage.Port) *storage.JSONObject { return &p.Extra }),
		portField{"internal_info", 18, 0, nil, nil, func(_ *viewCtx, p *storage.Port) any { return p.InternalInfo }, nil},
		portBool("is_smartnic", 53, cp, false, func(p *storage.Port) *bool { return &p.IsSmartNIC }),
		llcField(),
		strField("physical_network", 34, cp|fSort, 64, func(p *storage.Port) **string { return &p.PhysicalNetwork }),
		portBool("pxe_enabled", 19, cp|fSort, true, func(p *storage.Port) *bool { return &p.PXEEnabled }),
		portField{"node_uuid", 1, cp | fSort, jsonschema.Types("string"), nil, func(_ *viewCtx, x *storage.Port) any { return x.NodeUUID },
			func(x *storage.Port, v any) error { x.NodeUUID, _ = v.(string); return nil }},
		// node_ident (1.94) names the node of a new port by name or UUID,
		// in place of node_uuid; createPort resolves it. Never shown.
		portField{"node_ident", 94, cp, jsonschema.Types("string"), nil, nil, nil},
		strField("name", 88, cp|fSort, 0, func(p *storage.Port) **string { return &p.Name }),
		strField("description", 97, cp|fSort, 255, func(p *storage.Port) **string { return &p.Description }),
		strField("vendor", 100, cp|fSort, 32, func(p *storage.Port) **string { return &p.Vendor }),
		strField("category", 101, cp|fSort, 80, func(p *storage.Port) **string { return &p.Category }),
		// Ironic's schema takes a JSON boolean only here (no "true" string,
		// no null); omitted, it is true.
		portField{"available_for_dynamic_portgroup", 111, cp | fSort, jsonschema.Types("boolean"), nil,
			func(_ *viewCtx, x *storage.Port) any { return x.AvailableForDynamicPortgroup },
			func(x *storage.Port, v any) error { x.AvailableForDynamicPortgroup, _ = v.(bool); return nil }},
		strField("portgroup_uuid", 24, cp, 0, func(p *storage.Port) **string { return &p.PortgroupUUID }),
		portField{"links", 1, 0, nil, nil, func(v *viewCtx, p *storage.Port) any { return selfLinks(v, "ports", p.UUID) }, nil},
	)
	// Ironic's PORT_SCHEMA: exactly one of node_ident and node_uuid.
	res.body.OneOf = []*jsonschema.Schema{
		{Required: []string{"node_ident"}, Repr: "{'required': ['node_ident']}"},
		{Required: []string{"node_uuid"}, Repr: "{'required': ['node_uuid']}"},
	}
	// Ironic's PATCH_ALLOWED_FIELDS order.
	res.patchOrder = []string{"address", "extra", "is_smartnic", "local_link_connection", "node_ident", "node_uuid",
		"physical_network", "portgroup_uuid", "pxe_enabled", "name", "description", "vendor", "category",
		"available_for_dynamic_portgroup"}
	return res
}()

// listPorts is GET /v1/ports[/detail] and GET /v1/nodes/{ident}/ports[/detail].
func (a *API) listPorts(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ver := versionOf(r)
		qs := r.URL.Query()
		q := storage.PortQuery{}
		if err := portTable.checkSortKey(r); err != nil {
			return err
		}
		var shards []string
		if qs.Has("shard") {
			if !ver.AtLeast(82) {
				// Ironic's check_allow_filter_by_shard.
				return fault.New(fault.NotAcceptable, "Request not acceptable. The minimal required API version should be 1.82")
			}
			shards = argStringList(qs.Get("shard"))
		}
		nodeIdent := r.PathValue("ident")
		if nodeIdent == "" {
			nodeIdent = qs.Get("node")
			if nodeIdent != "" && !ver.AtLeast(5) {
				return errNotAcceptable()
			}
			if nodeIdent == "" {
				nodeIdent = qs.Get("node_uuid")
			}
		}
		if len(shards) > 0 && (nodeIdent != "" || qs.Get("portgroup") != "") {
			// Ironic's exclusive port filters (node, portgroup, shard).
			return fault.New(fault.Forbidden, "Operation not permitted.")
		}
		if qs.Has("conductor_groups") {
			// 1.99, not gated by Ironic (the version is a signal only).
			if nodeIdent != "" || qs.Get("portgroup") != "" || qs.Get("address") != "" {
				return errInvalid("Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.")
			}
			if len(shards) == 0 {
				// Ironic's elif chain: a shard filter wins.
				if groups := argStringList(qs.Get("conductor_groups")); len(groups) > 0 {
					q.ConductorGroups = groups
				}
			}
		}
		if s := qs.Get("description_contains"); s != "" {
			// Came with 1.97, not gated by Ironic.
			q.DescriptionContains = &s
		}
		if nodeIdent != "" {
			n, err := a.cond.Store().GetNode(r.Context(), nodeIdent)
			if err != nil {
				return err
			}
			q.NodeUUID = &n.UUID
		}
		if addr := qs.Get("address"); addr != "" {
			addr = strings.ToLower(addr)
			q.Address = &addr
		}
		if pg := qs.Get("portgroup"); pg != "" {
			if !ver.AtLeast(24) {
				return errNotAcceptable()
			}
			pgUUID, err := a.portgroupUUID(r.Context(), pg)
			if err != nil {
				return err
			}
			q.PortgroupUUID = &pgUUID
		}
		fields, page, err := portTable.listQuery(r, qs, listOpts{routeDetail: detail})
		if err != nil {
			return err
		}
		q.Page = page
		q.Project = listProject(r)
		if len(shards) > 0 && q.Address == nil {
			// Ironic: an address filter takes precedence over shard.
			q.Shards = shards
		}
		list, err := a.cond.Store().ListPorts(r.Context(), q)
		if err != nil {
			return err
		}
		portTable.writePage(w, r, a.view(r), "ports", "ports", list, func(p *storage.Port) string { return p.UUID }, fields, page)
		return nil
	}
}

func (a *API) getPort(w http.ResponseWriter, r *http.Request) error {
	fields, err := portTable.parseFields(r.URL.Query().Get("fields"), versionOf(r))
	if err != nil {
		return err
	}
	p, err := a.lookupPort(r)
	if err != nil {
		return err
	}
	return portTable.writeOK(w, a.view(r), p, fields)
}

// lookupPort is Ironic's port_ident=args.uuid_or_name check followed by
// objects.Port.get: integer id, UUID, MAC address or name (1.88 port
// names). Ironic does not gate the lookup on the microversion.
func (a *API) lookupPort(r *http.Request) (*storage.Port, error) {
	ident := r.PathValue("uuid")
	if !argUUIDLike(ident) && !argLogicalName(ident) {
		return nil, errInvalid("Expected UUID or name for port_ident: %s", ident)
	}
	return a.cond.Store().LookupPort(r.Context(), ident)
}

// llcKeyRange holds local_link_connection's keys that came later than the
// field itself, with the versions that accept them ([from, until), until 0:
// still accepted): network_type (1.64), the OVN VTEP switch keys (1.90,
// withdrawn at 1.105: Ironic's allow_ovn_vtep_version).
var llcKeyRange = map[string][2]int{"network_type": {64, 0}, "vtep-logical-switch": {90, 105}, "vtep-physical-switch": {90, 105}}

// llcKeyAllowed reports whether ver accepts local_link_connection key k.
func llcKeyAllowed(ver Version, k string) bool {
	r, ok := llcKeyRange[k]
	return !ok || ver.AtLeast(r[0]) && (r[1] == 0 || !ver.AtLeast(r[1]))
}

// llcKeyGate is 406 for a local_link_connection carrying a key the
// request's version does not accept.
func llcKeyGate(ver Version, llc any) error {
	if m, ok := llc.(map[string]any); ok {
		for k := range m {
			if !llcKeyAllowed(ver, k) {
				return errNotAcceptable()
			}
		}
	}
	return nil
}

// llcField is port.local_link_connection (1.19). Outside 1.90 - 1.104 a
// connection holding an OVN VTEP key is shown as {} (Ironic's
// hide_fields_in_newer_versions: clients of those versions expect the key
// but cannot read those values).
func llcField() portField {
	f := objField("local_link_connection", 19, nil, func(p *storage.Port) *storage.JSONObject { return &p.LocalLinkConnection })
	f.get = func(v *viewCtx, p *storage.Port) any {
		if !v.raw && !llcKeyAllowed(v.ver, "vtep-logical-switch") {
			for _, k := range []string{"vtep-logical-switch", "vtep-physical-switch"} {
				if _, has := p.LocalLinkConnection[k]; has {
					return storage.JSONObject{}
				}
			}
		}
		return p.LocalLinkConnection
	}
	return f
}

// createPort is POST /v1/ports.
func (a *API) createPort(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := portTable.readBody(r)
	if err != nil {
		return err
	}
	p := &storage.Port{PXEEnabled: true, AvailableForDynamicPortgroup: true}
	if u, ok := body["uuid"]; ok && u != nil {
		s, isStr := u.(string)
		if _, err := uuid.Parse(s); !isStr || err != nil {
			return errInvalid("Schema error for port: %s is not a 'uuid'", pyrepr.Repr(u))
		}
		p.UUID = strings.ToLower(s)
	}
	return portTable.create(w, r, a.view(r), "ports", p, body,
		func() error {
			if ident, ok := body["node_ident"].(string); ok {
				p.NodeUUID = ident // a name or UUID: the engine looks it up
			}
			return llcKeyGate(ver, body["local_link_connection"])
		},
		func(ctx context.Context, p *storage.Port) error {
			err := a.cond.CreatePort(ctx, p)
			if err := engine.Word(err); fault.Is(err, fault.NotFound) && strings.HasPrefix(err.Error(), "Node ") {
				return fault.New(fault.Invalid, "%s", err.Error()) // Ironic: 400 for an unknown node here
			}
			return err
		})
}

// patchPort is PATCH /v1/ports/{uuid}: the patch schema, the port table's
// patchable fields and versions (only for the fields operations touch),
// then the patched port.
func (a *API) patchPort(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	if ident := r.PathValue("uuid"); !argUUIDLike(ident) && !argLogicalName(ident) {
		return errInvalid("Expected UUID or name for port_ident: %s", ident)
	}
	ops, err := portTable.patchOps(r)
	if err != nil {
		return err
	}
	for key := range llcKeyRange {
		if !llcKeyAllowed(ver, key) && patchTouches(ops, "/local_link_connection/"+key) {
			return errNotAcceptable()
		}
	}
	for _, llc := range patchValues(ops, "/local_link_connection") {
		if err := llcKeyGate(ver, llc); err != nil {
			return err
		}
	}
	target, err := a.lookupPort(r)
	if err != nil {
		return err
	}
	if _, err := a.linkPatch(r, ops, target.NodeUUID); err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdatePort(actorContext(r), target.UUID, func(p *storage.Port) error {
		return portTable.patch(v, p, ops, patchHooks{post: func(before, after map[string]any) error {
			if ver.AtLeast(102) && patchTouches(ops, "/physical_network") && after["portgroup_uuid"] != nil {
				// 1.102: a port in a portgroup takes the portgroup's.
				return errInvalid("physical_network cannot be changed while the port belongs to a portgroup.")
			}
			if node, ok := after["node_uuid"].(string); ok && node != before["node_uuid"] {
				n, err := a.cond.Store().GetNode(r.Context(), node)
				if err != nil {
					return fault.New(fault.Invalid, "%s", engine.Word(err).Error())
				}
				after["node_uuid"] = n.UUID
			}
			return nil
		}})
	})
	if err != nil {
		return err
	}
	return portTable.writeOK(w, a.view(r), updated, nil)
}

func (a *API) deletePort(w http.ResponseWriter, r *http.Request) error {
	return deleteItem(w, r, "uuid", func(id string) error {
		if !argUUIDLike(id) {
			// Ironic's delete takes port_uuid=args.uuid: no name lookup.
			return errInvalid("Expected UUID for port_uuid: %s", id)
		}
		return nil
	}, a.cond.DeletePort)
}

// argStringList is Ironic's args.string_list: comma separated, stripped,
// lower-cased, empty items dropped, duplicates removed in order.
func argStringList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if item != "" && !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out
}
