// Package rootdevice implements Ironic's root device hints: validating a
// node's properties.root_device, and picking the disk they describe from an
// inventory, with Ironic's grammar (oslo.utils specs_matcher), its messages
// and its quirks, so the API and the agent agree with Ironic and with each
// other.
package rootdevice

import (
	"fmt"
	"sort"
	"strings"

	"castiron/fault/pyrepr"
)

type hintType int

const (
	hintStr hintType = iota
	hintInt
	hintBool
)

// validHints in Ironic's order (VALID_ROOT_DEVICE_HINTS), which its error
// message lists.
var validHints = []struct {
	name string
	typ  hintType
}{
	{"size", hintInt}, {"model", hintStr}, {"wwn", hintStr}, {"serial", hintStr}, {"vendor", hintStr},
	{"wwn_with_extension", hintStr}, {"wwn_vendor_extension", hintStr}, {"name", hintStr},
	{"rotational", hintBool}, {"hctl", hintStr}, {"by_path", hintStr},
}

func hintTypeOf(name string) (hintType, bool) {
	for _, h := range validHints {
		if h.name == name {
			return h.typ, true
		}
	}
	return 0, false
}

// InvalidHintsError is a hint set Ironic refuses; Error() is Ironic's text.
type InvalidHintsError struct{ Msg string }

func (e *InvalidHintsError) Error() string { return e.Msg }

func invalidf(format string, args ...any) error {
	return &InvalidHintsError{Msg: fmt.Sprintf(format, args...)}
}

// parsedHint is one hint after parse_root_device_hints: a specs_matcher
// expression with its operator ("s== foo", ">= 4"), or a Boolean.
type parsedHint struct {
	name string
	typ  hintType
	spec string
	b    bool
}

// Validate checks root device hints as Ironic's parse_root_device_hints
// does and returns its error messages. Empty hints are valid.
func Validate(hints map[string]any) error {
	_, err := parse(hints)
	return err
}

// opAndValues is _extract_hint_operator_and_values: the operator of the
// lowercased expression and the values it applies to.
func opAndValues(expression any, name string) (string, []string, error) {
	expr := strings.ToLower(pyStrip(pyStr(expression)))
	if expr == "" {
		return "", nil, invalidf("Root device hint \"%s\" expression is empty", name)
	}
	toks, err := parseSpec(expr)
	if err != nil {
		return "", nil, invalidf("Root device hint \"%s\" expression %s cannot be parsed", name, pyrepr.Repr(expression))
	}
	if len(toks) <= 1 {
		return "", []string{expr}, nil
	}
	op := toks[0]
	var values []string
	for _, v := range strings.Split(expr, op) {
		if v != "" {
			values = append(values, pyStrip(v))
		}
	}
	return op, values, nil
}

// normalize is _normalize_hint_expression: values URL-quoted so that
// spaces and specials survive the grammar, operators kept.
func normalize(expression any, name string) (string, error) {
	op, values, err := opAndValues(expression, name)
	if err != nil {
		return "", err
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = " " + pyQuote(v) + " "
	}
	return pyStrip(op + strings.Join(quoted, op)), nil
}

var (
	trueStrings  = []string{"1", "t", "true", "on", "y", "yes"}
	falseStrings = []string{"0", "f", "false", "off", "n", "no"}
)

// boolFromString is oslo's strutils.bool_from_string(v, strict=True).
func boolFromString(v any) (bool, bool) {
	if b, ok := v.(bool); ok {
		return b, true
	}
	s := strings.ToLower(pyStrip(pyStr(v)))
	for _, t := range trueStrings {
		if s == t {
			return true, true
		}
	}
	for _, f := range falseStrings {
		if s == f {
			return false, true
		}
	}
	return false, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parse is parse_root_device_hints followed by _append_operator_to_hints.
// Hints are visited in name order (a JSON object's order is not kept).
func parse(hints map[string]any) ([]parsedHint, error) {
	if len(hints) == 0 {
		return nil, nil
	}
	var invalid []string
	for _, k := range sortedKeys(hints) {
		if _, ok := hintTypeOf(k); !ok {
			invalid = append(invalid, k)
		}
	}
	if len(invalid) > 0 {
		valid := make([]string, len(validHints))
		for i, h := range validHints {
			valid[i] = h.name
		}
		return nil, invalidf("The hints \"%s\" are invalid. Valid hints are: \"%s\"", strings.Join(invalid, ", "), strings.Join(valid, ", "))
	}
	var out []parsedHint
	for _, name := range sortedKeys(hints) {
		expression := hints[name]
		typ, _ := hintTypeOf(name)
		op, values, err := opAndValues(expression, name)
		if err != nil {
			return nil, err
		}
		p := parsedHint{name: name, typ: typ}
		switch {
		case name == "size" && op == opRangeIn:
			p.spec = pyStr(expression)
		case typ == hintStr:
			s, ok := expression.(string)
			if !ok {
				return nil, invalidf("Root device hint \"%s\" is not a string value. Hint expression: %s", name, pyStr(expression))
			}
			if p.spec, err = normalize(s, name); err != nil {
				return nil, err
			}
			if p.spec, err = withOperator(p.spec, "s== "); err != nil {
				return nil, invalidf("Root device hint \"%s\" expression %s cannot be parsed", name, pyrepr.Repr(expression))
			}
		case typ == hintInt:
			for _, v := range values {
				n, ok := pyInt(v)
				if !ok {
					return nil, invalidf("Root device hint \"%s\" is not an integer value. Current value: %s", name, pyStr(expression))
				}
				if n <= 0 {
					return nil, invalidf("Root device hint \"%s\" should be a positive integer. Current value: %s", name, pyStr(expression))
				}
			}
			if p.spec, err = withOperator(pyStr(expression), "== "); err != nil {
				return nil, invalidf("Root device hint \"%s\" expression %s cannot be parsed", name, pyrepr.Repr(expression))
			}
		case typ == hintBool:
			b, ok := boolFromString(expression)
			if !ok {
				return nil, invalidf("Root device hint \"%s\" is not a Boolean value. Current value: %s", name, pyStr(expression))
			}
			p.b = b
		}
		out = append(out, p)
	}
	return out, nil
}

// withOperator prefixes the default operator to an expression that has
// none, as _append_operator_to_hints does for backwards compatibility.
func withOperator(expr, defaultOp string) (string, error) {
	toks, err := parseSpec(expr)
	if err != nil {
		return "", err
	}
	if len(toks) > 1 {
		return expr, nil
	}
	return defaultOp + expr, nil
}
