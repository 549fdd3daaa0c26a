package httpapi

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"castiron/fault"
)

// Request checks for allocations and events, worded exactly as Ironic's
// jsonschema validation words them ("Schema error for allocation: 5 is not
// of type 'string', 'null'"), which these endpoints' clients show verbatim.

// jsvErrors collects schema errors with their depth in the document and
// reports the one jsonschema's best_match picks: the shallowest, the first
// found among equals.
type jsvErrors struct {
	depth int
	msg   string
	set   bool
}

func (e *jsvErrors) add(depth int, format string, args ...any) {
	if !e.set || depth < e.depth {
		e.depth, e.msg, e.set = depth, fmt.Sprintf(format, args...), true
	}
}

// err returns the chosen error as Ironic's 400 for the named document.
func (e *jsvErrors) err(name string) error {
	if !e.set {
		return nil
	}
	return fault.New(fault.Invalid, "Schema error for %s: %s", name, e.msg)
}

// checkType adds jsonschema's type error unless v is of one of types.
func (e *jsvErrors) checkType(depth int, v any, types ...string) bool {
	if scIsAny(v, types) {
		return true
	}
	e.add(depth, "%s is not of type %s", scRepr(v), scTypeList(types))
	return false
}

// checkAdditional adds "Additional properties are not allowed" for the keys
// of obj outside allowed.
func (e *jsvErrors) checkAdditional(depth int, obj map[string]any, allowed []string) {
	var extra []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		e.add(depth, "%s", scAdditionalMsg(extra))
	}
}

// checkRequired adds "'x' is a required property" for the first missing key.
func (e *jsvErrors) checkRequired(depth int, obj map[string]any, required ...string) {
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			e.add(depth, "%s is a required property", scRepr(k))
			return
		}
	}
}

var (
	jsvCustomTraitRE = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)
	// Standard traits come from os-traits; like the node traits API,
	// castiron accepts any upper-case name that could be one.
	jsvStandardTraitRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// checkTrait is Ironic's TRAITS_SCHEMA for one trait.
func (e *jsvErrors) checkTrait(depth int, v any) {
	if !e.checkType(depth, v, "string") {
		return
	}
	s := v.(string)
	switch {
	case len(s) < 1:
		e.add(depth, "%s is too short", scRepr(s))
	case len(s) > 255:
		e.add(depth, "%s is too long", scRepr(s))
	case !jsvCustomTraitRE.MatchString(s) && !jsvStandardTraitRE.MatchString(s):
		e.add(depth, "%s is not valid under any of the given schemas. Possible root cause: %s does not match %s",
			scRepr(s), scRepr(s), scRepr(jsvCustomTraitRE.String()))
	}
}

// jsvStr is Python's str() of a decoded JSON value: strings as they are,
// anything else as its repr.
func jsvStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return scRepr(v)
}

// jsvLogicalName is Ironic's is_valid_logical_name on a decoded JSON value.
func jsvLogicalName(v any) bool {
	s, ok := v.(string)
	return ok && argLogicalName(s)
}

// jsvPatchOp is one operation of a patch that passed Ironic's patch schema.
type jsvPatchOp struct {
	op    string
	path  string
	value any
	has   bool // value present
}

func (o jsvPatchOp) repr() string {
	m := "{'op': " + scQuote(o.op) + ", 'path': " + scQuote(o.path)
	if o.has {
		m += ", 'value': " + scRepr(o.value)
	}
	return m + "}"
}

// jsvPatchPathRE is args.patch's '^(/[\w-]+)+$' with Python's Unicode \w.
var jsvPatchPathRE = regexp.MustCompile(`^(/[\p{L}\p{N}\p{M}_-]+)+$`)

// jsvParsePatch checks a PATCH body against Ironic's patch schema (a list of
// add/replace/remove operations on '/word' paths).
func jsvParsePatch(raw any) ([]jsvPatchOp, error) {
	var e jsvErrors
	list, ok := raw.([]any)
	if !ok {
		e.checkType(0, raw, "array")
		return nil, e.err("patch")
	}
	ops := make([]jsvPatchOp, 0, len(list))
	for _, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			e.checkType(1, item, "object")
			continue
		}
		if p, ok := obj["path"]; ok && e.checkType(2, p, "string") && !jsvPatchPathRE.MatchString(p.(string)) {
			e.add(2, "%s does not match %s", scRepr(p), scRepr(`^(/[\w-]+)+$`))
		}
		if op, ok := obj["op"]; ok && e.checkType(2, op, "string") && !slices.Contains([]string{"add", "replace", "remove"}, op.(string)) {
			e.add(2, "%s is not one of ['add', 'replace', 'remove']", scRepr(op))
		}
		e.checkAdditional(1, obj, []string{"path", "op", "value"})
		e.checkRequired(1, obj, "op", "path")
		op, _ := obj["op"].(string)
		path, _ := obj["path"].(string)
		v, has := obj["value"]
		ops = append(ops, jsvPatchOp{op: op, path: path, value: v, has: has})
	}
	if err := e.err("patch"); err != nil {
		return nil, err
	}
	return ops, nil
}

// jsvApplyPatch applies ops one at a time to doc (a copy is changed) with
// python-jsonpatch's semantics and messages, as Ironic's apply_jsonpatch.
func jsvApplyPatch(doc map[string]any, ops []jsvPatchOp) (map[string]any, error) {
	var root any = jsvCopy(doc)
	for _, op := range ops {
		next, reason := jsvApplyOne(root, op)
		if reason != "" {
			return nil, fault.New(fault.Invalid, "Couldn't apply patch '%s'. Reason: %s", op.repr(), reason)
		}
		root = next
	}
	out, _ := root.(map[string]any)
	return out, nil
}

func jsvApplyOne(root any, op jsvPatchOp) (any, string) {
	if op.op != "remove" && !op.has {
		return nil, "The operation does not contain a 'value' member"
	}
	parts := strings.Split(op.path, "/")[1:]
	parent := root
	for _, part := range parts[:len(parts)-1] {
		var reason string
		if parent, reason = jsvWalk(parent, part); reason != "" {
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
			p[last] = jsvCopy(op.value)
		default:
			p[last] = jsvCopy(op.value)
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
			out[idx] = jsvCopy(op.value)
		default:
			if idx < 0 || idx > len(p) {
				return nil, "can't insert outside of list"
			}
			out = slices.Insert(slices.Clone(p), idx, jsvCopy(op.value))
		}
		return jsvSetAt(root, parts[:len(parts)-1], out), ""
	}
	return nil, "unable to fully resolve json pointer " + op.path + ", part " + last
}

// jsvWalk is jsonpointer's walk: one step into a mapping or a sequence.
func jsvWalk(doc any, part string) (any, string) {
	switch d := doc.(type) {
	case map[string]any:
		v, ok := d[part]
		if !ok {
			return nil, "member '" + part + "' not found in " + scRepr(d)
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
	return nil, "Document '" + jsvPyType(doc) + "' does not support indexing, must be mapping/sequence or support __getitem__"
}

func jsvPyType(v any) string {
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

// jsvSetAt replaces the value at parts (which exists) with v.
func jsvSetAt(root any, parts []string, v any) any {
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
		cur, _ = jsvWalk(cur, part)
	}
	return root
}

func jsvCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = jsvCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = jsvCopy(x)
		}
		return l
	}
	return v
}
