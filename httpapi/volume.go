package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"castiron/fault"
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

// writePecanError writes the body pecan gives a webob HTTP error raised by
// a controller ({"code", "title", "description"} inside error_message).
func writePecanError(w http.ResponseWriter, code int, desc string) {
	writeRaw(w, code, codeBody(code, desc))
}

// volumeGate answers, below 1.32, what Ironic answers there: GET
// /v1/volume's version decorator says so; the sub-controllers are hidden by
// a bare pecan.abort(404).
func volumeGate(w http.ResponseWriter, r *http.Request, root bool) bool {
	if versionOf(r).AtLeast(volumeMinMinor) {
		return true
	}
	if root {
		writePecanError(w, http.StatusNotFound, "The API is not supported for this version")
	} else {
		writePecanError(w, http.StatusNotFound, "")
	}
	return false
}

// errMalformedURI is Ironic's MalformedRequestURI: a write or a single
// connector/target addressed below /v1/nodes/{ident}/volume.
func errMalformedURI() error { return errInvalid("Malformed request URI.") }

// getVolume is GET /v1/volume and /v1/nodes/{ident}/volume: links only (the
// node is not looked up, as in Ironic).
func (a *API) getVolume(w http.ResponseWriter, r *http.Request) error {
	if !volumeGate(w, r, true) {
		return nil
	}
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

type connectorField = viewField[storage.VolumeConnector]
type targetField = viewField[storage.VolumeTarget]

func volumeLinks(v *viewCtx, res, id string) []link {
	return []link{{Href: v.base + "/v1/" + res + "/" + id, Rel: "self"}, {Href: v.base + "/" + res + "/" + id, Rel: "bookmark"}}
}

// connectorFields is Ironic's connector view in its key order.
var connectorFields = []connectorField{
	{"uuid", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return c.UUID }},
	{"created_at", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return ironicTime(c.CreatedAt) }},
	{"updated_at", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return timeOrNil(c.UpdatedAt) }},
	{"connector_id", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return c.ConnectorID }},
	{"extra", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return c.Extra }},
	{"type", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return c.Type }},
	{"links", volumeMinMinor, func(v *viewCtx, c *storage.VolumeConnector) any { return volumeLinks(v, "volume/connectors", c.UUID) }},
	{"node_uuid", volumeMinMinor, func(_ *viewCtx, c *storage.VolumeConnector) any { return c.NodeUUID }},
}

// targetFields is Ironic's target view in its key order; properties are
// masked as Ironic masks them (strutils.mask_dict_password).
var targetFields = []targetField{
	{"uuid", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return t.UUID }},
	{"created_at", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return ironicTime(t.CreatedAt) }},
	{"updated_at", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return timeOrNil(t.UpdatedAt) }},
	{"boot_index", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return t.BootIndex }},
	{"extra", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return t.Extra }},
	{"properties", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return maskDictPassword(t.Properties) }},
	{"volume_id", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return t.VolumeID }},
	{"volume_type", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return t.VolumeType }},
	{"links", volumeMinMinor, func(v *viewCtx, t *storage.VolumeTarget) any { return volumeLinks(v, "volume/targets", t.UUID) }},
	{"node_uuid", volumeMinMinor, func(_ *viewCtx, t *storage.VolumeTarget) any { return t.NodeUUID }},
}

// sanitizeKeys are oslo.utils strutils._SANITIZE_KEYS: a dict key containing
// one of them has its value masked.
var sanitizeKeys = []string{
	"adminpass", "admin_pass", "password", "admin_password", "auth_token", "new_pass", "auth_password",
	"secret_uuid", "secret", "sys_pswd", "token", "configdrive", "chappassword", "encrypted_key",
	"private_key", "fernetkey", "sslkey", "passphrase", "cephclusterfsid", "octaviaheartbeatkey",
	"rabbitcookie", "cephmanilaclientkey", "pacemakerremoteauthkey", "designaterndckey", "cephadminkey",
	"heatauthencryptionkey", "cephclientkey", "keystonecredential", "barbicansimplecryptokek",
	"cephrgwkey", "swifthashsuffix", "migrationsshkey", "cephmdskey", "cephmonkey", "chapsecret",
}

// maskDictPassword is strutils.mask_dict_password(d, "******") for keys:
// nested dicts are masked too.
func maskDictPassword(d map[string]any) map[string]any {
	if len(d) == 0 {
		return d
	}
	out := make(map[string]any, len(d))
	for k, v := range d {
		if m, ok := v.(map[string]any); ok {
			out[k] = maskDictPassword(m)
			continue
		}
		lk := strings.ToLower(k)
		masked := false
		for _, s := range sanitizeKeys {
			if strings.Contains(lk, s) {
				masked = true
				break
			}
		}
		if masked {
			out[k] = "******"
		} else {
			out[k] = v
		}
	}
	return out
}

// volumeKind describes one of the two collections for the shared handlers.
type volumeKind[T any] struct {
	name       string // "connector": body name, path parameter connector_uuid
	plural     string // "connectors"
	fields     []viewField[T]
	index      map[string]int
	defaults   []string // Ironic's _DEFAULT_RETURN_FIELDS
	fieldEnum  []string // the request schemas' field names
	sortable   []string // model columns besides id
	unsortable []string // invalid_sort_key_list
	uuidOf     func(*T) string
	get        func(ctx context.Context, s storage.Store, uuid string) (*T, error)
	list       func(ctx context.Context, s storage.Store, q storage.VolumeQuery) ([]*T, error)
}

var connectorKind = &volumeKind[storage.VolumeConnector]{
	name: "connector", plural: "connectors",
	fields: connectorFields, index: indexFields(connectorFields),
	defaults:   []string{"uuid", "node_uuid", "type", "connector_id"},
	fieldEnum:  []string{"connector_id", "created_at", "extra", "links", "node_uuid", "type", "updated_at", "uuid"},
	sortable:   []string{"uuid", "node_id", "type", "connector_id", "created_at", "updated_at"},
	unsortable: []string{"extra"},
	uuidOf:     func(c *storage.VolumeConnector) string { return c.UUID },
	get: func(ctx context.Context, s storage.Store, id string) (*storage.VolumeConnector, error) {
		return s.GetVolumeConnector(ctx, id)
	},
	list: func(ctx context.Context, s storage.Store, q storage.VolumeQuery) ([]*storage.VolumeConnector, error) {
		return s.ListVolumeConnectors(ctx, q)
	},
}

var targetKind = &volumeKind[storage.VolumeTarget]{
	name: "target", plural: "targets",
	fields: targetFields, index: indexFields(targetFields),
	defaults:   []string{"uuid", "node_uuid", "volume_type", "boot_index", "volume_id"},
	fieldEnum:  []string{"boot_index", "created_at", "extra", "links", "node_uuid", "properties", "updated_at", "uuid", "volume_id", "volume_type"},
	sortable:   []string{"uuid", "node_id", "volume_type", "boot_index", "volume_id", "created_at", "updated_at"},
	unsortable: []string{"extra", "properties"},
	uuidOf:     func(t *storage.VolumeTarget) string { return t.UUID },
	get: func(ctx context.Context, s storage.Store, id string) (*storage.VolumeTarget, error) {
		return s.GetVolumeTarget(ctx, id)
	},
	list: func(ctx context.Context, s storage.Store, q storage.VolumeQuery) ([]*storage.VolumeTarget, error) {
		return s.ListVolumeTargets(ctx, q)
	},
}

// fieldsSchema is the "fields" query schema: an array of known names.
func fieldsSchema(names []string) *scSchema {
	return &scSchema{types: []string{"array"}, items: &scSchema{enum: names}}
}

// volStringList is Ironic's args.string_list: comma-separated, trimmed,
// lower-cased, without duplicates or empties.
func volStringList(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// canonicalFields orders requested fields as the view orders its keys
// (Ironic removes the others from the full dict), with links last of all
// when it is not part of the view order.
func canonicalFields[T any](all []viewField[T], fields []string) []string {
	if fields == nil {
		return nil
	}
	out := []string{}
	for _, f := range all {
		if f.name == "links" || slices.Contains(fields, f.name) {
			out = append(out, f.name)
		}
	}
	return out
}

// queryArgs reads the list/show query parameters as Ironic's args.validate
// does, in the order of the handler's arguments, and returns them typed
// for the request schema.
type queryArgs struct {
	raw    url.Values
	doc    map[string]any // what the request schema sees
	fields []string       // nil: not given
	detail bool
	limit  *int
}

func readQueryArgs(q url.Values, names ...string) (*queryArgs, error) {
	qa := &queryArgs{raw: q, doc: map[string]any{}}
	for _, name := range names {
		if !q.Has(name) {
			continue
		}
		val := q.Get(name)
		switch name {
		case "node":
			if !volUUIDOrName(val) {
				return nil, errInvalid("Expected UUID or name for node: %s", val)
			}
			qa.doc[name] = val
		case "marker":
			if !argUUIDLike(val) {
				return nil, errInvalid("Expected UUID for marker: %s", val)
			}
			qa.doc[name] = val
		case "limit":
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil {
				return nil, errInvalid("Expected an integer for limit: %s", val)
			}
			qa.limit = &n
			qa.doc[name] = int64(n)
		case "fields":
			qa.fields = volStringList(val)
			list := make([]any, len(qa.fields))
			for i, f := range qa.fields {
				list[i] = f
			}
			qa.doc[name] = list
		case "detail":
			b, err := parseBoolString(strings.TrimSpace(val))
			if err != nil {
				return nil, invalidBool("detail", val)
			}
			qa.detail = b
			qa.doc[name] = b
		default: // sort_key, sort_dir, project: plain strings
			qa.doc[name] = val
		}
	}
	return qa, nil
}

// volUUIDOrName is args.uuid_or_name.
func volUUIDOrName(s string) bool {
	return argUUIDLike(s) || (len(s) <= 255 && nameRE.MatchString(s))
}

// listQuerySchema is the volume index_request_query schema.
func listQuerySchema(fieldNames []string) *scSchema {
	return scObject(true, nil,
		scProp{"detail", scTypes("string", "boolean")},
		scProp{"fields", fieldsSchema(fieldNames)},
		scProp{"limit", scTypes("integer")},
		scProp{"marker", scTypes("string")},
		scProp{"node", &scSchema{}},
		scProp{"sort_dir", &scSchema{types: []string{"string"}, enum: []string{"asc", "desc"}}},
		scProp{"sort_key", scTypes("string")},
	)
}

// pageOf is validate_limit and validate_sort_dir (the schema allowed only
// asc and desc); it returns the page and the sort key asked for.
func pageOf(qa *queryArgs) (storage.Page, string, error) {
	p := storage.Page{Limit: MaxLimit, SortDir: storage.Asc}
	if qa.limit != nil {
		if *qa.limit <= 0 {
			return p, "", errInvalid("Limit must be positive")
		}
		p.Limit = min(*qa.limit, MaxLimit)
	}
	if qa.raw.Get("sort_dir") == "desc" {
		p.SortDir = storage.Desc
	}
	p.Marker = qa.raw.Get("marker")
	key := "id"
	if qa.raw.Has("sort_key") {
		key = qa.raw.Get("sort_key")
	}
	return p, key, nil
}

// errUnsortable is the controllers' check of invalid_sort_key_list.
func errUnsortable(key string) error {
	return errInvalid("The sort_key value %s is an invalid field for sorting", key)
}

// sortColumn maps a sort key to its column ("" for id), or gives the
// database layer's error for a key that is no column of the model.
func sortColumn(key string, sortable []string) (string, error) {
	switch {
	case key == "id":
		return "", nil
	case key == "node_id":
		return "node_uuid", nil // nodes are referenced by UUID here
	case slices.Contains(sortable, key):
		return key, nil
	}
	return "", errInvalid(`The sort_key value "%s" is an invalid field for sorting`, key)
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

// renderItems writes {"<key>": [...], "next": ...}.
func renderItems[T any](w http.ResponseWriter, v *viewCtx, key string, items []*T, all []viewField[T], index map[string]int, fields []string, next string) {
	var buf bytes.Buffer
	buf.Grow(256 * (len(items) + 1))
	buf.WriteString(`{`)
	appendJSONString(&buf, key)
	buf.WriteString(`: [`)
	for i, x := range items {
		if i > 0 {
			buf.WriteString(", ")
		}
		renderView(&buf, v, x, all, index, fields)
	}
	buf.WriteByte(']')
	if next != "" {
		buf.WriteString(`, "next": `)
		appendJSONString(&buf, next)
	}
	buf.WriteByte('}')
	writeRaw(w, http.StatusOK, buf.Bytes())
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
		if !volumeGate(w, r, false) {
			return nil
		}
		parent, err := parentNodeIdent(r)
		if err != nil {
			return err
		}
		ctx := r.Context()
		qa, err := readQueryArgs(r.URL.Query(), "node", "marker", "limit", "sort_key", "sort_dir", "fields", "detail", "project")
		if err != nil {
			return err
		}
		if err := scCheck("Schema error", listQuerySchema(k.fieldEnum), qa.doc); err != nil {
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
			fields = k.defaults
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
		q := storage.VolumeQuery{Page: page}
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
		if q.SortKey, err = sortColumn(sortKey, k.sortable); err != nil {
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
		renderItems(w, a.view(r), k.plural, items, k.fields, k.index, canonicalFields(k.fields, fields), next)
		return nil
	}
}

// volumeGet is GET /v1/volume/<plural>/{uuid}.
func volumeGet[T any](a *API, k *volumeKind[T]) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !volumeGate(w, r, false) {
			return nil
		}
		if _, err := parentNodeIdent(r); err != nil {
			return err
		}
		id := r.PathValue("uuid")
		if !argUUIDLike(id) {
			return errInvalid("Expected UUID for %s_uuid: %s", k.name, id)
		}
		qa, err := readQueryArgs(r.URL.Query(), "fields")
		if err != nil {
			return err
		}
		showSchema := scObject(true, nil, scProp{"detail", scTypes("string", "boolean")}, scProp{"fields", fieldsSchema(k.fieldEnum)})
		if err := scCheck("Schema error", showSchema, qa.doc); err != nil {
			return err
		}
		x, err := k.get(r.Context(), a.cond.Store(), id)
		if err != nil {
			return err
		}
		if r.PathValue("ident") != "" {
			return errMalformedURI()
		}
		collWriteOne(w, a.view(r), http.StatusOK, x, k.fields, k.index, canonicalFields(k.fields, qa.fields))
		return nil
	}
}

// --- Writes ---

// Ironic's CONNECTOR_SCHEMA and TARGET_SCHEMA (args.schema validators of
// POST bodies and patched documents).
var (
	connectorSchema = scObject(true, []string{"connector_id", "node_uuid", "type"},
		scProp{"connector_id", scTypes("string")},
		scProp{"extra", scTypes("object", "null")},
		scProp{"node_uuid", scTypes("string")},
		scProp{"type", scTypes("string")},
		scProp{"uuid", scTypes("string", "null")},
	)
	targetSchema = scObject(true, []string{"boot_index", "node_uuid", "volume_id", "volume_type"},
		scProp{"boot_index", scTypes("integer")},
		scProp{"extra", scTypes("object", "null")},
		scProp{"node_uuid", scTypes("string")},
		scProp{"properties", scTypes("object", "null")},
		scProp{"volume_id", scTypes("string")},
		scProp{"volume_type", scTypes("string")},
		scProp{"uuid", scTypes("string", "null")},
	)
	// patchSchema is args.patch. Python's \w is Unicode.
	patchSchema = &scSchema{types: []string{"array"}, items: scObject(true, []string{"op", "path"},
		scProp{"path", &scSchema{types: []string{"string"}, pattern: regexp.MustCompile(`^(/[\p{L}\p{N}_-]+)+$`), patSrc: `^(/[\w-]+)+$`}},
		scProp{"op", &scSchema{types: []string{"string"}, enum: []string{"add", "replace", "remove"}}},
		scProp{"value", &scSchema{}},
	)}
)

// checkVolumeBody is args.and_valid(args.schema(...), dict_valid(node_uuid,
// uuid)) of a connector or target body.
func checkVolumeBody(name string, s *scSchema, body map[string]any) error {
	if err := scCheck("Schema error for "+name, s, body); err != nil {
		return err
	}
	for _, k := range []string{"node_uuid", "uuid"} {
		if v, ok := body[k].(string); ok && !argUUIDLike(v) {
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

// volumeCreateBody runs the checks of a volume POST that come before the
// conductor, in Ironic's order: the parent node ident, the body against
// schema (named name in messages), its node and the URI.
func (a *API) volumeCreateBody(r *http.Request, name string, schema *scSchema) (map[string]any, *storage.Node, error) {
	if _, err := parentNodeIdent(r); err != nil {
		return nil, nil, err
	}
	body, err := decodeObject(r, name)
	if err != nil {
		return nil, nil, err
	}
	if err := checkVolumeBody(name, schema, body); err != nil {
		return nil, nil, err
	}
	n, err := a.nodeForBody(r.Context(), body)
	if err != nil {
		return nil, nil, err
	}
	if r.PathValue("ident") != "" {
		return nil, nil, errMalformedURI()
	}
	return body, n, nil
}

func (a *API) createVolumeConnector(w http.ResponseWriter, r *http.Request) error {
	if !volumeGate(w, r, false) {
		return nil
	}
	body, n, err := a.volumeCreateBody(r, "connector", connectorSchema)
	if err != nil {
		return err
	}
	vc := &storage.VolumeConnector{
		NodeUUID:    n.UUID,
		Type:        body["type"].(string),
		ConnectorID: body["connector_id"].(string),
		Extra:       objectOrEmpty(body["extra"]),
	}
	if u, ok := body["uuid"].(string); ok {
		vc.UUID = strings.ToLower(u)
	}
	if err := a.cond.CreateVolumeConnector(actorContext(r), vc); err != nil {
		return err
	}
	w.Header().Set("Location", baseURL(r)+"/v1/volume/connectors/"+vc.UUID)
	collWriteOne(w, a.view(r), http.StatusCreated, vc, connectorFields, connectorKind.index, nil)
	return nil
}

func (a *API) createVolumeTarget(w http.ResponseWriter, r *http.Request) error {
	if !volumeGate(w, r, false) {
		return nil
	}
	body, n, err := a.volumeCreateBody(r, "target", targetSchema)
	if err != nil {
		return err
	}
	vt := &storage.VolumeTarget{
		NodeUUID:   n.UUID,
		VolumeType: body["volume_type"].(string),
		Properties: objectOrEmpty(body["properties"]),
		BootIndex:  int64(scNumber(body["boot_index"])),
		VolumeID:   body["volume_id"].(string),
		Extra:      objectOrEmpty(body["extra"]),
	}
	if u, ok := body["uuid"].(string); ok {
		vt.UUID = strings.ToLower(u)
	}
	if err := a.cond.CreateVolumeTarget(actorContext(r), vt); err != nil {
		return err
	}
	w.Header().Set("Location", baseURL(r)+"/v1/volume/targets/"+vt.UUID)
	collWriteOne(w, a.view(r), http.StatusCreated, vt, targetFields, targetKind.index, nil)
	return nil
}

// volumePatch is a PATCH body that passed Ironic's checks that need no
// stored data: args.patch, the patchable fields and the node_uuid values.
type volumePatch struct {
	ops     []map[string]any
	newNode string // the first node_uuid value, "" when none
}

// readVolumePatch reads and checks the body of PATCH /v1/volume/<plural>/{uuid}
// up to what needs the stored object.
func readVolumePatch(r *http.Request) ([]map[string]any, error) {
	raw, err := decodeAny(r)
	if err != nil {
		return nil, err
	}
	if err := scCheck("Schema error for patch", patchSchema, raw); err != nil {
		return nil, err
	}
	list := raw.([]any)
	ops := make([]map[string]any, len(list))
	for i, item := range list {
		ops[i] = item.(map[string]any)
	}
	return ops, nil
}

// checkVolumePatch is patch_validate_allowed_fields plus the node_uuid
// value checks of the volume controllers.
func checkVolumePatch(ops []map[string]any, allowed []string) (*volumePatch, error) {
	if err := patchdocCheckFields(ops, allowed); err != nil {
		return nil, err
	}
	vp := &volumePatch{ops: ops}
	for _, op := range ops {
		if op["path"] != "/node_uuid" || op["op"] == "remove" {
			continue
		}
		v := op["value"]
		s, ok := v.(string)
		if !ok || !argUUIDLike(s) {
			str := s
			if !ok {
				str = scRepr(v)
			}
			return nil, errInvalid("Expected a UUID for node_uuid, but received %s.", str)
		}
		if vp.newNode == "" {
			vp.newNode = s
		}
	}
	return vp, nil
}

// authorizeNodeLink is Ironic's authorize_node_link: the new node must
// exist and have the current node's owner; either failure reads the same.
func (a *API) authorizeNodeLink(ctx context.Context, cur *storage.Node, newUUID string) error {
	invalid := errInvalid("Unable to apply the requested node_uuid '%s'. Requested value was invalid.", newUUID)
	n, err := a.cond.Store().GetNode(ctx, newUUID)
	if err != nil {
		if fault.Is(err, fault.NotFound) {
			return invalid
		}
		return err
	}
	curOwner := ""
	if cur != nil && cur.Owner != nil {
		curOwner = *cur.Owner
	}
	newOwner := ""
	if n.Owner != nil {
		newOwner = *n.Owner
	}
	if curOwner != newOwner {
		return invalid
	}
	return nil
}

// applyVolumePatch is apply_jsonpatch on a connector's, target's or deploy
// template's dict: a new root attribute is refused, operations apply one at
// a time and a failing one is named with python-jsonpatch's reason.
func applyVolumePatch(doc map[string]any, ops []map[string]any) (map[string]any, error) {
	return patchdocApplyEach(doc, ops, func(op map[string]any, err error) error {
		return errInvalid("Couldn't apply patch '%s'. Reason: %s", patchOpRepr(op), patchReason(op, err))
	})
}

// patchOpRepr is Python's str() of a patch operation dict, keys in the
// order clients send them.
func patchOpRepr(op map[string]any) string {
	parts := []string{}
	for _, k := range []string{"op", "path", "value"} {
		if v, has := op[k]; has {
			parts = append(parts, scQuote(k)+": "+scRepr(v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// patchReason words a failed operation as python-jsonpatch does where it
// is simple to tell (a missing member to remove or replace).
func patchReason(op map[string]any, err error) string {
	path := op["path"].(string)
	last := path[strings.LastIndex(path, "/")+1:]
	last = strings.ReplaceAll(strings.ReplaceAll(last, "~1", "/"), "~0", "~")
	switch op["op"] {
	case "remove":
		return "can't remove a non-existent object '" + last + "'"
	case "replace":
		return "can't replace a non-existent object '" + last + "'"
	}
	return err.Error()
}

// prepareVolumePatch runs the checks of a volume PATCH that come before the
// conductor: the path's UUID, the body, the object (404), the URI, the
// fields and the node link.
func prepareVolumePatch[T any](a *API, r *http.Request, k *volumeKind[T], allowed []string, nodeOf func(*T) string) (*volumePatch, error) {
	if _, err := parentNodeIdent(r); err != nil {
		return nil, err
	}
	id := r.PathValue("uuid")
	if !argUUIDLike(id) {
		return nil, errInvalid("Expected UUID for %s_uuid: %s", k.name, id)
	}
	ops, err := readVolumePatch(r)
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
	vp, err := checkVolumePatch(ops, allowed)
	if err != nil {
		return nil, err
	}
	if vp.newNode != "" {
		cur, err := a.cond.Store().GetNode(r.Context(), nodeOf(x))
		if err != nil && !fault.Is(err, fault.NotFound) {
			return nil, err
		}
		if err := a.authorizeNodeLink(r.Context(), cur, vp.newNode); err != nil {
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

func (a *API) patchVolumeConnector(w http.ResponseWriter, r *http.Request) error {
	if !volumeGate(w, r, false) {
		return nil
	}
	vp, err := prepareVolumePatch(a, r, connectorKind, []string{"connector_id", "extra", "node_uuid", "type"},
		func(c *storage.VolumeConnector) string { return c.NodeUUID })
	if err != nil {
		return err
	}
	ctx := r.Context()
	updated, err := a.cond.UpdateVolumeConnector(actorContext(r), r.PathValue("uuid"), func(c *storage.VolumeConnector) error {
		doc := map[string]any{
			"uuid": c.UUID, "type": c.Type, "connector_id": c.ConnectorID, "extra": c.Extra, "node_uuid": nil,
		}
		out, err := applyVolumePatch(doc, vp.ops)
		if err != nil {
			return err
		}
		if out["node_uuid"], err = a.patchedNode(ctx, vp, c.NodeUUID); err != nil {
			return err
		}
		if err := checkVolumeBody("patch", connectorSchema, out); err != nil {
			return err
		}
		c.Type = out["type"].(string)
		c.ConnectorID = out["connector_id"].(string)
		c.Extra = objectOrEmpty(out["extra"])
		c.NodeUUID = out["node_uuid"].(string)
		return nil
	})
	if err != nil {
		return err
	}
	collWriteOne(w, a.view(r), http.StatusOK, updated, connectorFields, connectorKind.index, nil)
	return nil
}

func (a *API) patchVolumeTarget(w http.ResponseWriter, r *http.Request) error {
	if !volumeGate(w, r, false) {
		return nil
	}
	vp, err := prepareVolumePatch(a, r, targetKind, []string{"boot_index", "extra", "node_uuid", "properties", "volume_id", "volume_type"},
		func(t *storage.VolumeTarget) string { return t.NodeUUID })
	if err != nil {
		return err
	}
	ctx := r.Context()
	updated, err := a.cond.UpdateVolumeTarget(actorContext(r), r.PathValue("uuid"), func(t *storage.VolumeTarget) error {
		doc := map[string]any{
			"uuid": t.UUID, "volume_type": t.VolumeType, "properties": t.Properties, "boot_index": t.BootIndex,
			"volume_id": t.VolumeID, "extra": t.Extra, "node_uuid": nil,
		}
		out, err := applyVolumePatch(doc, vp.ops)
		if err != nil {
			return err
		}
		if out["node_uuid"], err = a.patchedNode(ctx, vp, t.NodeUUID); err != nil {
			return err
		}
		if err := checkVolumeBody("patch", targetSchema, out); err != nil {
			return err
		}
		t.VolumeType = out["volume_type"].(string)
		t.Properties = objectOrEmpty(out["properties"])
		t.BootIndex = int64(scNumber(out["boot_index"]))
		t.VolumeID = out["volume_id"].(string)
		t.Extra = objectOrEmpty(out["extra"])
		t.NodeUUID = out["node_uuid"].(string)
		return nil
	})
	if err != nil {
		return err
	}
	collWriteOne(w, a.view(r), http.StatusOK, updated, targetFields, targetKind.index, nil)
	return nil
}

// volumeDelete is DELETE /v1/volume/<plural>/{uuid}.
func volumeDelete[T any](a *API, k *volumeKind[T], del func(ctx context.Context, id string) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !volumeGate(w, r, false) {
			return nil
		}
		if _, err := parentNodeIdent(r); err != nil {
			return err
		}
		id := r.PathValue("uuid")
		if !argUUIDLike(id) {
			return errInvalid("Expected UUID for %s_uuid: %s", k.name, id)
		}
		if _, err := k.get(r.Context(), a.cond.Store(), id); err != nil {
			return err
		}
		if r.PathValue("ident") != "" {
			return errMalformedURI()
		}
		if err := del(actorContext(r), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// volumeRoutes registers the volume API under /v1/volume and, for reads
// (writes answer MalformedRequestURI as in Ironic), /v1/nodes/{ident}/volume.
func (a *API) volumeRoutes() {
	for _, base := range []string{"/volume", "/nodes/{ident}/volume"} {
		a.route("GET", base, 1, a.getVolume)
		a.route("GET", base+"/connectors", 1, volumeList(a, connectorKind))
		a.route("POST", base+"/connectors", 1, a.createVolumeConnector)
		a.route("GET", base+"/connectors/{uuid}", 1, volumeGet(a, connectorKind))
		a.route("PATCH", base+"/connectors/{uuid}", 1, a.patchVolumeConnector)
		a.route("DELETE", base+"/connectors/{uuid}", 1, volumeDelete(a, connectorKind, a.cond.DeleteVolumeConnector))
		a.route("GET", base+"/targets", 1, volumeList(a, targetKind))
		a.route("POST", base+"/targets", 1, a.createVolumeTarget)
		a.route("GET", base+"/targets/{uuid}", 1, volumeGet(a, targetKind))
		a.route("PATCH", base+"/targets/{uuid}", 1, a.patchVolumeTarget)
		a.route("DELETE", base+"/targets/{uuid}", 1, volumeDelete(a, targetKind, a.cond.DeleteVolumeTarget))
	}
}
