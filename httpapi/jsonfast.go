package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// appendMarshal writes exactly what json.Marshal(v) writes ("null" when it
// fails). The JSON-shaped values that stored objects hold (string-keyed
// maps, slices, strings, float64 and int numbers, bools, nil) are written
// without reflection: a node's dozen JSON fields through json.Marshal were
// the largest part of rendering it. Any other value, or one json.Marshal
// refuses (NaN), goes through json.Marshal whole, so the bytes never differ
// (jsonfast_test.go compares the two on a corpus).
func appendMarshal(buf *bytes.Buffer, v any) {
	start := buf.Len()
	if appendCompact(buf, v) {
		return
	}
	buf.Truncate(start)
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	buf.Write(b)
}

// appendCompact writes v as json.Marshal does and reports whether it could;
// on false the caller discards what was written.
func appendCompact(buf *bytes.Buffer, v any) bool {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		appendJSONString(buf, t)
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case float64:
		return appendJSONFloat(buf, t)
	case int64:
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), t, 10))
	case int:
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), int64(t), 10))
	case map[string]any:
		return appendCompactMap(buf, t)
	case []any:
		return appendCompactList(buf, t, func(e any) bool { return appendCompact(buf, e) })
	case []string:
		return appendCompactList(buf, t, func(e string) bool { appendJSONString(buf, e); return true })
	default:
		return false
	}
	return true
}

// appendCompactList writes l as json.Marshal does (nil is null), each
// element through each.
func appendCompactList[E any](buf *bytes.Buffer, l []E, each func(E) bool) bool {
	if l == nil {
		buf.WriteString("null")
		return true
	}
	buf.WriteByte('[')
	for i, e := range l {
		if i > 0 {
			buf.WriteByte(',')
		}
		if !each(e) {
			return false
		}
	}
	buf.WriteByte(']')
	return true
}

// appendCompactMap writes m with its keys sorted, as json.Marshal does.
func appendCompactMap(buf *bytes.Buffer, m map[string]any) bool {
	if m == nil {
		buf.WriteString("null")
		return true
	}
	if len(m) == 0 {
		buf.WriteString("{}")
		return true
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		appendJSONString(buf, k)
		buf.WriteByte(':')
		if !appendCompact(buf, m[k]) {
			return false
		}
	}
	buf.WriteByte('}')
	return true
}

// appendJSONFloat is encoding/json's float64 format: shortest digits, 'e'
// notation below 1e-6 and from 1e21 on with a one-digit negative exponent
// ("1e-7", not "1e-07"); NaN and infinities are refused.
func appendJSONFloat(buf *bytes.Buffer, f float64) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf.AvailableBuffer(), f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	buf.Write(b)
	return true
}
