package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"

	"castiron/fault"
	"castiron/storage"
)

type portField = viewField[storage.Port]

// portFields is Ironic's port view.
var portFields = []portField{
	{"created_at", 1, func(_ *viewCtx, p *storage.Port) any { return ironicTime(p.CreatedAt) }},
	{"updated_at", 1, func(_ *viewCtx, p *storage.Port) any { return timeOrNil(p.UpdatedAt) }},
	{"uuid", 1, func(_ *viewCtx, p *storage.Port) any { return p.UUID }},
	{"address", 1, func(_ *viewCtx, p *storage.Port) any { return p.Address }},
	{"extra", 1, func(_ *viewCtx, p *storage.Port) any { return p.Extra }},
	{"internal_info", 18, func(_ *viewCtx, p *storage.Port) any { return p.InternalInfo }},
	{"is_smartnic", 53, func(_ *viewCtx, p *storage.Port) any { return p.IsSmartNIC }},
	{"local_link_connection", 19, func(_ *viewCtx, p *storage.Port) any { return p.LocalLinkConnection }},
	{"physical_network", 34, func(_ *viewCtx, p *storage.Port) any { return strOrNil(p.PhysicalNetwork) }},
	{"pxe_enabled", 19, func(_ *viewCtx, p *storage.Port) any { return p.PXEEnabled }},
	{"node_uuid", 1, func(_ *viewCtx, p *storage.Port) any { return p.NodeUUID }},
	{"name", 88, func(_ *viewCtx, p *storage.Port) any { return strOrNil(p.Name) }},
	{"portgroup_uuid", 24, func(_ *viewCtx, p *storage.Port) any { return strOrNil(p.PortgroupUUID) }},
	{"links", 1, func(v *viewCtx, p *storage.Port) any {
		return []link{{Href: v.base + "/v1/ports/" + p.UUID, Rel: "self"}, {Href: v.base + "/ports/" + p.UUID, Rel: "bookmark"}}
	}},
}

var portFieldIndex = indexFields(portFields)

var portSummary = []string{"uuid", "address", "links"}

var portSortable = []string{"uuid", "address", "created_at", "updated_at", "node_uuid", "pxe_enabled", "physical_network", "name"}

// listPorts is GET /v1/ports[/detail] and GET /v1/nodes/{ident}/ports[/detail].
func (a *API) listPorts(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		detail := detail // per request: ?detail=true must not stick to the route
		ver := versionOf(r)
		qs := r.URL.Query()
		q := storage.PortQuery{}
		if err := sortKeyGate(r, portFields, portFieldIndex); err != nil {
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
		if d := qs.Get("detail"); d != "" {
			b, err := parseBoolString(d)
			if err != nil {
				return errInvalid("Invalid value for detail: %s", d)
			}
			if !ver.AtLeast(43) {
				return errInvalid("Invalid query parameter ?detail=%s received.", pyRepr(b))
			}
			detail = detail || b
		}
		fields, err := parseFields(qs.Get("fields"), ver, portFields, portFieldIndex)
		if err != nil {
			return err
		}
		if fields != nil && detail {
			return errInvalid("Can not specify ?detail=True and fields in the same request.")
		}
		if fields == nil && !detail {
			fields = portSummary
		}
		page, err := parsePage(qs, portSortable)
		if err != nil {
			return err
		}
		q.Page = page
		if len(shards) > 0 && q.Address == nil {
			// Ironic: an address filter takes precedence over shard.
			q.Shards = shards
		}
		ports, err := a.cond.Store().ListPorts(r.Context(), q)
		if err != nil {
			return err
		}
		renderList(w, r, a.view(r), "ports", ports, func(p *storage.Port) string { return p.UUID },
			portFields, portFieldIndex, fields, page)
		return nil
	}
}

func (a *API) writePort(w http.ResponseWriter, r *http.Request, status int, p *storage.Port, fields []string) error {
	var buf bytes.Buffer
	renderView(&buf, a.view(r), p, portFields, portFieldIndex, fields)
	writeRaw(w, status, buf.Bytes())
	return nil
}

func (a *API) getPort(w http.ResponseWriter, r *http.Request) error {
	fields, err := parseFields(r.URL.Query().Get("fields"), versionOf(r), portFields, portFieldIndex)
	if err != nil {
		return err
	}
	p, err := a.lookupPort(r)
	if err != nil {
		return err
	}
	return a.writePort(w, r, http.StatusOK, p, fields)
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

// portSettable are the port fields POST and PATCH accept, with their versions.
var portSettable = map[string]int{
	"address": 1, "node_uuid": 1, "extra": 1, "local_link_connection": 19, "pxe_enabled": 19,
	"physical_network": 34, "portgroup_uuid": 24, "is_smartnic": 53, "name": 88,
}

// applyPortFields sets p's fields from a decoded body or patched document.
func applyPortFields(p *storage.Port, doc map[string]any, ver Version) error {
	for k, val := range doc {
		min, ok := portSettable[k]
		if !ok {
			continue
		}
		if !ver.AtLeast(min) {
			return errNotAcceptable()
		}
		switch k {
		case "address", "node_uuid":
			s, ok := val.(string)
			if !ok {
				return errInvalid("Schema error for port: %s is not of type 'string'", pyRepr(val))
			}
			if k == "address" {
				p.Address = s
			} else {
				p.NodeUUID = s
			}
		case "extra", "local_link_connection":
			m := storage.JSONObject{}
			if val != nil {
				mm, ok := val.(map[string]any)
				if !ok {
					return errInvalid("Schema error for port: %s is not of type 'object'", pyRepr(val))
				}
				m = mm
			}
			if k == "extra" {
				p.Extra = m
			} else {
				p.LocalLinkConnection = m
			}
		case "pxe_enabled", "is_smartnic":
			b := k == "pxe_enabled" // defaults: pxe_enabled true, is_smartnic false
			switch t := val.(type) {
			case nil:
			case bool:
				b = t
			case string:
				var err error
				if b, err = parseBoolString(t); err != nil {
					return errInvalid("Schema error for port: %s is not a boolean", pyRepr(val))
				}
			default:
				return errInvalid("Schema error for port: %s is not a boolean", pyRepr(val))
			}
			if k == "pxe_enabled" {
				p.PXEEnabled = b
			} else {
				p.IsSmartNIC = b
			}
		case "physical_network", "portgroup_uuid", "name":
			var sp *string
			if val != nil {
				s, ok := val.(string)
				if !ok {
					return errInvalid("Schema error for port: %s is not of type 'string'", pyRepr(val))
				}
				if k == "physical_network" && len(s) > 64 {
					return errInvalid("Schema error for port: '%s' is too long", s)
				}
				sp = &s
			}
			switch k {
			case "physical_network":
				p.PhysicalNetwork = sp
			case "portgroup_uuid":
				p.PortgroupUUID = sp
			default:
				p.Name = sp
			}
		}
	}
	return nil
}

// createPort is POST /v1/ports.
func (a *API) createPort(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := decodeObject(r, "port")
	if err != nil {
		return err
	}
	for k := range body {
		if _, ok := portSettable[k]; !ok && k != "uuid" {
			return errInvalid("Schema error for port: Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	if _, ok := body["address"]; !ok {
		return errInvalid("Schema error for port: 'address' is a required property")
	}
	if _, ok := body["node_uuid"]; !ok {
		return errInvalid("Schema error for port: 'node_uuid' is a required property")
	}
	p := &storage.Port{PXEEnabled: true}
	if u, ok := body["uuid"]; ok && u != nil {
		s, isStr := u.(string)
		if _, err := uuid.Parse(s); !isStr || err != nil {
			return errInvalid("Schema error for port: %s is not a 'uuid'", pyRepr(u))
		}
		p.UUID = strings.ToLower(s)
	}
	if err := applyPortFields(p, body, ver); err != nil {
		return err
	}
	if _, has := p.LocalLinkConnection["network_type"]; has && !ver.AtLeast(64) {
		return errNotAcceptable() // local_link_connection.network_type is 1.64
	}
	if err := a.cond.CreatePort(actorContext(r), p); err != nil {
		if fault.Is(err, fault.NotFound) && strings.HasPrefix(err.Error(), "Node ") {
			return fault.New(fault.Invalid, "%s", err.Error()) // Ironic: 400 for an unknown node here
		}
		return err
	}
	w.Header().Set("Location", baseURL(r)+"/v1/ports/"+p.UUID)
	return a.writePort(w, r, http.StatusCreated, p, nil)
}

// patchPort is PATCH /v1/ports/{uuid}.
func (a *API) patchPort(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	if ident := r.PathValue("uuid"); !argUUIDLike(ident) && !argLogicalName(ident) {
		return errInvalid("Expected UUID or name for port_ident: %s", ident)
	}
	raw, err := decodeAny(r)
	if err != nil {
		return err
	}
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return errInvalid("Invalid input for field/attribute patch. Value should be a non-empty list of JSON patch operations")
	}
	var patchable []string
	for k, min := range portSettable {
		if ver.AtLeast(min) {
			patchable = append(patchable, k)
		}
	}
	slices.Sort(patchable)
	for _, item := range list {
		op, _ := item.(map[string]any)
		path, _ := op["path"].(string)
		if root := rootOf(path); !slices.Contains(patchable, root) {
			return errInvalid("Cannot patch /%s. Only the following can be updated: %s", root, strings.Join(patchable, ", "))
		}
		llc, _ := op["value"].(map[string]any)
		if _, has := llc["network_type"]; ((has && path == "/local_link_connection") || path == "/local_link_connection/network_type") && !ver.AtLeast(64) {
			return errNotAcceptable() // local_link_connection.network_type is 1.64
		}
	}
	patchJSON, _ := json.Marshal(list)
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return errInvalid("Invalid JSON patch: %v", err)
	}
	target, err := a.lookupPort(r)
	if err != nil {
		return err
	}
	updated, err := a.cond.UpdatePort(actorContext(r), target.UUID, func(p *storage.Port) error {
		doc := map[string]any{}
		v := a.view(r)
		for _, f := range portFields {
			doc[f.name] = f.get(v, p)
		}
		docJSON, _ := json.Marshal(doc)
		out, err := patch.Apply(docJSON)
		if err != nil {
			return errInvalid("Invalid JSON patch: %v", err)
		}
		var result map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&result); err != nil {
			return err
		}
		result = normalizeNumbers(result).(map[string]any)
		for _, k := range patchable {
			if _, present := result[k]; !present {
				if k == "address" || k == "node_uuid" {
					return errInvalid("'%s' is a mandatory attribute and can not be removed", k)
				}
				result[k] = nil
			}
		}
		if n, err := a.cond.Store().GetNode(r.Context(), result["node_uuid"].(string)); err == nil {
			result["node_uuid"] = n.UUID
		} else {
			return fault.New(fault.Invalid, "%s", err.Error())
		}
		return applyPortFields(p, result, ver)
	})
	if err != nil {
		return err
	}
	return a.writePort(w, r, http.StatusOK, updated, nil)
}

func (a *API) deletePort(w http.ResponseWriter, r *http.Request) error {
	if id := r.PathValue("uuid"); !argUUIDLike(id) {
		// Ironic's delete takes port_uuid=args.uuid: no name lookup.
		return errInvalid("Expected UUID for port_uuid: %s", id)
	}
	if err := a.cond.DeletePort(actorContext(r), r.PathValue("uuid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
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
