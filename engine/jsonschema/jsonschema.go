// Package jsonschema is castiron's one JSON Schema (draft 2020-12)
// validator, for the request schemas of the API and the RAID configuration,
// so that their 400s carry the very message Ironic's jsonschema gives: the
// error that jsonschema's best_match (4.26) picks among all of them
// ("Schema error for template: 'foo' is not one of [...]"), plus Ironic's
// ". Possible root cause: ..." for anyOf.
//
// Only the keywords Ironic's schemas use are implemented. Keywords are checked
// in one fixed order that matches the order Ironic's schema dicts list them,
// which decides ties between errors at the same place.
package jsonschema

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"castiron/fault"
	"castiron/fault/pyrepr"
)

// Schema is one (sub)schema.
type Schema struct {
	Types   []string // "object", "array", "string", "integer", "boolean", "null"
	Enum    []string // string enums only
	InEnum  func(string) bool
	Minimum *int64
	// ExclusiveMinimum is draft 4's boolean form: Minimum itself is out.
	ExclusiveMinimum bool
	MinLength        int                   // 0: none
	MaxLength        int                   // 0: none
	Pattern          func() *regexp.Regexp // LazyPattern: compiled on first use
	PatternSrc       string                // the pattern as Ironic writes it (for the message)
	Items            *Schema
	MinItems         int
	Props            []Prop
	Required         []string
	Closed           bool // additionalProperties: false
	AnyOf            []*Schema
	OneOf            []*Schema
	// Repr is the schema as Python prints it, for oneOf's "valid under
	// each of" message (only oneOf branches need it).
	Repr string
}

// Prop is one property of an object schema, in the order Ironic's schema
// lists it.
type Prop struct {
	Name   string
	Schema *Schema
}

// vError is a jsonschema ValidationError: where (path below the validated
// instance), which keyword, its message and, for anyOf, the errors of each
// branch.
type vError struct {
	path        []any // string keys and int indexes
	keyword     string
	msg         string
	matchesType bool
	context     []*vError
}

// validate returns every error of v against s (jsonschema's iter_errors).
func validate(s *Schema, v any) []*vError {
	var errs []*vError
	add := func(kw, format string, args ...any) {
		errs = append(errs, &vError{keyword: kw, msg: fmt.Sprintf(format, args...), matchesType: matchesType(s, v)})
	}
	if len(s.Types) > 0 && !IsAny(v, s.Types) {
		add("type", "%s is not of type %s", pyrepr.Repr(v), TypeList(s.Types))
	}
	if str, ok := v.(string); ok {
		if s.Enum != nil && !containsStr(s.Enum, str) {
			add("enum", "%s is not one of %s", pyrepr.Repr(v), pyrepr.Repr(s.Enum))
		}
		if s.InEnum != nil && !s.InEnum(str) {
			add("enum", "%s is not one of the standard traits", pyrepr.Repr(v))
		}
	} else if s.Enum != nil || s.InEnum != nil {
		add("enum", "%s is not one of %s", pyrepr.Repr(v), pyrepr.Repr(s.Enum))
	}
	if s.Minimum != nil && IsAny(v, []string{"number"}) {
		switch n := Number(v); {
		case s.ExclusiveMinimum && n <= float64(*s.Minimum):
			add("minimum", "%s is less than or equal to the minimum of %d", pyrepr.Repr(v), *s.Minimum)
		case n < float64(*s.Minimum):
			add("minimum", "%s is less than the minimum of %d", pyrepr.Repr(v), *s.Minimum)
		}
	}
	if str, ok := v.(string); ok {
		n := utf8.RuneCountInString(str)
		if s.MinLength > 0 && n < s.MinLength {
			add("minLength", "%s %s", pyrepr.Repr(v), tooShort(s.MinLength))
		}
		if s.MaxLength > 0 && n > s.MaxLength {
			add("maxLength", "%s is too long", pyrepr.Repr(v))
		}
		if s.Pattern != nil && !s.Pattern().MatchString(str) {
			add("pattern", "%s does not match %s", pyrepr.Repr(v), pyrepr.Repr(s.PatternSrc))
		}
	}
	if list, ok := v.([]any); ok {
		if s.Items != nil {
			for i, item := range list {
				for _, e := range validate(s.Items, item) {
					e.path = append([]any{i}, e.path...)
					errs = append(errs, e)
				}
			}
		}
		if s.MinItems > 0 && len(list) < s.MinItems {
			add("minItems", "%s %s", pyrepr.Repr(v), tooShort(s.MinItems))
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, p := range s.Props {
			if pv, has := obj[p.Name]; has {
				for _, e := range validate(p.Schema, pv) {
					e.path = append([]any{p.Name}, e.path...)
					errs = append(errs, e)
				}
			}
		}
		for _, k := range s.Required {
			if _, has := obj[k]; !has {
				add("required", "%s is a required property", pyrepr.Repr(k))
			}
		}
		if s.Closed {
			var extra []string
			for k := range obj {
				known := false
				for _, p := range s.Props {
					known = known || p.Name == k
				}
				if !known {
					extra = append(extra, k)
				}
			}
			if len(extra) > 0 {
				add("additionalProperties", "%s", AdditionalMsg(extra))
			}
		}
	}
	if len(s.AnyOf) > 0 {
		var all []*vError
		ok := false
		for _, sub := range s.AnyOf {
			sub := validate(sub, v)
			if len(sub) == 0 {
				ok = true
				break
			}
			all = append(all, sub...)
		}
		if !ok {
			errs = append(errs, &vError{keyword: "anyOf", msg: pyrepr.Repr(v) + " is not valid under any of the given schemas",
				matchesType: matchesType(s, v), context: all})
		}
	}
	if len(s.OneOf) > 0 {
		errs = append(errs, oneOf(s, v)...)
	}
	return errs
}

// oneOf is jsonschema's oneOf: an error when no branch matches (its
// branches' errors as context), another naming the branches when more than
// one does (the later ones first, then the first that matched).
func oneOf(s *Schema, v any) []*vError {
	var all []*vError
	first := -1
	for i, sub := range s.OneOf {
		errs := validate(sub, v)
		if len(errs) == 0 {
			first = i
			break
		}
		all = append(all, errs...)
	}
	if first < 0 {
		return []*vError{{keyword: "oneOf", msg: pyrepr.Repr(v) + " is not valid under any of the given schemas", matchesType: matchesType(s, v), context: all}}
	}
	var more []string
	for _, sub := range s.OneOf[first+1:] {
		if len(validate(sub, v)) == 0 {
			more = append(more, sub.Repr)
		}
	}
	if len(more) == 0 {
		return nil
	}
	more = append(more, s.OneOf[first].Repr)
	return []*vError{{keyword: "oneOf", msg: pyrepr.Repr(v) + " is valid under each of " + strings.Join(more, ", "), matchesType: matchesType(s, v)}}
}

// TypeList is a type keyword's types as jsonschema's message lists them:
// "'string', 'null'".
func TypeList(types []string) string {
	q := make([]string, len(types))
	for i, t := range types {
		q[i] = "'" + t + "'"
	}
	return strings.Join(q, ", ")
}

// AdditionalMsg is jsonschema's additionalProperties message for the
// unexpected keys (sorted here, as Go maps keep no order).
func AdditionalMsg(extra []string) string {
	sort.Strings(extra)
	q := make([]string, len(extra))
	for i, k := range extra {
		q[i] = pyrepr.Quote(k)
	}
	verb := "was"
	if len(extra) > 1 {
		verb = "were"
	}
	return fmt.Sprintf("Additional properties are not allowed (%s %s unexpected)", strings.Join(q, ", "), verb)
}

// tooShort is jsonschema's wording for MinLength and minItems.
func tooShort(min int) string {
	if min == 1 {
		return "should be non-empty"
	}
	return "is too short"
}

// Message is the message of the error jsonschema's best_match picks for v
// against s ("" when v is valid): what jsonschema.validate raises, as
// Ironic's RAID validation quotes it.
func Message(s *Schema, v any) string {
	if best := bestMatch(validate(s, v)); best != nil {
		return best.msg
	}
	return ""
}

// Check validates v against s and returns nil or Ironic's 400
// "<prefix>: <message>[. Possible root cause: <cause>]", where prefix is
// "Schema error for <name>" (args.schema) or "Schema error" (the
// request_*_schema decorators).
func Check(prefix string, s *Schema, v any) error {
	best := bestMatch(validate(s, v))
	if best == nil {
		return nil
	}
	msg := prefix + ": " + best.msg
	var cause string
	for cur := best; len(cur.context) > 0; {
		cur = bestMatch(cur.context)
		cause = cur.msg
	}
	if cause != "" {
		msg += ". Possible root cause: " + cause
	}
	return fault.New(fault.Invalid, "%s", msg)
}

// bestMatch is jsonschema.exceptions.best_match: the most relevant error
// (shallowest; then the greater path; then not anyOf; then one whose schema
// type fits the instance), descending into an anyOf's branches while one
// branch error is strictly the least relevant.
func bestMatch(errs []*vError) *vError {
	if len(errs) == 0 {
		return nil
	}
	best := errs[0]
	for _, e := range errs[1:] {
		if relevance(e, best) > 0 {
			best = e
		}
	}
	for len(best.context) > 0 {
		first, second := smallest2(best.context)
		if second != nil && relevance(first, second) == 0 {
			return best
		}
		best = first
	}
	return best
}

// smallest2 is heapq.nsmallest(2, errs, key=relevance): stable.
func smallest2(errs []*vError) (*vError, *vError) {
	sorted := make([]*vError, len(errs))
	copy(sorted, errs)
	sort.SliceStable(sorted, func(i, j int) bool { return relevance(sorted[i], sorted[j]) < 0 })
	if len(sorted) == 1 {
		return sorted[0], nil
	}
	return sorted[0], sorted[1]
}

// relevance compares jsonschema's relevance keys of a and b:
// (-len(path), path, keyword not weak, not matchesType is NOT preferred...).
// It returns <0, 0 or >0 as key(a) is less than, equal to or greater than
// key(b).
func relevance(a, b *vError) int {
	if c := cmpInt(-len(a.path), -len(b.path)); c != 0 {
		return c
	}
	if c := comparePath(a.path, b.path); c != 0 {
		return c
	}
	if c := cmpBool(!weak(a.keyword), !weak(b.keyword)); c != 0 {
		return c
	}
	return cmpBool(!a.matchesType, !b.matchesType)
}

// weak are jsonschema's WEAK_MATCHES.
func weak(keyword string) bool { return keyword == "anyOf" || keyword == "oneOf" }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// comparePath compares two paths as Python compares deques.
func comparePath(a, b []any) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		switch x := a[i].(type) {
		case int:
			if y, ok := b[i].(int); ok {
				if c := cmpInt(x, y); c != 0 {
					return c
				}
				continue
			}
		case string:
			if y, ok := b[i].(string); ok {
				if c := strings.Compare(x, y); c != 0 {
					return c
				}
				continue
			}
		}
		return 0 // mixed Types never meet in these schemas
	}
	return cmpInt(len(a), len(b))
}

// matchesType is ValidationError._matches_type: the schema names a type
// and v is of it.
func matchesType(s *Schema, v any) bool {
	return len(s.Types) > 0 && IsAny(v, s.Types)
}

// IsAny reports whether v is of one of the JSON types.
func IsAny(v any, types []string) bool {
	for _, t := range types {
		switch t {
		case "null":
			if v == nil {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "integer":
			switch n := v.(type) {
			case int64:
				return true
			case float64:
				if n == math.Trunc(n) && !math.IsInf(n, 0) {
					return true
				}
			}
		case "number":
			switch v.(type) {
			case int64, float64:
				return true
			}
		}
	}
	return false
}

// Number is a decoded JSON number as float64 (0 for anything else).
func Number(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Types is a schema of the given JSON types only.
func Types(types ...string) *Schema { return &Schema{Types: types} }

// Object is an object schema with its properties; closed is
// additionalProperties: false.
func Object(closed bool, required []string, props ...Prop) *Schema {
	return &Schema{Types: []string{"object"}, Props: props, Required: required, Closed: closed}
}

// WithPattern adds the pattern src (as Ironic writes it) to s.
func WithPattern(s *Schema, src string) *Schema {
	s.PatternSrc = src
	s.Pattern = LazyPattern(src)
	return s
}

// LazyPattern compiles src when a value is first checked against it, not
// when the schema is built (at start-up, for schemas held in variables).
func LazyPattern(src string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(src) })
}

// Int64 is a pointer to v, for Minimum.
func Int64(v int64) *int64 { return &v }

// P is the property name with its schema.
func P(name string, s *Schema) Prop { return Prop{Name: name, Schema: s} }
