package httpapi

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"castiron/fault"
)

// A small JSON Schema (draft 2020-12) validator for the request schemas of
// the volume and deploy template APIs, so that their 400s carry the very
// message Ironic's jsonschema gives: the error that jsonschema's best_match
// picks among all of them ("Schema error for template: 'foo' is not one of
// [...]"), plus Ironic's ". Possible root cause: ..." for anyOf.
//
// Only the keywords those schemas use are implemented. Keywords are checked
// in one fixed order that matches the order Ironic's schema dicts list them,
// which decides ties between errors at the same place.

// scSchema is one (sub)schema.
type scSchema struct {
	types     []string // "object", "array", "string", "integer", "boolean", "null"
	enum      []string // string enums only
	inEnum    func(string) bool
	minimum   *int64
	minLength int // 0: none
	maxLength int // 0: none
	pattern   *regexp.Regexp
	patSrc    string // the pattern as Ironic writes it (for the message)
	items     *scSchema
	minItems  int
	props     []scProp
	required  []string
	closed    bool // additionalProperties: false
	anyOf     []*scSchema
}

type scProp struct {
	name   string
	schema *scSchema
}

// scError is a jsonschema ValidationError: where (path below the validated
// instance), which keyword, its message and, for anyOf, the errors of each
// branch.
type scError struct {
	path        []any // string keys and int indexes
	keyword     string
	msg         string
	matchesType bool
	context     []*scError
}

// scValidate returns every error of v against s (jsonschema's iter_errors).
func scValidate(s *scSchema, v any) []*scError {
	var errs []*scError
	add := func(kw, format string, args ...any) {
		errs = append(errs, &scError{keyword: kw, msg: fmt.Sprintf(format, args...), matchesType: scMatchesType(s, v)})
	}
	if len(s.types) > 0 && !scIsAny(v, s.types) {
		add("type", "%s is not of type %s", scRepr(v), scTypeList(s.types))
	}
	if str, ok := v.(string); ok {
		if s.enum != nil && !containsStr(s.enum, str) {
			add("enum", "%s is not one of %s", scRepr(v), scRepr(s.enum))
		}
		if s.inEnum != nil && !s.inEnum(str) {
			add("enum", "%s is not one of the standard traits", scRepr(v))
		}
	} else if s.enum != nil || s.inEnum != nil {
		add("enum", "%s is not one of %s", scRepr(v), scRepr(s.enum))
	}
	if s.minimum != nil && scIsAny(v, []string{"number"}) && scNumber(v) < float64(*s.minimum) {
		add("minimum", "%s is less than the minimum of %d", scRepr(v), *s.minimum)
	}
	if str, ok := v.(string); ok {
		n := utf8.RuneCountInString(str)
		if s.minLength > 0 && n < s.minLength {
			add("minLength", "%s %s", scRepr(v), scTooShort(s.minLength))
		}
		if s.maxLength > 0 && n > s.maxLength {
			add("maxLength", "%s is too long", scRepr(v))
		}
		if s.pattern != nil && !s.pattern.MatchString(str) {
			add("pattern", "%s does not match %s", scRepr(v), scRepr(s.patSrc))
		}
	}
	if list, ok := v.([]any); ok {
		if s.items != nil {
			for i, item := range list {
				for _, e := range scValidate(s.items, item) {
					e.path = append([]any{i}, e.path...)
					errs = append(errs, e)
				}
			}
		}
		if s.minItems > 0 && len(list) < s.minItems {
			add("minItems", "%s %s", scRepr(v), scTooShort(s.minItems))
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, p := range s.props {
			if pv, has := obj[p.name]; has {
				for _, e := range scValidate(p.schema, pv) {
					e.path = append([]any{p.name}, e.path...)
					errs = append(errs, e)
				}
			}
		}
		for _, k := range s.required {
			if _, has := obj[k]; !has {
				add("required", "%s is a required property", scRepr(k))
			}
		}
		if s.closed {
			var extra []string
			for k := range obj {
				known := false
				for _, p := range s.props {
					known = known || p.name == k
				}
				if !known {
					extra = append(extra, k)
				}
			}
			if len(extra) > 0 {
				add("additionalProperties", "%s", scAdditionalMsg(extra))
			}
		}
	}
	if len(s.anyOf) > 0 {
		var all []*scError
		ok := false
		for _, sub := range s.anyOf {
			sub := scValidate(sub, v)
			if len(sub) == 0 {
				ok = true
				break
			}
			all = append(all, sub...)
		}
		if !ok {
			errs = append(errs, &scError{keyword: "anyOf", msg: scRepr(v) + " is not valid under any of the given schemas",
				matchesType: scMatchesType(s, v), context: all})
		}
	}
	return errs
}

// scTypeList is a type keyword's types as jsonschema's message lists them:
// "'string', 'null'".
func scTypeList(types []string) string {
	q := make([]string, len(types))
	for i, t := range types {
		q[i] = "'" + t + "'"
	}
	return strings.Join(q, ", ")
}

// scAdditionalMsg is jsonschema's additionalProperties message for the
// unexpected keys (sorted here, as Go maps keep no order).
func scAdditionalMsg(extra []string) string {
	sort.Strings(extra)
	q := make([]string, len(extra))
	for i, k := range extra {
		q[i] = scQuote(k)
	}
	verb := "was"
	if len(extra) > 1 {
		verb = "were"
	}
	return fmt.Sprintf("Additional properties are not allowed (%s %s unexpected)", strings.Join(q, ", "), verb)
}

// scTooShort is jsonschema's wording for minLength and minItems.
func scTooShort(min int) string {
	if min == 1 {
		return "should be non-empty"
	}
	return "is too short"
}

// scCheck validates v against s and returns nil or Ironic's 400
// "<prefix>: <message>[. Possible root cause: <cause>]", where prefix is
// "Schema error for <name>" (args.schema) or "Schema error" (the
// request_*_schema decorators).
func scCheck(prefix string, s *scSchema, v any) error {
	best := scBestMatch(scValidate(s, v))
	if best == nil {
		return nil
	}
	msg := prefix + ": " + best.msg
	var cause string
	for cur := best; len(cur.context) > 0; {
		cur = scBestMatch(cur.context)
		cause = cur.msg
	}
	if cause != "" {
		msg += ". Possible root cause: " + cause
	}
	return fault.New(fault.Invalid, "%s", msg)
}

// scBestMatch is jsonschema.exceptions.best_match: the most relevant error
// (shallowest; then the greater path; then not anyOf; then one whose schema
// type fits the instance), descending into an anyOf's branches while one
// branch error is strictly the least relevant.
func scBestMatch(errs []*scError) *scError {
	if len(errs) == 0 {
		return nil
	}
	best := errs[0]
	for _, e := range errs[1:] {
		if scRelevance(e, best) > 0 {
			best = e
		}
	}
	for len(best.context) > 0 {
		first, second := scSmallest2(best.context)
		if second != nil && scRelevance(first, second) == 0 {
			return best
		}
		best = first
	}
	return best
}

// scSmallest2 is heapq.nsmallest(2, errs, key=relevance): stable.
func scSmallest2(errs []*scError) (*scError, *scError) {
	sorted := make([]*scError, len(errs))
	copy(sorted, errs)
	sort.SliceStable(sorted, func(i, j int) bool { return scRelevance(sorted[i], sorted[j]) < 0 })
	if len(sorted) == 1 {
		return sorted[0], nil
	}
	return sorted[0], sorted[1]
}

// scRelevance compares jsonschema's relevance keys of a and b:
// (-len(path), path, keyword not weak, not matchesType is NOT preferred...).
// It returns <0, 0 or >0 as key(a) is less than, equal to or greater than
// key(b).
func scRelevance(a, b *scError) int {
	if c := cmpInt(-len(a.path), -len(b.path)); c != 0 {
		return c
	}
	if c := scComparePath(a.path, b.path); c != 0 {
		return c
	}
	if c := cmpBool(a.keyword != "anyOf", b.keyword != "anyOf"); c != 0 {
		return c
	}
	return cmpBool(!a.matchesType, !b.matchesType)
}

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

// scComparePath compares two paths as Python compares deques.
func scComparePath(a, b []any) int {
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
		return 0 // mixed types never meet in these schemas
	}
	return cmpInt(len(a), len(b))
}

// scMatchesType is ValidationError._matches_type: the schema names a type
// and v is of it.
func scMatchesType(s *scSchema, v any) bool {
	return len(s.types) > 0 && scIsAny(v, s.types)
}

func scIsAny(v any, types []string) bool {
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

func scNumber(v any) float64 {
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

// scRepr is Python's repr() of a decoded JSON value (dict keys sorted: Go
// maps keep no order).
func scRepr(v any) string {
	var b strings.Builder
	scWriteRepr(&b, v)
	return b.String()
}

func scWriteRepr(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if t {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		b.WriteString(scQuote(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case int:
		b.WriteString(strconv.Itoa(t))
	case float64:
		b.WriteString(scFloat(t))
	case []string:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(scQuote(x))
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			scWriteRepr(b, x)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(scQuote(k))
			b.WriteString(": ")
			scWriteRepr(b, t[k])
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", t)
	}
}

// scFloat is Python's repr of a float.
func scFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-4 && a < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	digits := strings.TrimLeft(exp[1:], "0")
	if len(digits) < 2 {
		digits = strings.Repeat("0", 2-len(digits)) + digits
	}
	return mant + "e" + string(sign) + digits
}

// scQuote is Python's repr of a str.
func scQuote(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// Schema builders.

func scTypes(types ...string) *scSchema { return &scSchema{types: types} }

func scObject(closed bool, required []string, props ...scProp) *scSchema {
	return &scSchema{types: []string{"object"}, props: props, required: required, closed: closed}
}

func scPattern(s *scSchema, src string) *scSchema {
	s.patSrc = src
	s.pattern = regexp.MustCompile(src)
	return s
}

func scInt64(v int64) *int64 { return &v }
