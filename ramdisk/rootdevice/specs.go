package rootdevice

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"castiron/fault/pyrepr"
)

// This file is a port of oslo.utils' specs_matcher (the grammar Ironic uses
// for root device hint expressions) so that castiron accepts, rejects and
// matches exactly what Ironic does, quirks included.

// unaryOps in the order pyparsing tries them: the first literal that is a
// prefix wins (so "=" is tried after "==", "<" after "<in>" and "<=").
var unaryOps = []string{"==", "=", "!=", "<in>", ">=", "<=", ">", "<", "s==", "s!=", "s<=", "s<", "s>=", "s>"}

const (
	opAllIn   = "<all-in>"
	opOr      = "<or>"
	opRangeIn = "<range-in>"
)

// errParse is pyparsing's ParseException: the expression fits no rule.
var errParse = errors.New("expression cannot be parsed")

// pyparsing's default whitespace, skipped before every token.
func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isKeywordAt(s string, i int) bool {
	rest := s[i:]
	for _, op := range unaryOps {
		if strings.HasPrefix(rest, op) {
			return true
		}
	}
	return strings.HasPrefix(rest, opAllIn) || strings.HasPrefix(rest, opOr) || strings.HasPrefix(rest, opRangeIn)
}

// atom is "anything not a keyword followed by anything but whitespace".
func atom(s string, i int) (string, int, bool) {
	i = skipWS(s, i)
	if i >= len(s) || isKeywordAt(s, i) {
		return "", i, false
	}
	j := i
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if pyIsSpace(r) {
			break
		}
		j += size
	}
	if j == i {
		return "", i, false
	}
	return s[i:j], j, true
}

func literal(s string, i int, lit string) (int, bool) {
	i = skipWS(s, i)
	if strings.HasPrefix(s[i:], lit) {
		return i + len(lit), true
	}
	return i, false
}

// parseSpec is make_grammar().parseString(s): disjunction | nary | range_op
// | unary | atom, matched at the start of s with the rest ignored. The first
// token of a result longer than one is the operator.
func parseSpec(s string) ([]string, error) {
	// disjunction: OneOrMore("<or>" + atom), reported as ["<or>", atoms...].
	{
		toks := []string{opOr}
		i := 0
		for {
			j, ok := literal(s, i, opOr)
			if !ok {
				break
			}
			a, k, ok := atom(s, j)
			if !ok {
				break
			}
			toks = append(toks, a)
			i = k
		}
		if len(toks) > 1 {
			return toks, nil
		}
	}
	// nary: "<all-in>" + OneOrMore(atom).
	if j, ok := literal(s, 0, opAllIn); ok {
		toks := []string{opAllIn}
		for {
			a, k, ok := atom(s, j)
			if !ok {
				break
			}
			toks = append(toks, a)
			j = k
		}
		if len(toks) > 1 {
			return toks, nil
		}
	}
	// range_op: "<range-in>" + four atoms.
	if j, ok := literal(s, 0, opRangeIn); ok {
		toks := []string{opRangeIn}
		for range 4 {
			a, k, ok := atom(s, j)
			if !ok {
				break
			}
			toks = append(toks, a)
			j = k
		}
		if len(toks) == 5 {
			return toks, nil
		}
	}
	// unary: the first operator literal that prefixes the text, then an
	// atom; pyparsing does not try the other operators if the atom fails.
	i := skipWS(s, 0)
	for _, op := range unaryOps {
		if strings.HasPrefix(s[i:], op) {
			if a, _, ok := atom(s, i+len(op)); ok {
				return []string{op, a}, nil
			}
			break
		}
	}
	if a, _, ok := atom(s, 0); ok {
		return []string{a}, nil
	}
	return nil, errParse
}

// value is a Python value a spec is matched against: a string (normalized
// device attribute) or a float (device size in GiB).
type value struct {
	s       string
	f       float64
	isFloat bool
}

func (v value) String() string {
	if v.isFloat {
		return pyrepr.Float(v.f)
	}
	return v.s
}

// typeError mirrors the TypeError/ValueError Python raises while matching;
// Ironic turns those into a failed validation.
type typeError struct{ msg string }

func (e *typeError) Error() string { return e.msg }

func typeErrorf(format string, args ...any) error {
	return &typeError{msg: fmt.Sprintf(format, args...)}
}

// asFloat is Python's float(x).
func asFloat(v value) (float64, error) {
	if v.isFloat {
		return v.f, nil
	}
	return pyFloat(v.s)
}

// specMatch is specs_matcher.match(cmp, spec).
func specMatch(cmp value, spec string) (bool, error) {
	tree, err := parseSpec(spec)
	if err != nil {
		tree = []string{spec}
	}
	if len(tree) == 1 {
		return !cmp.isFloat && tree[0] == cmp.s, nil
	}
	op, args := tree[0], tree[1:]
	switch op {
	case "=", "!=", "<=", "<", "==", ">=", ">":
		x, err := asFloat(cmp)
		if err != nil {
			return false, err
		}
		y, err := pyFloat(args[0])
		if err != nil {
			return false, err
		}
		switch op {
		case "=", ">=": // "=" is ">=" in oslo, for legacy reasons
			return x >= y, nil
		case "!=":
			return x != y, nil
		case "<=":
			return x <= y, nil
		case "<":
			return x < y, nil
		case "==":
			return x == y, nil
		default:
			return x > y, nil
		}
	case "s==", "s!=":
		eq := !cmp.isFloat && cmp.s == args[0]
		return eq == (op == "s=="), nil
	case "s<", "s<=", "s>", "s>=":
		if cmp.isFloat {
			return false, typeErrorf("'%s' not supported between instances of 'float' and 'str'", op[1:])
		}
		c := strings.Compare(cmp.s, args[0])
		switch op {
		case "s<":
			return c < 0, nil
		case "s<=":
			return c <= 0, nil
		case "s>":
			return c > 0, nil
		default:
			return c >= 0, nil
		}
	case opOr:
		if cmp.isFloat {
			return false, nil // a float never equals a string in Python
		}
		for _, a := range args {
			if a == cmp.s {
				return true, nil
			}
		}
		return false, nil
	case "<in>":
		if cmp.isFloat {
			return false, typeErrorf("argument of type 'float' is not iterable")
		}
		return strings.Contains(cmp.s, args[0]), nil
	case opAllIn:
		// oslo evaluates the device value as a Python list literal, which a
		// normalized (URL-quoted) device attribute never is.
		return false, typeErrorf("<all-in> must compare with a list literal string, EG \"['aes', 'mmx']\"")
	case opRangeIn:
		return rangeIn(cmp, args)
	}
	return false, typeErrorf("unknown operator %q", op)
}

// rangeIn is oslo's _range_in: "<range-in> [ 10 20 )" with inclusive "[" "]"
// or exclusive "(" ")" bounds.
func rangeIn(cmp value, y []string) (bool, error) {
	var x float64
	if cmp.isFloat {
		x = cmp.f
	} else {
		f, err := pyLiteralNumber(cmp.s)
		if err != nil {
			return false, err
		}
		x = f
	}
	lo, err := pyFloat(y[1])
	if err != nil {
		return false, err
	}
	hi, err := pyFloat(y[2])
	if err != nil {
		return false, err
	}
	if lo > hi {
		return false, typeErrorf("<range-in> operator's first argument has to be smaller or equal to the second argument EG\"range_in  ( 10 20 ] \"")
	}
	var lower, upper bool
	switch y[0] {
	case "[":
		lower = x >= lo
	case "(":
		lower = x > lo
	default:
		return false, typeErrorf("The first element should be an opening bracket (\"(\" or \"[\")")
	}
	switch y[3] {
	case "]":
		upper = x <= hi
	case ")":
		upper = x < hi
	default:
		return false, typeErrorf("The last element should be a closing bracket (\")\" or \"]\")")
	}
	return lower && upper, nil
}
