package rootdevice

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"castiron/fault/pyrepr"
	"sync"
)

// Python's str.isspace(): Unicode whitespace plus the ASCII separators
// \x1c-\x1f that Go's unicode.IsSpace leaves out.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

var (
	pyFloatPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[+-]?(?:(?:\d(?:_?\d)*)?\.?\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.(?:[eE][+-]?\d(?:_?\d)*)?|inf|infinity|nan)$`)
	})
	pyIntPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[+-]?\d(?:_?\d)*$`) })
	pyNumLiteral = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[+-]*(?:(?:[1-9](?:_?\d)*|0(?:_?0)*)|(?:\d(?:_?\d)*)?\.\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*[eE][+-]?\d(?:_?\d)*)$`)
	})
)

// pyFloat is Python's float(s) for a string.
func pyFloat(s string) (float64, error) {
	t := strings.ToLower(pyStrip(s))
	if !pyFloatPattern().MatchString(t) {
		return 0, typeErrorf("could not convert string to float: %s", pyrepr.Quote(s))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !isRangeErr(err) {
		return 0, typeErrorf("could not convert string to float: %s", pyrepr.Quote(s))
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
	if !pyIntPattern().MatchString(t) {
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
	if !pyNumLiteral().MatchString(t) {
		return 0, typeErrorf("malformed node or string: %s", pyrepr.Quote(s))
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
		return 0, typeErrorf("malformed node or string: %s", pyrepr.Quote(s))
	}
	if neg {
		f = -f
	}
	return f, nil
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

// pyStr is str(v) for the JSON values a hint can hold. JSON numbers
// arrive as float64; integral ones were ints in the request (Python keeps
// 10 and 10.0 apart, JSON decoding here cannot).
func pyStr(v any) string {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return strconv.FormatInt(int64(x), 10)
		}
	case float32:
		return pyStr(float64(x))
	case fmt.Stringer: // json.Number
		return x.String()
	}
	return pyrepr.Str(v)
}
