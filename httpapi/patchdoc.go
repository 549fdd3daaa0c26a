package httpapi

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// patchdocPathRE is the path pattern of Ironic's args.patch schema,
// '^(/[\w-]+)+$', with Python's Unicode \w.
var patchdocPathRE = regexp.MustCompile(`^(/[\p{L}\p{N}_-]+)+$`)

// patchdocParse checks a PATCH body against Ironic's args.patch schema
// (the one chassis and portgroups use): a list of {"op", "path"[, "value"]}
// with op add, replace or remove. Errors are worded as jsonschema's.
func patchdocParse(raw any) ([]map[string]any, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, argTypeError("patch", raw, "array")
	}
	ops := make([]map[string]any, 0, len(list))
	for _, item := range list {
		op, ok := item.(map[string]any)
		if !ok {
			return nil, argTypeError("patch", item, "object")
		}
		keys := make([]string, 0, len(op))
		for k := range op {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if k != "op" && k != "path" && k != "value" {
				return nil, errInvalid("Schema error for patch: Additional properties are not allowed ('%s' was unexpected)", k)
			}
		}
		for _, k := range []string{"op", "path"} {
			if _, has := op[k]; !has {
				return nil, errInvalid("Schema error for patch: '%s' is a required property", k)
			}
		}
		verb, ok := op["op"].(string)
		if !ok {
			return nil, argTypeError("patch", op["op"], "string")
		}
		if verb != "add" && verb != "replace" && verb != "remove" {
			return nil, errInvalid("Schema error for patch: %s is not one of ['add', 'replace', 'remove']", pyRepr(verb))
		}
		path, ok := op["path"].(string)
		if !ok {
			return nil, argTypeError("patch", op["path"], "string")
		}
		if !patchdocPathRE.MatchString(path) {
			return nil, errInvalid(`Schema error for patch: %s does not match '^(/[\\w-]+)+$'`, pyRepr(path))
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// patchdocCheckFields is Ironic's patch_validate_allowed_fields.
func patchdocCheckFields(ops []map[string]any, allowed []string) error {
	for _, op := range ops {
		path := op["path"].(string)
		if !slices.Contains(allowed, rootOf(path)) {
			return errInvalid("Cannot patch %s. Only the following can be updated: %s", path, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// patchdocTouches is Ironic's is_path_updated over every operation: whether an
// operation targets path or something below it.
func patchdocTouches(ops []map[string]any, path string) bool {
	for _, op := range ops {
		p := op["path"].(string)
		if p == path || strings.HasPrefix(p, path+"/") {
			return true
		}
	}
	return false
}

// patchdocApply is Ironic's apply_jsonpatch: adding a root attribute the
// document lacks is refused, and the operations apply one at a time so an
// error names the one that failed. Numbers come back as int64 or float64.
func patchdocApply(doc map[string]any, ops []map[string]any) (map[string]any, error) {
	return patchdocApplyEach(doc, ops, func(op map[string]any, err error) error {
		return errInvalid("Couldn't apply patch '%s'. Reason: %v", patchdocPyOp(op), err)
	})
}

// patchdocApplyEach is apply_jsonpatch with the error for a failed
// operation worded by failed (the callers differ in how they render it).
// ops' paths have passed the patch schema, so each starts with "/".
func patchdocApplyEach(doc map[string]any, ops []map[string]any, failed func(op map[string]any, err error) error) (map[string]any, error) {
	for _, op := range ops {
		path := op["path"].(string)
		if op["op"] == "add" && strings.Count(path, "/") == 1 {
			if _, has := doc[strings.TrimPrefix(path, "/")]; !has {
				return nil, errInvalid("Adding a new attribute (%s) to the root of the resource is not allowed", path)
			}
		}
	}
	cur, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		one, _ := json.Marshal([]map[string]any{op})
		patch, err := jsonpatch.DecodePatch(one)
		if err == nil {
			var out []byte
			if out, err = patch.Apply(cur); err == nil {
				cur = out
				continue
			}
		}
		return nil, failed(op, err)
	}
	var result map[string]any
	dec := json.NewDecoder(bytes.NewReader(cur))
	dec.UseNumber()
	if err := dec.Decode(&result); err != nil {
		return nil, err
	}
	return normalizeNumbers(result).(map[string]any), nil
}

// patchdocPyOp renders a patch operation roughly as Python prints the dict.
func patchdocPyOp(op map[string]any) string {
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, k := range []string{"op", "path", "value"} {
		v, has := op[k]
		if !has {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString("'" + k + "': " + pyRepr(v))
	}
	b.WriteString("}")
	return b.String()
}
