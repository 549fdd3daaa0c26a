package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"castiron/engine/jsonschema"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// List and show query parameters read the way Ironic's args.validate and
// its request query schemas read them (the volume and deploy template
// APIs), with Ironic's messages.

// fieldsSchema is the "fields" query schema: an array of known names.
func fieldsSchema(names []string) *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"array"}, Items: &jsonschema.Schema{Enum: names}}
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
	return argUUIDLike(s) || (len(s) <= 255 && nameRE().MatchString(s))
}

// listQuerySchema is the volume index_request_query schema.
func listQuerySchema(fieldNames []string) *jsonschema.Schema {
	return jsonschema.Object(true, nil,
		jsonschema.P("detail", jsonschema.Types("string", "boolean")),
		jsonschema.P("fields", fieldsSchema(fieldNames)),
		jsonschema.P("limit", jsonschema.Types("integer")),
		jsonschema.P("marker", jsonschema.Types("string")),
		jsonschema.P("node", &jsonschema.Schema{}),
		jsonschema.P("sort_dir", &jsonschema.Schema{Types: []string{"string"}, Enum: []string{"asc", "desc"}}),
		jsonschema.P("sort_key", jsonschema.Types("string")),
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

// The deploy template and inspection rule controllers check their query
// with a request query schema, then read it the same way; what follows
// that schema is shared here.

// schemaList is such a list's query, read past its schema.
type schemaList struct {
	detail  *bool    // ?detail= as given, nil when not
	fields  []string // get_request_return_fields
	page    storage.Page
	sortKey string // as asked ("id" by default)
}

// schemaListQuery is get_request_return_fields, validate_limit and
// validate_sort_dir, a sort key of unsortable refused, the marker (the
// uuid of an item of table: anything else finds nothing, as get_by_uuid)
// and the sort column, in the controllers' order.
func (res *resource[T]) schemaListQuery(ctx context.Context, q url.Values, qa *queryArgs, table string,
	get func(context.Context, string) (*T, error), sortable, unsortable []string) (*schemaList, error) {
	l := &schemaList{}
	if q.Has("detail") {
		l.detail = &qa.detail
	}
	var err error
	if l.fields, err = res.listFields(qa.fields, qa.detail); err != nil {
		return nil, err
	}
	if l.page, l.sortKey, err = pageOf(qa); err != nil {
		return nil, err
	}
	if slices.Contains(unsortable, l.sortKey) {
		return nil, errUnsortable(l.sortKey)
	}
	if m := l.page.Marker; m != "" {
		if !argUUIDLike(m) {
			return nil, &storage.NotFoundError{Table: table, Key: m}
		}
		if _, err := get(ctx, m); err != nil {
			return nil, err
		}
	}
	if l.page.SortKey, err = sortColumn(l.sortKey, sortable); err != nil {
		return nil, err
	}
	return l, nil
}

// writeSchemaList answers a page of items under key: its fields checked
// against the view when there are items, and, on a full page, get_next's
// link on /v1/<path>: sort_key, sort_dir, detail, fields, then filters
// (name, value pairs), limit and marker, each value through esc.
func (res *resource[T]) writeSchemaList(w http.ResponseWriter, r *http.Request, v *viewCtx, l *schemaList, key, path string,
	items []*T, uuidOf func(*T) string, esc func(string) string, filters ...[2]string) error {
	if len(items) > 0 && l.fields != nil {
		if err := res.checkViewFields(l.fields); err != nil {
			return err
		}
	}
	var next string
	if n := len(items); n > 0 && n == l.page.Limit {
		args := []string{"sort_key=" + esc(l.sortKey), "sort_dir=" + string(l.page.SortDir)}
		if l.detail != nil {
			args = append(args, "detail="+pyrepr.Bool(*l.detail))
		}
		if len(l.fields) > 0 {
			args = append(args, "fields="+esc(strings.Join(l.fields, ",")))
		}
		for _, f := range filters {
			args = append(args, f[0]+"="+esc(f[1]))
		}
		args = append(args, "limit="+strconv.Itoa(l.page.Limit), "marker="+uuidOf(items[n-1]))
		next = baseURL(r) + "/v1/" + path + "?" + strings.Join(args, "&")
	}
	res.writeList(w, v, key, items, res.canonical(l.fields), next)
	return nil
}

// checkViewFields is check_for_invalid_fields against the view's keys.
func (res *resource[T]) checkViewFields(fields []string) error {
	var bad []string
	for _, f := range fields {
		if fld := res.field(f); fld == nil || fld.get == nil {
			bad = append(bad, f)
		}
	}
	if len(bad) > 0 {
		return errInvalid("Field(s) \"%s\" are not valid", strings.Join(bad, ", "))
	}
	return nil
}

// writeShown answers one item with the fields asked for, after
// check_for_invalid_fields.
func (res *resource[T]) writeShown(w http.ResponseWriter, v *viewCtx, x *T, fields []string) error {
	if err := res.checkViewFields(fields); err != nil {
		return err
	}
	res.writeOne(w, v, http.StatusOK, x, res.canonical(fields))
	return nil
}
