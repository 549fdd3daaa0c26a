package driver

import (
	"fmt"
	"math"
	"strconv"

	"castiron/fault/pyrepr"
)

// Helpers for reading driver_info values the way Ironic (Python) reads them;
// JSON numbers arrive as float64.

// IsEmpty is Python's "not value" for what JSON can hold.
func IsEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case int:
		return v == 0
	}
	return false
}

// ScalarString renders a JSON scalar the way Python's str() would for the
// values operators actually send ("2.0", 2.0, "secret", 1234).
func ScalarString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(v)
}

// ParseBool is oslo's strutils.bool_from_string with strict=True for a JSON
// value: a boolean, 0/1, or one of oslo's words. ok is false for anything
// else.
func ParseBool(v any) (value, ok bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case float64:
		if v == 0 || v == 1 {
			return v == 1, true
		}
	case int:
		if v == 0 || v == 1 {
			return v == 1, true
		}
	case string:
		return pyrepr.BoolFromString(v)
	}
	return false, false
}
