package httpapi

import (
	"fmt"
	"regexp"
	"slices"

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
