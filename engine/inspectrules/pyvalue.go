package inspectrules

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"castiron/fault/pyrepr"
)

// Ironic runs inspection rules in Python: comparisons, membership, str()
// of values and str.format follow Python's rules. Values here are JSON
// trees decoded with UseNumber (nil, bool, json.Number, string,
// map[string]any, []any), plus the two views below. This file is Python's
// value semantics over them.

// pyError is a Python exception raised while evaluating a rule: Type is
// the exception class name ("TypeError", "KeyError"), Msg its str().
type pyError struct {
	Type string
	Msg  string
}

func (e *pyError) Error() string { return e.Msg }

func typeErr(format string, a ...any) error { return &pyError{"TypeError", fmt.Sprintf(format, a...)} }

// object is the node (or a port) as rules see it: fields are attributes
// ({node.driver}), it cannot be indexed ({node[driver]} fails).
type object struct {
	class  string // "Node", "Port"
	fields map[string]any
}

// masked is Ironic's ShallowMaskDict/ShallowMaskList: a view of a dict or
// list in which keys named like secrets read as "***", applied at every
// depth on the way down. Writes go to the underlying value.
type masked struct {
	v  any // map[string]any or []any
	on bool
}

// sensitiveKeys are Ironic's SENSITIVE_FIELDS.
var sensitiveKeys = map[string]bool{"password": true, "auth_token": true, "bmc_password": true}

// wrap views v through the mask (containers only).
func wrap(v any, on bool) any {
	switch v.(type) {
	case map[string]any, []any:
		return &masked{v: v, on: on}
	}
	return v
}

// unwrap returns the underlying value of a view.
func unwrap(v any) any {
	if m, ok := v.(*masked); ok {
		return m.v
	}
	return v
}

// pyNumber is a JSON number as Python holds it: an int (arbitrary size)
// or a float.
type pyNumber struct {
	isFloat bool
	i       *big.Int
	f       float64
}

func numberOf(v any) (pyNumber, bool) {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, ok := new(big.Int).SetString(s, 10); ok {
				return pyNumber{i: i}, true
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !isRange(err) {
			return pyNumber{}, false
		}
		return pyNumber{isFloat: true, f: f}, true
	case bool:
		if x {
			return pyNumber{i: big.NewInt(1)}, true
		}
		return pyNumber{i: big.NewInt(0)}, true
	case int:
		return pyNumber{i: big.NewInt(int64(x))}, true
	case int64:
		return pyNumber{i: big.NewInt(x)}, true
	case float64:
		return pyNumber{isFloat: true, f: x}, true
	}
	return pyNumber{}, false
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (n pyNumber) float() float64 {
	if n.isFloat {
		return n.f
	}
	f, _ := new(big.Float).SetInt(n.i).Float64()
	return f
}

func (n pyNumber) isZero() bool {
	if n.isFloat {
		return n.f == 0
	}
	return n.i.Sign() == 0
}

// cmp compares two numbers exactly (an int against a float as Python
// does); ok is false when a NaN is involved.
func (n pyNumber) cmp(o pyNumber) (int, bool) {
	if !n.isFloat && !o.isFloat {
		return n.i.Cmp(o.i), true
	}
	a, b := n.float(), o.float()
	if math.IsNaN(a) || math.IsNaN(b) {
		return 0, false
	}
	if !n.isFloat && !math.IsInf(b, 0) {
		return new(big.Float).SetInt(n.i).Cmp(big.NewFloat(b)), true
	}
	if !o.isFloat && !math.IsInf(a, 0) {
		return big.NewFloat(a).Cmp(new(big.Float).SetInt(o.i)), true
	}
	switch {
	case a < b:
		return -1, true
	case a > b:
		return 1, true
	}
	return 0, true
}

// pyTypeName is type(v).__name__.
func pyTypeName(v any) string {
	switch x := unwrap(v).(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case map[string]any:
		if _, isView := v.(*masked); isView {
			return "ShallowMaskDict"
		}
		return "dict"
	case []any:
		if _, isView := v.(*masked); isView {
			return "ShallowMaskList"
		}
		return "list"
	case *object:
		return x.class
	}
	if n, ok := numberOf(v); ok {
		if n.isFloat {
			return "float"
		}
		return "int"
	}
	return fmt.Sprintf("%T", v)
}

// pyStr is str(v).
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *masked, map[string]any, []any:
		return pyRepr(v)
	}
	return pyRepr(v)
}

// pyRepr is repr(v). Dict keys keep the order they have (JSON objects
// decoded in Go have none, so they are sorted for a stable text).
func pyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, false)
	return b.String()
}

func writeRepr(b *strings.Builder, v any, mask bool) {
	on := mask
	if m, ok := v.(*masked); ok {
		on, v = m.on, m.v
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		b.WriteString(pyrepr.Quote(x))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyrepr.Quote(k))
			b.WriteString(": ")
			if on && sensitiveKeys[k] {
				b.WriteString("'***'")
				continue
			}
			writeRepr(b, x[k], on)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, on)
		}
		b.WriteByte(']')
	case *object:
		fmt.Fprintf(b, "%s(uuid=%s)", x.class, pyRepr(x.fields["uuid"]))
	default:
		if n, ok := numberOf(x); ok {
			b.WriteString(n.repr())
			return
		}
		fmt.Fprint(b, x)
	}
}

func (n pyNumber) repr() string {
	if !n.isFloat {
		return n.i.String()
	}
	return pyrepr.Float(n.f)
}

// pyEqual is a == b.
func pyEqual(a, b any) bool {
	a, b = unwrap(a), unwrap(b)
	if na, ok := numberOf(a); ok {
		nb, ok := numberOf(b)
		if !ok {
			return false
		}
		c, ok := na.cmp(nb)
		return ok && c == 0
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, has := y[k]
			if !has || !pyEqual(v, w) {
				return false
			}
		}
		return true
	case *object:
		y, ok := b.(*object)
		return ok && x == y
	}
	return false
}

// pyLess is a < b, or Python's TypeError for types that do not order.
// op names the operator for the message ("<" or ">").
func pyLess(a, b any, op string) (bool, error) {
	ua, ub := unwrap(a), unwrap(b)
	if na, ok := numberOf(ua); ok {
		if nb, ok := numberOf(ub); ok {
			c, ok := na.cmp(nb)
			return ok && c < 0, nil
		}
	}
	switch x := ua.(type) {
	case string:
		if y, ok := ub.(string); ok {
			return x < y, nil // UTF-8 byte order is code point order
		}
	case []any:
		if y, ok := ub.([]any); ok {
			for i := 0; i < len(x) && i < len(y); i++ {
				if !pyEqual(x[i], y[i]) {
					return pyLess(x[i], y[i], op)
				}
			}
			return len(x) < len(y), nil
		}
	}
	l, r := pyTypeName(a), pyTypeName(b)
	if op == ">" {
		l, r = r, l
	}
	return false, typeErr("'%s' not supported between instances of '%s' and '%s'", op, l, r)
}

// pyContains is `needle in haystack`.
func pyContains(haystack, needle any) (bool, error) {
	switch h := unwrap(haystack).(type) {
	case []any:
		for _, e := range h {
			if pyEqual(e, needle) {
				return true, nil
			}
		}
		return false, nil
	case map[string]any:
		switch k := unwrap(needle).(type) {
		case string:
			_, ok := h[k]
			return ok, nil
		case map[string]any, []any:
			return false, typeErr("unhashable type: '%s'", pyTypeName(needle))
		}
		return false, nil
	case string:
		s, ok := unwrap(needle).(string)
		if !ok {
			return false, typeErr("'in <string>' requires string as left operand, not %s", pyTypeName(needle))
		}
		return strings.Contains(h, s), nil
	}
	return false, typeErr("argument of type '%s' is not iterable", pyTypeName(haystack))
}

// pyGetItem is container[key] as str.format's [key] does it: key is a
// string, or an int when it is all digits.
func pyGetItem(container any, key string) (any, error) {
	on := false
	if m, ok := container.(*masked); ok {
		on, container = m.on, m.v
	}
	idx, isInt := -1, false
	if key != "" && strings.Trim(key, "0123456789") == "" {
		if n, err := strconv.Atoi(key); err == nil {
			idx, isInt = n, true
		}
	}
	switch c := container.(type) {
	case map[string]any:
		if isInt {
			// An int key: JSON objects have string keys only.
			return nil, &pyError{"KeyError", key}
		}
		v, ok := c[key]
		if !ok {
			return nil, &pyError{"KeyError", pyrepr.Quote(key)}
		}
		if on && sensitiveKeys[key] {
			return "***", nil
		}
		return wrap(v, on), nil
	case []any:
		if !isInt {
			return nil, typeErr("list indices must be integers or slices, not str")
		}
		if idx >= len(c) {
			return nil, &pyError{"IndexError", "list index out of range"}
		}
		return wrap(c[idx], on), nil
	case string:
		if !isInt {
			return nil, typeErr("string indices must be integers, not 'str'")
		}
		r := []rune(c)
		if idx >= len(r) {
			return nil, &pyError{"IndexError", "string index out of range"}
		}
		return string(r[idx]), nil
	}
	return nil, typeErr("'%s' object is not subscriptable", pyTypeName(container))
}

// pyGetAttr is getattr(v, name) for the node and port objects; everything
// else has no data attributes a rule can use.
func pyGetAttr(v any, name string) (any, error) {
	if o, ok := v.(*object); ok {
		if f, has := o.fields[name]; has {
			return f, nil
		}
	}
	return nil, &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute %s", pyTypeName(v), pyrepr.Quote(name))}
}
