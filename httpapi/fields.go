package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"castiron/engine/jsonschema"
	"castiron/storage"
)

// Every resource of the API declares its fields in one table: a row per
// field with the microversion that introduced it, what a request may do
// with it (set on create, patch, filter or sort a list by it), whether
// views mask it, and how castiron reads and writes it. POST, PATCH, views,
// ?fields=, sort_key and the version-gate tests all read the tables; the
// resource files keep only what is theirs (lookups, checks across fields,
// Ironic's wording of their own errors).

// fieldFlags say what a request may do with a field besides reading it.
// A field with neither fCreate nor fPatch is read-only.
type fieldFlags uint8

const (
	fCreate   fieldFlags = 1 << iota // a POST body may carry it
	fPatch                           // a PATCH may change it
	fRequired                        // a POST body must carry it
	fFilter                          // a list query parameter of the same name
	fSort                            // a list may be sorted by it
)

// field is one field of a resource's table.
type field[T any] struct {
	name  string
	min   int // the microversion that introduced it
	flags fieldFlags
	// value is the JSON schema a written value must match (nil: set checks
	// it, or the field is read-only).
	value *jsonschema.Schema
	// mask turns the stored value into what every view shows (nil: as
	// stored). PATCH documents see the stored value, as Ironic's do.
	mask func(any) any
	// get reads the field (nil: write-only, never shown).
	get func(v *viewCtx, x *T) any
	// set writes a value a request gave (nil: the resource's own code
	// writes it).
	set func(x *T, v any) error
}

func (f *field[T]) has(fl fieldFlags) bool { return f.flags&fl != 0 }

// objField is a JSON object field a request may set and patch (null
// stores {}).
func objField[T any](name string, min int, mask func(any) any, p func(*T) *storage.JSONObject) field[T] {
	return field[T]{name, min, fCreate | fPatch, jsonschema.Types("object", "null"), mask,
		func(_ *viewCtx, x *T) any { return *p(x) },
		func(x *T, v any) error { *p(x) = objectOrEmpty(v); return nil }}
}

// strField is an optional string field of at most maxLen characters
// (null when unset); requests write it only with fCreate or fPatch.
func strField[T any](name string, min int, flags fieldFlags, maxLen int, p func(*T) **string) field[T] {
	value := jsonschema.Types("string", "null")
	value.MaxLength = maxLen
	var set func(*T, any) error
	if flags&(fCreate|fPatch) != 0 {
		set = func(x *T, v any) error { *p(x) = optString(v); return nil }
	}
	return field[T]{name, min, flags, value, nil, func(_ *viewCtx, x *T) any { return strOrNil(*p(x)) }, set}
}

// shown reports whether a view at ver carries the field.
func (res *resource[T]) shown(f *field[T], ver Version) bool {
	from := f.min
	if v, ok := res.shownFrom[f.name]; ok {
		from = v
	}
	return f.get != nil && ver.AtLeast(from)
}

// resource is a resource's field table.
type resource[T any] struct {
	name    string // as Ironic's messages name the resource ("port")
	fields  []field[T]
	index   map[string]int
	summary []string           // what a list shows without ?detail
	body    *jsonschema.Schema // the schema of a POST body, from the table
	// patchOrder is Ironic's PATCH_ALLOWED_FIELDS order for its "Only the
	// following can be updated" message when it is not alphabetical; it
	// holds exactly the fPatch fields (fields_test.go checks).
	patchOrder []string
	// gateFirstOp makes a PATCH's version gate of the fields in shownFrom
	// look at its first operation
	// only, as Ironic's is_path_updated does for portgroups (it returns
	// from inside its loop); the stock tempest plugin patches /extra then
	// /properties at 1.23 and expects success.
	gateFirstOp bool
	// shownFrom holds fields that views show from an earlier version than
	// the one that brought them (Ironic shows portgroup mode and properties
	// from 1.23 though they are writable and selectable from 1.26).
	shownFrom map[string]int
	// schemaError begins a POST body's schema error ("Schema error for
	// <name>" unless set: the inspection rule API says "Schema error").
	schemaError string
	// patchDoc, when set, is the document a PATCH applies to instead of
	// the view's (a sensitive inspection rule's view hides fields a patch
	// may change; Ironic patches the rule's as_dict()).
	patchDoc func(x *T) map[string]any
}

func newResource[T any](name string, summary []string, fields ...field[T]) *resource[T] {
	res := &resource[T]{name: name, fields: fields, index: map[string]int{}, summary: summary}
	for i, f := range fields {
		if _, dup := res.index[f.name]; dup {
			panic("httpapi: field " + name + "." + f.name + " declared twice")
		}
		res.index[f.name] = i
	}
	res.body = res.schema()
	res.schemaError = "Schema error for " + name
	return res
}

// field returns the named field, or nil.
func (res *resource[T]) field(name string) *field[T] {
	if i, ok := res.index[name]; ok {
		return &res.fields[i]
	}
	return nil
}

// names lists the fields with any of flags, in table order.
func (res *resource[T]) names(flags fieldFlags) []string {
	var out []string
	for i := range res.fields {
		if res.fields[i].has(flags) {
			out = append(out, res.fields[i].name)
		}
	}
	return out
}

// patchable lists the fields a PATCH may touch, in Ironic's order.
func (res *resource[T]) patchable() []string {
	if res.patchOrder != nil {
		return res.patchOrder
	}
	out := res.names(fPatch)
	slices.Sort(out)
	return out
}

// viewNames lists the fields a view may show, in view order.
func (res *resource[T]) viewNames() []string {
	var out []string
	for i := range res.fields {
		if res.fields[i].get != nil {
			out = append(out, res.fields[i].name)
		}
	}
	return out
}

// newerThan reports whether name is a field that ver does not have yet.
func (res *resource[T]) newerThan(name string, ver Version) bool {
	f := res.field(name)
	return f != nil && !ver.AtLeast(f.min)
}

// parseFields checks ?fields= against the view at ver: an unknown field is
// a 400 (Ironic answers 500), a field from a later version 406. It returns
// nil for "all fields", else the fields asked for plus links.
func (res *resource[T]) parseFields(raw string, ver Version) ([]string, error) {
	if raw == "" {
		return nil, nil
	}
	if !ver.AtLeast(8) {
		return nil, errNotAcceptable()
	}
	var out []string
	for _, name := range strings.Split(raw, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		f := res.field(name)
		if f == nil || f.get == nil {
			return nil, errInvalid("Field(s) \"%s\" are not valid", name)
		}
		if !ver.AtLeast(f.min) {
			return nil, errNotAcceptable()
		}
		out = append(out, name)
	}
	if len(out) > 0 {
		out = append(out, "links")
	}
	return out, nil
}

// listFields is Ironic's get_request_return_fields for a list: fields and
// a true detail exclude each other; with neither, the summary.
func (res *resource[T]) listFields(fields []string, detail bool) ([]string, error) {
	if fields != nil && detail {
		return nil, errInvalid("Can not specify ?detail=True and fields in the same request.")
	}
	if fields == nil && !detail {
		return res.summary, nil
	}
	return fields, nil
}

// checkSortKey is Ironic's check_allowed_fields([sort_key]): sorting by a
// field the request's version does not show is 406.
func (res *resource[T]) checkSortKey(r *http.Request) error {
	if res.newerThan(r.URL.Query().Get("sort_key"), versionOf(r)) {
		return errNotAcceptable()
	}
	return nil
}

// canonical orders requested fields as the view orders its keys (Ironic
// removes the others from the full dict), links included.
func (res *resource[T]) canonical(fields []string) []string {
	if fields == nil {
		return nil
	}
	out := []string{}
	for i := range res.fields {
		if name := res.fields[i].name; name == "links" || slices.Contains(fields, name) {
			out = append(out, name)
		}
	}
	return out
}

// value is what views show of f on x: the stored value, masked.
func (f *field[T]) view(v *viewCtx, x *T) any {
	val := f.get(v, x)
	if f.mask != nil && !v.unmasked(f.name) {
		val = f.mask(val)
	}
	return val
}

// render writes x as a JSON object of the fields visible at v.ver, in
// table order (or in the order of fields when given).
func (res *resource[T]) render(buf *bytes.Buffer, v *viewCtx, x *T, fields []string) {
	buf.WriteByte('{')
	first := true
	emit := func(f *field[T]) {
		if !res.shown(f, v.ver) {
			return
		}
		if !first {
			buf.WriteString(", ")
		}
		first = false
		appendJSONString(buf, f.name)
		buf.WriteString(": ")
		appendJSON(buf, f.view(v, x))
	}
	if fields == nil {
		for i := range res.fields {
			emit(&res.fields[i])
		}
	} else {
		seen := map[string]bool{}
		for _, name := range fields {
			if f := res.field(name); f != nil && !seen[name] {
				seen[name] = true
				emit(f)
			}
		}
	}
	buf.WriteByte('}')
}

// writeOne answers one object's view with status.
func (res *resource[T]) writeOne(w http.ResponseWriter, v *viewCtx, status int, x *T, fields []string) {
	var buf bytes.Buffer
	res.render(&buf, v, x, fields)
	writeRaw(w, status, buf.Bytes())
}

// writeList answers {"<key>": [...], "next": ...}.
// writeOK answers with x's view (200).
func (res *resource[T]) writeOK(w http.ResponseWriter, v *viewCtx, x *T, fields []string) error {
	res.writeOne(w, v, http.StatusOK, x, fields)
	return nil
}

// create is the end of a POST whose body passed readBody: its fields set
// into x (setAll), finish (the resource's own checks across fields and
// normalising; nil: none), store, then the 201 answer under /v1/collection.
func (res *resource[T]) create(w http.ResponseWriter, r *http.Request, v *viewCtx, collection string, x *T, body map[string]any,
	finish func() error, store func(context.Context, *T) error) error {
	if err := res.setAll(x, body); err != nil {
		return err
	}
	if finish != nil {
		if err := finish(); err != nil {
			return err
		}
	}
	if err := store(actorContext(r), x); err != nil {
		return err
	}
	id, _ := res.field("uuid").get(v, x).(string)
	return res.writeCreated(w, r, v, collection, id, x)
}

// writeCreated answers a POST: 201 with the new item's view, its Location
// under /v1/collection.
func (res *resource[T]) writeCreated(w http.ResponseWriter, r *http.Request, v *viewCtx, collection, uuid string, x *T) error {
	w.Header().Set("Location", baseURL(r)+"/v1/"+collection+"/"+uuid)
	res.writeOne(w, v, http.StatusCreated, x, nil)
	return nil
}

func (res *resource[T]) writeList(w http.ResponseWriter, v *viewCtx, key string, items []*T, fields []string, next string) {
	writeItems(w, key, len(items), 256*(len(items)+1), func(buf *bytes.Buffer, i int) { res.render(buf, v, items[i], fields) }, next)
}

// writeItems answers {"<key>": [...], "next": ...} (200) with n items, item
// i written by each; size is a guess of the items' length.
func writeItems(w http.ResponseWriter, key string, n, size int, each func(buf *bytes.Buffer, i int), next string) {
	var buf bytes.Buffer
	buf.Grow(size)
	ends := make([]int, n)
	for i := range n {
		each(&buf, i)
		ends[i] = buf.Len()
	}
	items := make([][]byte, n)
	start := 0
	for i, end := range ends {
		items[i] = buf.Bytes()[start:end]
		start = end
	}
	writeBodies(w, key, items, next)
}

// writeBodies answers {"<key>": [...], "next": ...} (200) with the items'
// JSON (joinBodies).
func writeBodies(w http.ResponseWriter, key string, items [][]byte, next string) {
	writeRaw(w, http.StatusOK, joinBodies(key, items, next))
}

// joinBodies is {"<key>": [...], "next": ...} of the items' JSON, in one
// exact-size buffer: written with one Write, a page leaves the server in
// one system call instead of one per 4 KiB the response writer buffers
// (a list of 100 nodes is 37 kB).
func joinBodies(key string, items [][]byte, next string) []byte {
	var head, tail bytes.Buffer
	head.WriteByte('{')
	appendJSONString(&head, key)
	head.WriteString(": [")
	tail.WriteByte(']')
	if next != "" {
		tail.WriteString(`, "next": `)
		appendJSONString(&tail, next)
	}
	tail.WriteByte('}')
	size := head.Len() + tail.Len()
	for i, b := range items {
		if i > 0 {
			size += len(", ")
		}
		size += len(b)
	}
	out := make([]byte, 0, size)
	out = append(out, head.Bytes()...)
	for i, b := range items {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = append(out, b...)
	}
	return append(out, tail.Bytes()...)
}

// writePage answers a page of items with Ironic's "next" link on
// /v1/<resourcePath> (the same query, the marker moved to the last item).
func (res *resource[T]) writePage(w http.ResponseWriter, r *http.Request, v *viewCtx, resourcePath, key string, items []*T,
	uuidOf func(*T) string, fields []string, page storage.Page) {
	next := ""
	if len(items) > 0 {
		next = nextLink(r, resourcePath, page, len(items), uuidOf(items[len(items)-1]))
	}
	res.writeList(w, v, key, items, fields, next)
}

// doc is x as the document a JSON patch applies to: every field a view can
// show, unmasked and whatever the version (a patch gated by version never
// reaches a field the client cannot see), as plain decoded JSON.
func (res *resource[T]) doc(v *viewCtx, x *T) map[string]any {
	out := make(map[string]any, len(res.fields))
	for i := range res.fields {
		if f := &res.fields[i]; f.get != nil {
			out[f.name] = f.get(v, x)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("httpapi: " + res.name + " view is not JSON: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var plain map[string]any
	_ = dec.Decode(&plain)
	return normalizeNumbers(plain).(map[string]any)
}

// readBody is the first half of every POST: the body decoded and checked
// by checkBody at the request's version.
func (res *resource[T]) readBody(r *http.Request) (map[string]any, error) {
	body, err := decodeObject(r, res.name)
	if err != nil {
		return nil, err
	}
	return body, res.checkBody(body, versionOf(r))
}

// checkBody checks a POST body against the table at ver: its schema
// (unknown keys, required ones, value types, worded as Ironic's jsonschema
// words them for the resource), then versions: a field newer than ver is
// 406 unless its value is null (Ironic's reject_fields_in_newer_versions
// lets null through).
func (res *resource[T]) checkBody(body map[string]any, ver Version) error {
	if err := jsonschema.Check(res.schemaError, res.body, body); err != nil {
		return err
	}
	for _, k := range argSortedKeys(body) {
		if body[k] != nil && res.newerThan(k, ver) {
			return errNotAcceptable()
		}
	}
	return nil
}

// checkPatched is Ironic's patched_validate_with_schema: the patched
// document without what the schema does not know must match it.
func (res *resource[T]) checkPatched(doc map[string]any) error {
	return jsonschema.Check("Schema error for patch", res.body, res.pruned(doc))
}

// pruned is doc without the keys a POST body may not carry.
func (res *resource[T]) pruned(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if f := res.field(k); f != nil && f.has(fCreate) {
			out[k] = v
		}
	}
	return out
}

// patchOps reads a PATCH body (readPatch) and checks its fields at the
// request's version (checkPatch).
func (res *resource[T]) patchOps(r *http.Request) ([]patchOp, error) {
	ops, err := readPatch(r)
	if err != nil {
		return nil, err
	}
	return ops, res.checkPatch(ops, versionOf(r))
}

// checkPatch is the field check of a PATCH at ver, in Ironic's order: an
// operation on a field no PATCH may change is a 400 naming the patchable
// fields (patch_validate_allowed_fields), then one on a field newer than
// the version (add, replace or remove, on the field or inside it) is 406.
// Fields no operation touches are never checked.
func (res *resource[T]) checkPatch(ops []patchOp, ver Version) error {
	for _, op := range ops {
		if f := res.field(op.root()); f == nil || !f.has(fPatch) {
			return errInvalid("Cannot patch %s. Only the following can be updated: %s", op.path, strings.Join(res.patchable(), ", "))
		}
	}
	for i, op := range ops {
		if _, early := res.shownFrom[op.root()]; res.gateFirstOp && i > 0 && early {
			continue
		}
		if res.newerThan(op.root(), ver) {
			return errNotAcceptable()
		}
	}
	return nil
}

// patchHooks are a resource's own checks around the schema check of a
// patched document, in its Ironic controller's order: pre before it, post
// after it. Either may change after (a node ident resolved to its uuid).
type patchHooks struct {
	pre, post func(before, after map[string]any) error
}

// patch is the one PATCH path of a document-style resource: x's document
// (as v shows it) with ops applied, checked (hooks, then the schema) and
// its changed fields written into x.
func (res *resource[T]) patch(v *viewCtx, x *T, ops []patchOp, h patchHooks) error {
	var before map[string]any
	if res.patchDoc != nil {
		before = res.patchDoc(x)
	} else {
		raw := *v
		raw.raw = true
		before = res.doc(&raw, x)
	}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	if h.pre != nil {
		if err := h.pre(before, after); err != nil {
			return err
		}
	}
	if err := res.checkPatched(after); err != nil {
		return err
	}
	if h.post != nil {
		if err := h.post(before, after); err != nil {
			return err
		}
	}
	return res.setChanged(x, before, after)
}

// setChanged writes into x every patchable field whose value differs
// between before and after (a field the patch removed is set to null):
// what the client did not change is not written, so no field the client
// did not touch can fail.
func (res *resource[T]) setChanged(x *T, before, after map[string]any) error {
	for i := range res.fields {
		f := &res.fields[i]
		if !f.has(fPatch) || f.set == nil {
			continue
		}
		newVal, present := after[f.name]
		if present && jsonEqual(before[f.name], newVal) {
			continue
		}
		if err := f.set(x, newVal); err != nil {
			return err
		}
	}
	return nil
}

// setAll writes every field of body that the table sets, in name order.
func (res *resource[T]) setAll(x *T, body map[string]any) error {
	for _, k := range argSortedKeys(body) {
		if f := res.field(k); f != nil && f.set != nil {
			if err := f.set(x, body[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// schema is the JSON schema of a POST body (or patched document) built
// from the table: the fCreate fields with their value schemas, fRequired
// ones required, nothing else allowed.
func (res *resource[T]) schema() *jsonschema.Schema {
	s := &jsonschema.Schema{Types: []string{"object"}, Closed: true}
	for i := range res.fields {
		f := &res.fields[i]
		if !f.has(fCreate) {
			continue
		}
		v := f.value
		if v == nil {
			v = &jsonschema.Schema{}
		}
		s.Props = append(s.Props, jsonschema.P(f.name, v))
		if f.has(fRequired) {
			s.Required = append(s.Required, f.name)
		}
	}
	// Ironic's schemas list their required keys alphabetically, which
	// decides which missing one jsonschema names first.
	slices.Sort(s.Required)
	return s
}

// jsonEqual compares two decoded JSON values by their encoding.
func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
