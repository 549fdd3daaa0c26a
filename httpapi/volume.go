package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/httpapi/identity"
	"castiron/storage"
)

// Volume connectors and targets (API 1.32), as Ironic's v1/volume.py,
// volume_connector.py and volume_target.py serve them: /v1/volume (links),
// /v1/volume/{connectors,targets}[/{uuid}] and, read-only, the same under
// /v1/nodes/{ident}/volume. Requests are checked in Ironic's order (its
// args.validate, then the request schemas, then lookups, then the
// conductor's lock and power checks), with Ironic's messages.

// volumeMinMinor is MINOR_32_VOLUME.
const volumeMinMinor = 32

// errMalformedURI is Ironic's MalformedRequestURI: a write or a single
// connector/target addressed below /v1/nodes/{ident}/volume.
func errMalformedURI() error { return errInvalid("Malformed request URI.") }

// getVolume is GET /v1/volume and /v1/nodes/{ident}/volume: links only (the
// node is not looked up, as in Ironic).
func (a *API) getVolume(w http.ResponseWriter, r *http.Request) error {
	base := baseURL(r)
	prefix := "volume/"
	if ident := r.PathValue("ident"); ident != "" {
		prefix = "nodes/" + ident + "/volume/"
	}
	mk := func(sub string) []link {
		return []link{{Href: base + "/v1/" + prefix + sub, Rel: "self"}, {Href: base + "/" + prefix + sub, Rel: "bookmark"}}
	}
	var buf bytes.Buffer
	buf.WriteString(`{"links": `)
	appendJSON(&buf, mk(""))
	buf.WriteString(`, "connectors": `)
	appendJSON(&buf, mk("connectors"))
	buf.WriteString(`, "targets": `)
	appendJSON(&buf, mk("targets"))
	buf.WriteByte('}')
	writeRaw(w, http.StatusOK, buf.Bytes())
	return nil
}

// --- Views ---

type connectorField = field[storage.VolumeConnector]
type targetField = field[storage.VolumeTarget]

// volumeStr is a connector's or target's required string field.
func volumeStr[T any](name string, p func(*T) *string) field[T] {
	return field[T]{name, volumeMinMinor, fCreate | fPatch | fRequired | fSort, jsonschema.Types("string"), nil,
		func(_ *viewCtx, x *T) any { return *p(x) },
		func(x *T, v any) error { *p(x) = v.(string); return nil }}
}

// volumeCommon are the fields both views start with (uuid, created_at,
// updated_at) and end with (links, node_uuid).
func volumeHead[T any](uuidOf func(*T) string, created func(*T) time.Time, updated func(*T) *time.Time) []field[T] {
	return []field[T]{
		{"uuid", volumeMinMinor, fCreate | fSort, jsonschema.Types("string", "null"), nil, func(_ *viewCtx, x *T) any { return uuidOf(x) }, nil},
		{"created_at", volumeMinMinor, fSort, nil, nil, func(_ *viewCtx, x *T) any { return ironicTime(created(x)) }, nil},
		{"updated_at", volumeMinMinor, fSort, nil, nil, func(_ *viewCtx, x *T) any { return timeOrNil(updated(x)) }, nil},
	}
}

func volumeTail[T any](collection string, uuidOf func(*T) string, node func(*T) *string) []field[T] {
	return []field[T]{
		{"links", volumeMinMinor, 0, nil, nil, func(v *viewCtx, x *T) any { return selfLinks(v, collection, uuidOf(x)) }, nil},
		{"node_uuid", volumeMinMinor, fCreate | fPatch | fRequired, jsonschema.Types("string"), nil,
			func(_ *viewCtx, x *T) any { return *node(x) },
			func(x *T, v any) error { *node(x) = v.(string); return nil }},
	}
}

// connectors is Ironic's volume connector table in its view order.
var connectorTable = func() *resource[storage.VolumeConnector] {
	uuidOf := func(c *storage.VolumeConnector) string { return c.UUID }
	fields := volumeHead(uuidOf, func(c *storage.VolumeConnector) time.Time { return c.CreatedAt },
		func(c *storage.VolumeConnector) *time.Time { return c.UpdatedAt })
	fields = append(fields,
		volumeStr("connector_id", func(c *storage.VolumeConnector) *string { return &c.ConnectorID }),
		objField("extra", volumeMinMinor, nil, func(c *storage.VolumeConnector) *storage.JSONObject { return &c.Extra }),
		volumeStr("type", func(c *storage.VolumeConnector) *string { return &c.Type }),
	)
	fields = append(fields, volumeTail("volume/connectors", uuidOf, func(c *storage.VolumeConnector) *string { return &c.NodeUUID })...)
	return newResource("connector", []string{"uuid", "node_uuid", "type", "connector_id"}, fields...)
}()

// targets is Ironic's volume target table in its view order; properties
// are masked as Ironic masks them (strutils.mask_dict_password).
var targetTable = func() *resource[storage.VolumeTarget] {
	uuidOf := func(t *storage.VolumeTarget) string { return t.UUID }
	fields := volumeHead(uuidOf, func(t *storage.VolumeTarget) time.Time { return t.CreatedAt },
		func(t *storage.VolumeTarget) *time.Time { return t.UpdatedAt })
	fields = append(fields,
		targetField{"boot_index", volumeMinMinor, fCreate | fPatch | fRequired | fSort, jsonschema.Types("integer"), nil,
			func(_ *viewCtx, t *storage.VolumeTarget) any { return t.BootIndex },
			func(t *storage.VolumeTarget, v any) error { t.BootIndex = int64(jsonschema.Number(v)); return nil }},
		objField("extra", volumeMinMinor, nil, func(t *storage.VolumeTarget) *storage.JSONObject { return &t.Extra }),
		objField("properties", volumeMinMinor, maskDictPassword, func(t *storage.VolumeTarget) *storage.JSONObject { return &t.Properties }),
		volumeStr("volume_id", func(t *storage.VolumeTarget) *string { return &t.VolumeID }),
		volumeStr("volume_type", func(t *storage.VolumeTarget) *string { return &t.VolumeType }),
	)
	fields = append(fields, volumeTail("volume/targets", uuidOf, func(t *storage.VolumeTarget) *string { return &t.NodeUUID })...)
	return newResource("target", []string{"uuid", "node_uuid", "volume_type", "boot_index", "volume_id"}, fields...)
}()

// volumeKind describes one of the two collections for the shared handlers.
type volumeKind[T any] struct {
	plural     string // "connectors"
	res        *resource[T]
	unsortable []string // invalid_sort_key_list
	uuidOf     func(*T) string
	setUUID    func(x *T, u any) // a POST body's uuid ("" or nil: one is made)
	get        func(ctx context.Context, s storage.Store, uuid string) (*T, error)
	list       func(ctx context.Context, s storage.Store, q storage.VolumeQuery) ([]*T, error)
	// redact is the view of an item for a caller without
	// baremetal:volume:view_target_properties (nil: nothing to hide).
	redact func(*T) *T
}

// redacted applies k.redact to items when the caller may not see them whole.
func redacted[T any](a *API, r *http.Request, k *volumeKind[T], items ...*T) []*T {
	if k.redact == nil || !a.hidesTargetProperties(r) {
		return items
	}
	out := make([]*T, len(items))
	for i, x := range items {
		out[i] = k.redact(x)
	}
	return out
}

// fieldEnum is the request schemas' list of field names: the view's.
func (k *volumeKind[T]) fieldEnum() []string {
	names := k.res.viewNames()
	slices.Sort(names)
	return names
}

// sortable are the model's columns besides id: the table's plus node_id.
func (k *volumeKind[T]) sortable() []string { return append(k.res.names(fSort), "node_id") }

var connectorKind = &volumeKind[storage.VolumeConnector]{
	plural: "connectors", res: connectorTable,
	unsortable: []string{"extra"},
	uuidOf:     func(c *storage.VolumeConnector) string { return c.UUID },
	setUUID:    func(c *storage.VolumeConnector, u any) { c.UUID, _ = u.(string) },
	get: func(ctx context.Context, s storage.Store, id string) (*storage.VolumeConnector, error) {
		return s.GetVolumeConnector(ctx, id)
	},
	list: func(ctx context.Context, s storage.Store, q storage.VolumeQuery) ([]*storage.VolumeConnector, error) {
		return s.ListVolumeConnectors(ctx, q)
	},
}

var targetKind = &volumeKind[storage.VolumeTarget]{
	plural: "targets", res: targetTable,
	unsortable: []string{"extra", "properties"},
	uuidOf:     func(t *storage.VolumeTarget) string { return t.UUID },
	setUUID:    func(t *storage.VolumeTarget, u any) { t.UUID, _ = u.(string) },
	get: func(ctx context.Context, s storage.Store, id string) (*storage.VolumeTarget, error) {
		return s.GetVolumeTarget(ctx, id)
	},
	list: func(ctx context.Context, s storage.Store, q storage.VolumeQuery) ([]*storage.VolumeTarget, error) {
		return s.ListVolumeTargets(ctx, q)
	},
	redact: func(t *storage.VolumeTarget) *storage.VolumeTarget {
		c := *t
		c.Properties = storage.JSONObject{"redacted_contents": "** Value redacted: Requires permission baremetal:volume:view_target_properties access. Permission denied. **"}
		return &c
	},
}

// volumeNextLink is Ironic's collection.get_next for a volume list: the
// fields shown, sort and detail arguments, then limit and marker, on
// /v1/volume/<plural>. castiron keeps the node filter (?node= or the parent
// node), which Ironic drops, so that the link gives the next page.
func volumeNextLink(r *http.Request, path string, count int, p storage.Page, sortKey string, detail bool, fields []string, node, last string) string {
	if count == 0 || count != p.Limit {
		return ""
	}
	var q strings.Builder
	q.WriteString("sort_key=" + sortKey + "&sort_dir=" + string(p.SortDir) + "&")
	if detail {
		q.WriteString("detail=True&")
	}
	if len(fields) > 0 {
		q.WriteString("fields=" + strings.Join(fields, ",") + "&")
	}
	if node != "" {
		q.WriteString("node=" + url.QueryEscape(node) + "&")
	}
	return baseURL(r) + "/v1/" + path + "?" + q.String() + "limit=" + strconv.Itoa(p.Limit) + "&marker=" + last
}

// parentNodeIdent checks the {ident} of /v1/nodes/{ident}/volume/... as
// Ironic's node controller does before handing over.
func parentNodeIdent(r *http.Request) (string, error) {
	ident := r.PathValue("ident")
	if ident != "" && !volUUIDOrName(ident) {
		return "", errInvalid("Expected UUID or name for node: %s", ident)
	}
	return ident, nil
}

// volumeList is GET /v1/volume/<plural> and /v1/nodes/{ident}/volume/<plural>.
func volumeList[T any](a *API, k *volumeKind[T]) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		parent, err := parentNodeIdent(r)
		if err != nil {
			return err
		}
		ctx := r.Context()
		qa, err := readQueryArgs(r.URL.Query(), "node", "marker", "limit", "sort_key", "sort_dir", "fields", "detail", "project")
		if err != nil {
			return err
		}
		if err := jsonschema.Check("Schema error", listQuerySchema(k.fieldEnum()), qa.doc); err != nil {
			return err
		}
		// check_volume_list_policy looks the parent up by UUID only.
		if parent != "" {
			if !argUUIDLike(parent) {
				return fault.NodeNotFound(parent)
			}
			if _, err := a.cond.Store().GetNode(ctx, parent); err != nil {
				return err
			}
		}
		fields := qa.fields
		if fields == nil && !qa.detail {
			fields = k.res.summary
		}
		if len(fields) > 0 && qa.detail {
			return errInvalid("Can't fetch a subset of fields with 'detail' set")
		}
		page, sortKey, err := pageOf(qa)
		if err != nil {
			return err
		}
		if page.Marker != "" {
			if _, err := k.get(ctx, a.cond.Store(), page.Marker); err != nil {
				return err
			}
		}
		if slices.Contains(k.unsortable, sortKey) {
			return errUnsortable(sortKey)
		}
		q := storage.VolumeQuery{Page: page, Project: listProject(r)}
		nodeIdent := parent
		if nodeIdent == "" {
			nodeIdent = qa.raw.Get("node")
		}
		if nodeIdent != "" {
			n, err := a.cond.Store().GetNode(ctx, nodeIdent)
			if err != nil {
				return err
			}
			q.NodeUUID = &n.UUID
		}
		if q.SortKey, err = sortColumn(sortKey, k.sortable()); err != nil {
			return err
		}
		items, err := k.list(ctx, a.cond.Store(), q)
		if err != nil {
			return err
		}
		var next string
		if len(items) > 0 {
			next = volumeNextLink(r, "volume/"+k.plural, len(items), page, sortKey, qa.detail, fields,
				nodeIdent, k.uuidOf(items[len(items)-1]))
		}
		k.res.writeList(w, a.view(r), k.plural, redacted(a, r, k, items...), k.res.canonical(fields), next)
		return nil
	}
}

// volumeGet is GET /v1/volume/<plural>/{uuid}.
func volumeGet[T any](a *API, k *volumeKind[T]) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := parentNodeIdent(r); err != nil {
			return err
		}
		id := r.PathValue("uuid")
		if !argUUIDLike(id) {
			return errInvalid("Expected UUID for %s_uuid: %s", k.res.name, id)
		}
		qa, err := readQueryArgs(r.URL.Query(), "fields")
		if err != nil {
			return err
		}
		showSchema := jsonschema.Object(true, nil, jsonschema.P("detail", jsonschema.Types("string", "boolean")), jsonschema.P("fields", fieldsSchema(k.fieldEnum())))
		if err := jsonschema.Check("Schema error", showSchema, qa.doc); err != nil {
			return err
		}
		x, err := k.get(r.Context(), a.cond.Store(), id)
		if err != nil {
			return err
		}
		if r.PathValue("ident") != "" {
			return errMalformedURI()
		}
		k.res.writeOne(w, a.view(r), http.StatusOK, redacted(a, r, k, x)[0], k.res.canonical(qa.fields))
		return nil
	}
}

// --- Writes ---

// checkVolumeDoc is the validator of a connector's or target's body or
// patched document after its schema: args.dict_valid(node_uuid=args.uuid,
// uuid=args.uuid).
func checkVolumeDoc(doc map[string]any) error {
	for _, k := range []string{"node_uuid", "uuid"} {
		if v, ok := doc[k].(string); ok && !argUUIDLike(v) {
			return errInvalid("Expected UUID for %s: %s", k, v)
		}
	}
	return nil
}

func objectOrEmpty(v any) storage.JSONObject {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return storage.JSONObject{}
}

// nodeForBody looks up a POST body's node_uuid as replace_node_uuid_with_id
// does, answering an unknown one with InvalidInput (400).
func (a *API) nodeForBody(ctx context.Context, body map[string]any) (*storage.Node, error) {
	id := body["node_uuid"].(string)
	n, err := a.cond.Store().GetNode(ctx, id)
	if err != nil {
		if fault.Is(err, fault.NotFound) {
			return nil, errInvalid("Invalid input for field/attribute node_uuid. Value: '%s'. ", id)
		}
		return nil, err
	}
	return n, nil
}

// volumeCreate is POST /v1/volume/<plural>, with the checks that come
// before the conductor in Ironic's order: the parent node ident, the body
// against the table's schema, its node and the URI.
func volumeCreate[T any](a *API, k *volumeKind[T], create func(ctx context.Context, x *T) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := parentNodeIdent(r); err != nil {
			return err
		}
		body, err := k.res.readBody(r)
		if err != nil {
			return err
		}
		if err := checkVolumeDoc(body); err != nil {
			return err
		}
		n, err := a.nodeForBody(r.Context(), body)
		if err != nil {
			return err
		}
		if r.PathValue("ident") != "" {
			return errMalformedURI()
		}
		body["node_uuid"] = n.UUID
		if u, ok := body["uuid"].(string); ok {
			body["uuid"] = strings.ToLower(u)
		}
		x := new(T)
		return k.res.create(w, r, a.view(r), "volume/"+k.plural, x, body,
			func() error { k.setUUID(x, body["uuid"]); return nil }, create)
	}
}

// volumePatch is a PATCH body that passed Ironic's checks that need no
// stored data: args.patch, the patchable fields and the node_uuid values.
type volumePatch struct {
	ops     []patchOp
	newNode string // the first node_uuid value, "" when none
}

// checkVolumePatch is patch_validate_allowed_fields plus the node_uuid
// value checks of the volume controllers.
func checkVolumePatch[T any](res *resource[T], ops []patchOp, ver Version) (*volumePatch, error) {
	if err := res.checkPatch(ops, ver); err != nil {
		return nil, err
	}
	vp := &volumePatch{ops: ops}
	for _, op := range ops {
		if op.path != "/node_uuid" || op.op == "remove" {
			continue
		}
		v := op.value
		s, ok := v.(string)
		if !ok || !argUUIDLike(s) {
			str := s
			if !ok {
				str = pyrepr.Repr(v)
			}
			return nil, errInvalid("Expected a UUID for node_uuid, but received %s.", str)
		}
		if vp.newNode == "" {
			vp.newNode = s
		}
	}
	return vp, nil
}

// authorizeNodeLink is Ironic's authorize_node_link (CVE-2026-44918) for a
// PATCH moving a port, portgroup or volume object to the node want names:
// it must exist, be visible to the caller (baremetal:node:get) and have
// the current node's (cur) owner. Every refusal reads the same 400, so
// nobody learns whether a node they cannot see exists. It returns the new
// node.
func (a *API) authorizeNodeLink(r *http.Request, cur *storage.Node, want any) (*storage.Node, error) {
	invalid := errInvalid("Unable to apply the requested node_uuid '%s'. Requested value was invalid.", pyrepr.Str(want))
	ident, ok := want.(string)
	if !ok {
		return nil, invalid // get_rpc_node refuses a non-string
	}
	n, err := a.cond.Store().GetNode(r.Context(), ident)
	if err != nil {
		if fault.Is(err, fault.NotFound) || fault.Is(err, fault.Invalid) {
			return nil, invalid
		}
		return nil, err
	}
	if id := identity.From(r.Context()); id != nil && !id.Unrestricted &&
		!a.enforcer().Allowed("baremetal:node:get", nodeTarget(n), id.Creds) {
		return nil, invalid
	}
	var curOwner *string
	if cur != nil {
		curOwner = cur.Owner
	}
	if !sameOwner(curOwner, n.Owner) {
		return nil, invalid
	}
	return n, nil
}

// linkPatch runs authorizeNodeLink on a patch's first node_uuid value
// (Ironic's authorize_node_link_patch) and returns the node the patched
// object ends on: the new one, or nil when the patch names none.
func (a *API) linkPatch(r *http.Request, ops []patchOp, curNode string) (*storage.Node, error) {
	vals := patchValues(ops, "/node_uuid")
	if len(vals) == 0 {
		return nil, nil
	}
	cur, err := a.cond.Store().GetNode(r.Context(), curNode)
	if err != nil && !fault.Is(err, fault.NotFound) {
		return nil, err
	}
	return a.authorizeNodeLink(r, cur, vals[0])
}

// prepareVolumePatch runs the checks of a volume PATCH that come before the
// conductor: the path's UUID, the body, the object (404), the URI, the
// fields and the node link.
func prepareVolumePatch[T any](a *API, r *http.Request, k *volumeKind[T], nodeOf func(*T) string) (*volumePatch, error) {
	if _, err := parentNodeIdent(r); err != nil {
		return nil, err
	}
	id := r.PathValue("uuid")
	if !argUUIDLike(id) {
		return nil, errInvalid("Expected UUID for %s_uuid: %s", k.res.name, id)
	}
	ops, err := readPatch(r)
	if err != nil {
		return nil, err
	}
	x, err := k.get(r.Context(), a.cond.Store(), id)
	if err != nil {
		return nil, err
	}
	if r.PathValue("ident") != "" {
		return nil, errMalformedURI()
	}
	vp, err := checkVolumePatch(k.res, ops, versionOf(r))
	if err != nil {
		return nil, err
	}
	if vp.newNode != "" {
		cur, err := a.cond.Store().GetNode(r.Context(), nodeOf(x))
		if err != nil && !fault.Is(err, fault.NotFound) {
			return nil, err
		}
		if _, err := a.authorizeNodeLink(r, cur, vp.newNode); err != nil {
			return nil, err
		}
	}
	return vp, nil
}

// patchedNode is the node a patched document ends on: the new one when the
// patch names one (as a canonical UUID), else the current one.
func (a *API) patchedNode(ctx context.Context, vp *volumePatch, current string) (string, error) {
	if vp.newNode == "" {
		return current, nil
	}
	n, err := a.cond.Store().GetNode(ctx, vp.newNode)
	if err != nil {
		return "", errInvalid("Unable to apply the requested node_uuid '%s'. Requested value was invalid.", vp.newNode)
	}
	return n.UUID, nil
}

// volumePatchHandler is PATCH /v1/volume/<plural>/{uuid}: Ironic's
// checks, then the patched document against the table's schema and
// validators, its node resolved.
func volumePatchHandler[T any](a *API, k *volumeKind[T], nodeOf func(*T) string,
	update func(ctx context.Context, id string, change func(*T) error) (*T, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		vp, err := prepareVolumePatch(a, r, k, nodeOf)
		if err != nil {
			return err
		}
		ctx := r.Context()
		v := a.view(r)
		updated, err := update(actorContext(r), r.PathValue("uuid"), func(x *T) error {
			return k.res.patch(v, x, vp.ops, patchHooks{
				pre: func(_, after map[string]any) (err error) {
					after["node_uuid"], err = a.patchedNode(ctx, vp, nodeOf(x))
					return err
				},
				post: func(_, after map[string]any) error { return checkVolumeDoc(k.res.pruned(after)) },
			})
		})
		if err != nil {
			return err
		}
		k.res.writeOne(w, a.view(r), http.StatusOK, updated, nil)
		return nil
	}
}

// volumeDelete is DELETE /v1/volume/<plural>/{uuid}.
func volumeDelete[T any](a *API, k *volumeKind[T], del func(ctx context.Context, id string) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := parentNodeIdent(r); err != nil {
			return err
		}
		id := r.PathValue("uuid")
		if !argUUIDLike(id) {
			return errInvalid("Expected UUID for %s_uuid: %s", k.res.name, id)
		}
		if _, err := k.get(r.Context(), a.cond.Store(), id); err != nil {
			return err
		}
		if r.PathValue("ident") != "" {
			return errMalformedURI()
		}
		return noContent(w, del(actorContext(r), id))
	}
}

// volumeRoutes registers the volume API under /v1/volume and, for reads
// (writes answer MalformedRequestURI as in Ironic), /v1/nodes/{ident}/volume.
func (a *API) volumeRoutes() {
	for _, base := range []string{"/volume", "/nodes/{ident}/volume"} {
		a.apiRoute("GET", base, volumeRootAPI, a.getVolume)
		volumeKindRoutes(a, base, connectorKind, func(c *storage.VolumeConnector) string { return c.NodeUUID },
			a.cond.CreateVolumeConnector, a.cond.UpdateVolumeConnector, a.cond.DeleteVolumeConnector)
		volumeKindRoutes(a, base, targetKind, func(t *storage.VolumeTarget) string { return t.NodeUUID },
			a.cond.CreateVolumeTarget, a.cond.UpdateVolumeTarget, a.cond.DeleteVolumeTarget)
	}
}

// volumeKindRoutes registers one collection's five routes under base.
func volumeKindRoutes[T any](a *API, base string, k *volumeKind[T], nodeOf func(*T) string,
	create func(context.Context, *T) error,
	update func(context.Context, string, func(*T) error) (*T, error),
	del func(context.Context, string) error) {
	crudRoutes(a.under(volumeAPI), base+"/"+k.plural, "uuid", crud{list: volumeList(a, k), create: volumeCreate(a, k, create),
		get: volumeGet(a, k), patch: volumePatchHandler(a, k, nodeOf, update), del: volumeDelete(a, k, del)})
}
