package rootdevice

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Python's str.isspace(): Unicode whitespace plus the ASCII separators
// \x1c-\x1f that Go's unicode.IsSpace leaves out.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

var (
	pyFloatPattern = regexp.MustCompile(`^[+-]?(?:(?:\d(?:_?\d)*)?\.?\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.(?:[eE][+-]?\d(?:_?\d)*)?|inf|infinity|nan)$`)
	pyIntPattern   = regexp.MustCompile(`^[+-]?\d(?:_?\d)*$`)
	pyNumLiteral   = regexp.MustCompile(`^[+-]*(?:(?:[1-9](?:_?\d)*|0(?:_?0)*)|(?:\d(?:_?\d)*)?\.\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*[eE][+-]?\d(?:_?\d)*)$`)
)

// pyFloat is Python's float(s) for a string.
func pyFloat(s string) (float64, error) {
	t := strings.ToLower(pyStrip(s))
	if !pyFloatPattern.MatchString(t) {
		return 0, typeErrorf("could not convert string to float: %s", pyQuoteRepr(s))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !isRangeErr(err) {
		return 0, typeErrorf("could not convert string to float: %s", pyQuoteRepr(s))
	}
	return f, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// pyInt is Python's int(s) in base 10.
func pyInt(s string) (int64, bool) {
	t := pyStrip(s)
	if !pyIntPattern.MatchString(t) {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil {
		if isRangeErr(err) { // Python ints are unbounded; only the sign matters here
			if strings.HasPrefix(t, "-") {
				return math.MinInt64, true
			}
			return math.MaxInt64, true
		}
		return 0, false
	}
	return n, true
}

// pyLiteralNumber is ast.literal_eval(s) where the result must be a number.
func pyLiteralNumber(s string) (float64, error) {
	t := strings.TrimLeft(s, " \t")
	if !pyNumLiteral.MatchString(t) {
		return 0, typeErrorf("malformed node or string: %s", pyQuoteRepr(s))
	}
	neg := false
	i := 0
	for i < len(t) && (t[i] == '+' || t[i] == '-') {
		if t[i] == '-' {
			neg = !neg
		}
		i++
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t[i:], "_", ""), 64)
	if err != nil && !isRangeErr(err) {
		return 0, typeErrorf("malformed node or string: %s", pyQuoteRepr(s))
	}
	if neg {
		f = -f
	}
	return f, nil
}

// pyFloatRepr is repr(float).
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	a := math.Abs(f)
	if a == 0 || (a >= 1e-4 && a < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}

// pyQuote is urllib.parse.quote(s) (safe="/").
func pyQuote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-', c == '~', c == '/':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// pyStr is str(v) for the JSON values a hint can hold.
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		// JSON numbers arrive as float64; integral ones were ints in the
		// request (Python keeps 10 and 10.0 apart, JSON decoding here cannot).
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return strconv.FormatInt(int64(x), 10)
		}
		return pyFloatRepr(x)
	case float32:
		return pyStr(float64(x))
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case fmt.Stringer: // json.Number
		return x.String()
	case map[string]any:
		return pyReprMap(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// pyRepr is repr(v).
func pyRepr(v any) string {
	if s, ok := v.(string); ok {
		return pyQuoteRepr(s)
	}
	return pyStr(v)
}

func pyQuoteRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`, q, `\`+q)
	return q + r.Replace(s) + q
}

// pyReprMap is repr(dict) with the keys sorted (JSON objects lose their
// order on the way here).
func pyReprMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = pyQuoteRepr(k) + ": " + pyRepr(m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
