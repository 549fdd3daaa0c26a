package inspectrules

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"castiron/fault/pyrepr"
)

// pyFormat is Python's str.format(**kwargs) with the given keyword
// arguments (no positional ones): "{inventory[cpu][count]}" looks up
// kwargs["inventory"]["cpu"]["count"]. Errors are the exceptions Python
// raises (KeyError, IndexError, AttributeError, TypeError, ValueError).
func pyFormat(format string, kwargs map[string]any) (string, error) {
	return formatDepth(format, kwargs, 2)
}

// formatDepth allows replacement fields nested in a format spec
// ("{x:{width}}") down to depth levels, as Python does (2).
func formatDepth(format string, kwargs map[string]any, depth int) (string, error) {
	if depth < 0 {
		return "", valueErr("Max string recursion exceeded")
	}
	var out strings.Builder
	auto := 0
	for i := 0; i < len(format); {
		c := format[i]
		switch c {
		case '}':
			if i+1 < len(format) && format[i+1] == '}' {
				out.WriteByte('}')
				i += 2
				continue
			}
			return "", valueErr("Single '}' encountered in format string")
		case '{':
			if i+1 < len(format) && format[i+1] == '{' {
				out.WriteByte('{')
				i += 2
				continue
			}
			end, err := fieldEnd(format, i+1)
			if err != nil {
				return "", err
			}
			s, err := formatField(format[i+1:end], kwargs, depth, &auto)
			if err != nil {
				return "", err
			}
			out.WriteString(s)
			i = end + 1
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String(), nil
}

func valueErr(msg string) error { return &pyError{"ValueError", msg} }

// fieldEnd finds the '}' that closes the field starting at start: braces
// nest in the format spec, and brackets in the field name protect ':'
// and '!'.
func fieldEnd(s string, start int) (int, error) {
	depth := 1
	inBracket := false
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '[':
			inBracket = true
		case ']':
			inBracket = false
		case '{':
			if !inBracket {
				depth++
			}
		case '}':
			if inBracket {
				continue
			}
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	if depth > 1 {
		return 0, valueErr("unmatched '{' in format spec")
	}
	return 0, valueErr("expected '}' before end of string")
}

// formatField renders one "name[key].attr!conv:spec" field.
func formatField(field string, kwargs map[string]any, depth int, auto *int) (string, error) {
	name, conv, spec := splitField(field)
	v, err := resolveField(name, kwargs, auto)
	if err != nil {
		return "", err
	}
	if conv != "" {
		switch conv {
		case "!s":
			v = pyStr(v)
		case "!r":
			v = pyRepr(v)
		case "!a":
			v = asciiRepr(pyRepr(v))
		case "!":
			return "", valueErr("end of string while looking for conversion specifier")
		default:
			if utf8.RuneCountInString(conv) > 2 {
				return "", valueErr("expected ':' after conversion specifier")
			}
			return "", valueErr("Unknown conversion specifier " + conv[1:])
		}
	}
	if strings.Contains(spec, "{") {
		if spec, err = formatDepth(spec, kwargs, depth-1); err != nil {
			return "", err
		}
	}
	return formatValue(v, spec)
}

// splitField splits at the first '!' or ':' outside brackets.
func splitField(field string) (name, conv, spec string) {
	inBracket := false
	for i := 0; i < len(field); i++ {
		switch field[i] {
		case '[':
			inBracket = true
		case ']':
			inBracket = false
		case '!':
			if !inBracket {
				rest := field[i:]
				if j := strings.IndexByte(rest, ':'); j >= 0 {
					return field[:i], rest[:j], rest[j+1:]
				}
				return field[:i], rest, ""
			}
		case ':':
			if !inBracket {
				return field[:i], "", field[i+1:]
			}
		}
	}
	return field, "", ""
}

// resolveField looks the field name up: the first part names a keyword
// argument, then .attr and [key] parts walk down.
func resolveField(name string, kwargs map[string]any, auto *int) (any, error) {
	first := name
	rest := ""
	if i := strings.IndexAny(name, ".["); i >= 0 {
		first, rest = name[:i], name[i:]
	}
	var v any
	switch {
	case first == "":
		// Automatic numbering asks for a positional argument; there are none.
		idx := *auto
		*auto++
		return nil, &pyError{"IndexError", fmt.Sprintf("Replacement index %d out of range for positional args tuple", idx)}
	case strings.Trim(first, "0123456789") == "":
		return nil, &pyError{"IndexError", fmt.Sprintf("Replacement index %s out of range for positional args tuple", first)}
	default:
		val, ok := kwargs[first]
		if !ok {
			return nil, &pyError{"KeyError", pyrepr.Quote(first)}
		}
		v = val
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			attr := rest[:end]
			if attr == "" {
				return nil, valueErr("Empty attribute in format string")
			}
			var err error
			if v, err = pyGetAttr(v, attr); err != nil {
				return nil, err
			}
			rest = rest[end:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, valueErr("Missing ']' in format string")
			}
			key := rest[1:end]
			if key == "" {
				return nil, valueErr("Empty attribute in format string")
			}
			var err error
			if v, err = pyGetItem(v, key); err != nil {
				return nil, err
			}
			rest = rest[end+1:]
			if rest != "" && rest[0] != '.' && rest[0] != '[' {
				return nil, valueErr("Only '.' or '[' may follow ']' in format field specifier")
			}
		default:
			return nil, valueErr("Only '.' or '[' may follow ']' in format field specifier")
		}
	}
	return v, nil
}

func asciiRepr(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// spec is a parsed format spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
type spec struct {
	fill      rune
	align     byte
	sign      byte
	alt       bool
	zero      bool
	width     int
	grouping  byte
	precision int // -1: none
	typ       byte
}

func parseSpec(s string) (spec, error) {
	sp := spec{fill: ' ', precision: -1}
	r := []rune(s)
	i := 0
	isAlign := func(c rune) bool { return c == '<' || c == '>' || c == '^' || c == '=' }
	if len(r) >= 2 && isAlign(r[1]) {
		sp.fill, sp.align = r[0], byte(r[1])
		i = 2
	} else if len(r) >= 1 && isAlign(r[0]) {
		sp.align = byte(r[0])
		i = 1
	}
	if i < len(r) && (r[i] == '+' || r[i] == '-' || r[i] == ' ') {
		sp.sign = byte(r[i])
		i++
	}
	if i < len(r) && r[i] == 'z' {
		i++
	}
	if i < len(r) && r[i] == '#' {
		sp.alt = true
		i++
	}
	if i < len(r) && r[i] == '0' {
		sp.zero = true
		if sp.align == 0 {
			sp.fill, sp.align = '0', '='
		}
		i++
	}
	start := i
	for i < len(r) && r[i] >= '0' && r[i] <= '9' {
		i++
	}
	if i > start {
		w, err := strconv.Atoi(string(r[start:i]))
		if err != nil || w > 1<<16 {
			return sp, valueErr("Too many decimal digits in format string")
		}
		sp.width = w
	}
	if i < len(r) && (r[i] == ',' || r[i] == '_') {
		sp.grouping = byte(r[i])
		i++
	}
	if i < len(r) && r[i] == '.' {
		i++
		start = i
		for i < len(r) && r[i] >= '0' && r[i] <= '9' {
			i++
		}
		if i == start {
			return sp, valueErr("Format specifier missing precision")
		}
		p, err := strconv.Atoi(string(r[start:i]))
		if err != nil || p > 1<<16 {
			return sp, valueErr("Too many decimal digits in format string")
		}
		sp.precision = p
	}
	if i < len(r) {
		if i != len(r)-1 || r[i] > 0x7f {
			return sp, valueErr("Invalid format specifier")
		}
		sp.typ = byte(r[i])
	}
	return sp, nil
}

// formatValue is format(v, spec).
func formatValue(v any, specText string) (string, error) {
	if specText == "" {
		return pyStr(v), nil
	}
	sp, err := parseSpec(specText)
	if err != nil {
		return "", err
	}
	switch x := unwrap(v).(type) {
	case string:
		if sp.typ != 0 && sp.typ != 's' {
			return "", valueErr(fmt.Sprintf("Unknown format code '%c' for object of type 'str'", sp.typ))
		}
		if sp.sign != 0 {
			return "", valueErr("Sign not allowed in string format specifier")
		}
		if sp.align == '=' {
			return "", valueErr("'=' alignment not allowed in string format specifier")
		}
		if sp.precision >= 0 {
			if r := []rune(x); len(r) > sp.precision {
				x = string(r[:sp.precision])
			}
		}
		return pad(x, sp, '<'), nil
	case nil, map[string]any, []any, *object:
		return "", typeErr("unsupported format string passed to %s.__format__", pyTypeName(v))
	}
	n, ok := numberOf(unwrap(v))
	if !ok {
		return "", typeErr("unsupported format string passed to %s.__format__", pyTypeName(v))
	}
	if n.isFloat || strings.IndexByte("eEfFgG%", sp.typ) >= 0 {
		return formatFloat(n, sp)
	}
	return formatInt(n.i, sp)
}

// pad fills s to the spec's width; def is the default alignment.
func pad(s string, sp spec, def byte) string {
	n := utf8.RuneCountInString(s)
	if sp.width <= n {
		return s
	}
	fill := strings.Repeat(string(sp.fill), sp.width-n)
	align := sp.align
	if align == 0 {
		align = def
	}
	switch align {
	case '>':
		return fill + s
	case '^':
		left := (sp.width - n) / 2
		return strings.Repeat(string(sp.fill), left) + s + strings.Repeat(string(sp.fill), sp.width-n-left)
	case '=':
		if s != "" && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
			return s[:1] + fill + s[1:]
		}
		return fill + s
	}
	return s + fill
}

func signed(neg bool, digits string, sp spec) string {
	switch {
	case neg:
		return "-" + digits
	case sp.sign == '+':
		return "+" + digits
	case sp.sign == ' ':
		return " " + digits
	}
	return digits
}

func group(digits string, sep byte, every int) string {
	if sep == 0 || len(digits) <= every {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % every
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += every {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+every])
	}
	return b.String()
}

func formatInt(i *big.Int, sp spec) (string, error) {
	if sp.precision >= 0 {
		return "", valueErr("Precision not allowed in integer format specifier")
	}
	neg := i.Sign() < 0
	abs := new(big.Int).Abs(i)
	var digits, prefix string
	switch sp.typ {
	case 0, 'd', 'n':
		digits = group(abs.String(), sp.grouping, 3)
	case 'b':
		digits, prefix = group(abs.Text(2), sp.grouping, 4), "0b"
	case 'o':
		digits, prefix = group(abs.Text(8), sp.grouping, 4), "0o"
	case 'x':
		digits, prefix = group(abs.Text(16), sp.grouping, 4), "0x"
	case 'X':
		digits, prefix = strings.ToUpper(group(abs.Text(16), sp.grouping, 4)), "0X"
	case 'c':
		if !abs.IsInt64() || abs.Int64() > 0x10ffff {
			return "", &pyError{"OverflowError", "%c arg not in range(0x110000)"}
		}
		return pad(string(rune(i.Int64())), sp, '<'), nil
	default:
		return "", valueErr(fmt.Sprintf("Unknown format code '%c' for object of type 'int'", sp.typ))
	}
	if !sp.alt {
		prefix = ""
	}
	return pad(signed(neg, prefix+digits, sp), sp, '>'), nil
}

func formatFloat(n pyNumber, sp spec) (string, error) {
	f := n.float()
	if sp.grouping != 0 && sp.typ == 'n' {
		return "", valueErr("Cannot specify ',' with 'n'.")
	}
	neg := math.Signbit(f) && !math.IsNaN(f)
	a := math.Abs(f)
	prec := sp.precision
	var body string
	switch sp.typ {
	case 'f', 'F', '%':
		if prec < 0 {
			prec = 6
		}
		if sp.typ == '%' {
			a *= 100
		}
		body = strconv.FormatFloat(a, 'f', prec, 64)
		if sp.typ == '%' {
			body += "%"
		}
	case 'e', 'E':
		if prec < 0 {
			prec = 6
		}
		body = floatExp(strconv.FormatFloat(a, 'e', prec, 64))
	case 'g', 'G':
		if prec < 0 {
			prec = 6
		}
		if prec == 0 {
			prec = 1
		}
		body = floatExp(strconv.FormatFloat(a, 'g', prec, 64))
	case 0, 'n':
		if prec < 0 {
			body = pyrepr.Float(a)
		} else {
			if prec == 0 {
				prec = 1
			}
			body = floatExp(strconv.FormatFloat(a, 'g', prec, 64))
			if !strings.ContainsAny(body, ".e") && !math.IsInf(a, 0) && !math.IsNaN(a) {
				body += ".0"
			}
		}
	default:
		return "", valueErr(fmt.Sprintf("Unknown format code '%c' for object of type 'float'", sp.typ))
	}
	switch {
	case math.IsInf(a, 0):
		body = "inf"
	case math.IsNaN(a):
		body = "nan"
	}
	if sp.typ == 'E' || sp.typ == 'G' || sp.typ == 'F' {
		body = strings.ToUpper(body)
	}
	if sp.grouping != 0 {
		intPart, frac, _ := strings.Cut(body, ".")
		if strings.Trim(intPart, "0123456789") == "" {
			body = group(intPart, sp.grouping, 3)
			if frac != "" || strings.Contains(body, ".") {
				body += "." + frac
			}
		}
	}
	return pad(signed(neg, body, sp), sp, '>'), nil
}

// floatExp turns Go's exponent (e+6) into Python's (e+06).
func floatExp(s string) string {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return s
	}
	exp := s[i+2:]
	if len(exp) < 2 {
		exp = "0" + exp
	}
	return s[:i+2] + exp
}
