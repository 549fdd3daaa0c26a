package main

import (
	"encoding/json"
	"sync/atomic"
)

// The list and get loops check every response without decoding all of it:
// on the shared 2-core machine the client's encoding/json decode of a page
// of 100 nodes cost more CPU than castiron's answer, which capped the
// server's figure at the client's speed. A structural walk of the top-level
// object (strings, nesting and separators checked) finds the "nodes" count
// or the "uuid"; one response in fullCheckEvery is also decoded whole with
// encoding/json, as every response was before.

// fullCheckEvery is how often a response is also decoded by encoding/json.
const fullCheckEvery = 16

var checked atomic.Uint64

// fullCheck reports whether this response is one to decode whole.
func fullCheck() bool { return checked.Add(1)%fullCheckEvery == 0 }

// topMembers calls fn with each member of the JSON object b (its raw key
// without quotes, and the raw value) and reports whether b is one
// well-formed object at the structural level.
func topMembers(b []byte, fn func(key, value []byte)) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for i < len(b) {
		ks := i
		ke, ok := skipString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		vs := skipSpace(b, i+1)
		ve, ok := skipValue(b, vs)
		if !ok {
			return false
		}
		fn(b[ks+1:ke-1], b[vs:ve])
		i = skipSpace(b, ve)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
	return false
}

// arrayLen is the number of elements of the raw JSON array b, or -1 when b
// is not one.
func arrayLen(b []byte) int {
	if len(b) == 0 || b[0] != '[' {
		return -1
	}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return 0
	}
	n := 0
	for i < len(b) {
		e, ok := skipValue(b, i)
		if !ok {
			return -1
		}
		n++
		i = skipSpace(b, e)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return n
		default:
			return -1
		}
	}
	return -1
}

// stringValue is the raw JSON string b decoded ("" and false if it is not
// a string).
func stringValue(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	for _, c := range b[1 : len(b)-1] {
		if c == '\\' {
			var s string
			err := json.Unmarshal(b, &s)
			return s, err == nil
		}
	}
	return string(b[1 : len(b)-1]), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i].
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			i++
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		}
	}
	return i, false
}

// skipValue returns the index after the value starting at b[i]: a string,
// an object or array (nesting and strings inside followed), or a literal.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		var stack []byte
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				e, ok := skipString(b, i)
				if !ok {
					return e, false
				}
				i = e
				continue
			case '{', '[':
				stack = append(stack, c)
			case '}', ']':
				if len(stack) == 0 || (c == '}') != (stack[len(stack)-1] == '{') {
					return i, false
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	}
	s := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\n' && b[i] != '\r' && b[i] != '\t' {
		i++
	}
	return i, i > s
}

// pageNodes is the number of elements of the top-level "nodes" array of a
// node list, or -1 when b is no such list.
func pageNodes(b []byte) int {
	n := -1
	if !topMembers(b, func(k, v []byte) {
		if string(k) == "nodes" {
			n = arrayLen(v)
		}
	}) {
		return -1
	}
	return n
}

// topUUID is the top-level "uuid" string of the object b ("" when none).
func topUUID(b []byte) string {
	u := ""
	if !topMembers(b, func(k, v []byte) {
		if string(k) == "uuid" {
			u, _ = stringValue(v)
		}
	}) {
		return ""
	}
	return u
}
