package httpapi

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"castiron/engine/jsonschema"
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
	return argUUIDLike(s) || (len(s) <= 255 && nameRE.MatchString(s))
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
