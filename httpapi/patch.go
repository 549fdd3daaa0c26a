package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/fault/pyrepr"
)

// JSON patch as Ironic takes it on every PATCH endpoint: the body must
// match args.patch (a list of add/replace/remove operations on '/word'
// paths), and apply_jsonpatch applies the operations one at a time with
// python-jsonpatch's semantics, naming the one that failed.

// patchOp is one operation of a patch that passed the patch schema.
type patchOp struct {
	op    string
	path  string
	value any
	has   bool // value present
}

// repr is the operation as Python prints its dict.
func (o patchOp) repr() string {
	m := "{'op': " + pyrepr.Quote(o.op) + ", 'path': " + pyrepr.Quote(o.path)
	if o.has {
		m += ", 'value': " + pyrepr.Repr(o.value)
	}
	return m + "}"
}

// root is the top-level field the operation targets ("/extra/a" ->
// "extra"), its RFC 6901 escapes decoded (only paths of 1.98 and later
// can hold them).
func (o patchOp) root() string {
	root, _, _ := strings.Cut(strings.TrimPrefix(o.path, "/"), "/")
	return patchPointerPart(root)
}

// patchSchema is args.patch: a list of add/replace/remove operations on
// '^(/[\w-]+)+$' paths (Python's Unicode \w: letters, digits, _).
var patchSchema = &jsonschema.Schema{Types: []string{"array"}, Items: jsonschema.Object(true, []string{"op", "path"},
	jsonschema.P("path", &jsonschema.Schema{Types: []string{"string"}, Pattern: jsonschema.LazyPattern(`^(/[\p{L}\p{N}_-]+)+$`), PatternSrc: `^(/[\w-]+)+$`}),
	jsonschema.P("op", &jsonschema.Schema{Types: []string{"string"}, Enum: []string{"add", "replace", "remove"}}),
	jsonschema.P("value", &jsonschema.Schema{}),
)}

// patchSchema98 is patchSchema from 1.98, whose paths may hold keys with
// "~" or "/" escaped as RFC 6901 ~0 and ~1. Ironic's 1.98 decodes them
// (patch_validate_allowed_fields, then python-jsonpatch) but kept the old
// path pattern in args.patch, which refuses "~" before they get there;
// castiron lets the escapes through from 1.98, as the version promises.
var patchSchema98 = &jsonschema.Schema{Types: []string{"array"}, Items: jsonschema.Object(true, []string{"op", "path"},
	jsonschema.P("path", &jsonschema.Schema{Types: []string{"string"}, Pattern: jsonschema.LazyPattern(`^(/([\p{L}\p{N}_-]|~[01])+)+$`), PatternSrc: `^(/[\w-]+)+$`}),
	jsonschema.P("op", &jsonschema.Schema{Types: []string{"string"}, Enum: []string{"add", "replace", "remove"}}),
	jsonschema.P("value", &jsonschema.Schema{}),
)}

// parsePatch checks a PATCH body against Ironic's patch schema, with the
// error jsonschema's best_match picks.
func parsePatch(raw any) ([]patchOp, error) { return parsePatchAt(raw, Version{Minor: MinMinor}) }

// parsePatchAt is parsePatch at ver (1.98 lets RFC 6901 escapes through).
func parsePatchAt(raw any, ver Version) ([]patchOp, error) {
	schema := patchSchema
	if ver.AtLeast(98) {
		schema = patchSchema98
	}
	if err := jsonschema.Check("Schema error for patch", schema, raw); err != nil {
		return nil, err
	}
	list := raw.([]any)
	ops := make([]patchOp, 0, len(list))
	for _, item := range list {
		obj := item.(map[string]any)
		v, has := obj["value"]
		ops = append(ops, patchOp{op: obj["op"].(string), path: obj["path"].(string), value: v, has: has})
	}
	return ops, nil
}

// readPatch reads a PATCH request's body and checks it against the patch
// schema.
func readPatch(r *http.Request) ([]patchOp, error) {
	raw, err := decodeAny(r)
	if err != nil {
		return nil, err
	}
	return parsePatchAt(raw, versionOf(r))
}

// patchTouches is Ironic's is_path_updated: whether an operation targets
// path or something below it.
func patchTouches(ops []patchOp, path string) bool {
	for _, op := range ops {
		if op.path == path || strings.HasPrefix(op.path, path+"/") {
			return true
		}
	}
	return false
}

// patchValues is Ironic's get_patch_values: the values added or replaced at
// exactly path, in order.
func patchValues(ops []patchOp, path string) []any {
	var out []any
	for _, op := range ops {
		if op.path == path && op.op != "remove" {
			out = append(out, op.value)
		}
	}
	return out
}

// applyPatch is Ironic's apply_jsonpatch on a copy of doc: adding a root
// attribute doc lacks is refused, then each operation applies in turn and
// a failing one is named with python-jsonpatch's reason.
func applyPatch(doc map[string]any, ops []patchOp) (map[string]any, error) {
	for _, op := range ops {
		if op.op == "add" && strings.Count(op.path, "/") == 1 {
			if _, has := doc[op.path[1:]]; !has {
				return nil, errInvalid("Adding a new attribute (%s) to the root of the resource is not allowed", op.path)
			}
		}
	}
	var root any = jsonCopy(doc)
	for _, op := range ops {
		next, reason := applyPatchOp(root, op)
		if reason != "" {
			return nil, fault.New(fault.Invalid, "Couldn't apply patch '%s'. Reason: %s", op.repr(), reason)
		}
		root = next
	}
	out, _ := root.(map[string]any)
	return out, nil
}

// patchPointerPart decodes one JSON pointer token (~1 is "/", ~0 is "~").
func patchPointerPart(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func applyPatchOp(root any, op patchOp) (any, string) {
	if op.op != "remove" && !op.has {
		return nil, "The operation does not contain a 'value' member"
	}
	parts := strings.Split(op.path, "/")[1:]
	for i := range parts {
		parts[i] = patchPointerPart(parts[i])
	}
	parent := root
	for _, part := range parts[:len(parts)-1] {
		var reason string
		if parent, reason = patchWalk(parent, part); reason != "" {
			return nil, reason
		}
	}
	last := parts[len(parts)-1]
	switch p := parent.(type) {
	case map[string]any:
		_, exists := p[last]
		switch op.op {
		case "remove":
			if !exists {
				return nil, "can't remove a non-existent object '" + last + "'"
			}
			delete(p, last)
		case "replace":
			if !exists {
				return nil, "can't replace a non-existent object '" + last + "'"
			}
			p[last] = jsonCopy(op.value)
		default:
			p[last] = jsonCopy(op.value)
		}
		return root, ""
	case []any:
		idx := len(p)
		if last != "-" {
			i, err := strconv.Atoi(last)
			if err != nil || strings.HasPrefix(last, "+") {
				return nil, "'" + last + "' is not a valid sequence index"
			}
			idx = i
		} else if op.op == "replace" {
			return nil, "'path' with '-' can't be applied to 'replace' operation"
		}
		var out []any
		switch op.op {
		case "remove":
			if idx < 0 || idx >= len(p) {
				return nil, "can't remove a non-existent object '" + last + "'"
			}
			out = slices.Delete(slices.Clone(p), idx, idx+1)
		case "replace":
			if idx < 0 || idx >= len(p) {
				return nil, "can't replace outside of list"
			}
			out = slices.Clone(p)
			out[idx] = jsonCopy(op.value)
		default:
			if idx < 0 || idx > len(p) {
				return nil, "can't insert outside of list"
			}
			out = slices.Insert(slices.Clone(p), idx, jsonCopy(op.value))
		}
		return patchSetAt(root, parts[:len(parts)-1], out), ""
	}
	return nil, "unable to fully resolve json pointer " + op.path + ", part " + last
}

// patchWalk is jsonpointer's walk: one step into a mapping or a sequence.
func patchWalk(doc any, part string) (any, string) {
	switch d := doc.(type) {
	case map[string]any:
		v, ok := d[part]
		if !ok {
			return nil, "member '" + part + "' not found in " + pyrepr.Repr(d)
		}
		return v, ""
	case []any:
		i, err := strconv.Atoi(part)
		if err != nil {
			return nil, "'" + part + "' is not a valid sequence index"
		}
		if i < 0 || i >= len(d) {
			return nil, "index '" + part + "' is out of bounds"
		}
		return d[i], ""
	}
	return nil, "Document '" + pyTypeName(doc) + "' does not support indexing, must be mapping/sequence or support __getitem__"
}

// pyTypeName is Python's str(type(v)) of a decoded JSON value.
func pyTypeName(v any) string {
	switch v.(type) {
	case string:
		return "<class 'str'>"
	case bool:
		return "<class 'bool'>"
	case int64:
		return "<class 'int'>"
	case float64:
		return "<class 'float'>"
	case nil:
		return "<class 'NoneType'>"
	}
	return "<class 'object'>"
}

// patchSetAt replaces the value at parts (which exists) with v.
func patchSetAt(root any, parts []string, v any) any {
	if len(parts) == 0 {
		return v
	}
	cur := root
	for i, part := range parts {
		if i == len(parts)-1 {
			switch c := cur.(type) {
			case map[string]any:
				c[part] = v
			case []any:
				n, _ := strconv.Atoi(part)
				c[n] = v
			}
			break
		}
		cur, _ = patchWalk(cur, part)
	}
	return root
}

// jsonCopy is a deep copy of a decoded JSON value: PlainNumbers rebuilds
// every object and list (its numbers are already plain).
func jsonCopy(v any) any { return normalizeNumbers(v) }
