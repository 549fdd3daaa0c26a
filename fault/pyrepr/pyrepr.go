// Package pyrepr writes decoded JSON values as Python prints them, so that
// castiron's messages quote values the way Ironic's do (its errors format
// them with %r and %s, and jsonschema's messages with repr).
package pyrepr

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Repr is Python's repr() of a decoded JSON value: None, True/False, ints,
// floats as Python shortest-repr writes them, str with Python's quote
// choice and escapes, lists and dicts (keys sorted: JSON objects lose
// their order on the way here). []string and int values print as the
// matching Python list and int.
func Repr(v any) string {
	var b strings.Builder
	write(&b, v)
	return b.String()
}

// Str is Python's str() of a decoded JSON value: a str as it is, anything
// else as its repr.
func Str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return Repr(v)
}

// Truth is Python's truth value of a decoded JSON value: None, False, 0,
// "", [] and {} are false.
func Truth(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	case map[string]any:
		return len(t) > 0
	case []any:
		return len(t) > 0
	case int64:
		return t != 0
	case int:
		return t != 0
	case float64:
		return t != 0
	}
	return true
}

// BoolFromString is oslo's strutils.bool_from_string(strict=True): the
// words it takes for true and false, case and surrounding space aside; ok
// is false for anything else.
func BoolFromString(s string) (b, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, true
	case "0", "f", "false", "off", "n", "no":
		return false, true
	}
	return false, false
}

// Bool is Python's str() of a bool.
func Bool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// Tuple is repr() of a tuple of strings: ('a', 'b'), ('a',) for one.
func Tuple(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = Quote(s)
	}
	if len(q) == 1 {
		return "(" + q[0] + ",)"
	}
	return "(" + strings.Join(q, ", ") + ")"
}

func write(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		b.WriteString(Bool(t))
	case string:
		b.WriteString(Quote(t))
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		b.WriteString(Float(t))
	case []string:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = x
		}
		write(b, l)
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			write(b, x)
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
			b.WriteString(Quote(k))
			b.WriteString(": ")
			write(b, t[k])
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", t)
	}
}

// Float is Python's repr() of a float: the shortest form that reads back,
// with ".0" on integral values and a two-digit exponent from 1e16 and below
// 1e-4.
func Float(f float64) string {
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
	sign, digits := exp[0], strings.TrimLeft(exp[1:], "0")
	if len(digits) < 2 {
		digits = strings.Repeat("0", 2-len(digits)) + digits
	}
	return mant + "e" + string(sign) + digits
}

// Quote is Python's repr() of a str: single quotes unless the string holds
// a single quote and no double one; backslash, the quote, \n, \r, \t and
// other non-printable characters escaped as Python escapes them.
func Quote(s string) string {
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
		case r < 0x100 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x100 && !printable(r):
			if r <= 0xffff {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// printable is Python's str.isprintable() for one character: not in the
// Unicode categories Other (C*) and Separator (Z*) other than the space.
func printable(r rune) bool {
	return r == ' ' || !(unicode.In(r, unicode.C, unicode.Z))
}
