package storage

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Column codecs. Each wraps a pointer to a struct field and is both the scan
// destination and the bind argument of its column, so one column list drives
// INSERT, UPDATE and SELECT. Having our own for plain strings and bools too
// keeps database/sql off its reflection path for **string and friends, and
// gives UpdateNode comparable values to find the columns that changed.
type codec interface {
	sql.Scanner
	driver.Valuer
}

// timeLayout is fixed-width so that text order is time order (sorting and
// keyset pagination compare the stored strings) and keeps microseconds,
// which Ironic shows.
const timeLayout = "2006-01-02 15:04:05.000000"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// normTime is what a time becomes after a round trip through the database.
func normTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func normTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := normTime(*t)
	return &v
}

func parseTime(src any) (time.Time, error) {
	switch v := src.(type) {
	case string:
		return time.ParseInLocation(timeLayout, v, time.UTC)
	case []byte:
		return time.ParseInLocation(timeLayout, string(v), time.UTC)
	case time.Time: // in case a driver decodes it itself
		return normTime(v), nil
	}
	return time.Time{}, fmt.Errorf("storage: cannot read %T as a time", src)
}

func textOf(src any) (string, error) {
	switch v := src.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	}
	return "", fmt.Errorf("storage: cannot read %T as text", src)
}

func boolOf(src any) (bool, error) {
	switch v := src.(type) {
	case int64:
		return v != 0, nil
	case bool:
		return v, nil
	}
	return false, fmt.Errorf("storage: cannot read %T as a boolean", src)
}

// str is a NOT NULL text column.
type str struct{ p *string }

func (c str) Value() (driver.Value, error) { return *c.p, nil }

func (c str) Scan(src any) (err error) {
	*c.p, err = textOf(src)
	return err
}

// nullStr is a nullable text column.
type nullStr struct{ p **string }

func (c nullStr) Value() (driver.Value, error) {
	if *c.p == nil {
		return nil, nil
	}
	return **c.p, nil
}

func (c nullStr) Scan(src any) error {
	if src == nil {
		*c.p = nil
		return nil
	}
	s, err := textOf(src)
	if err != nil {
		return err
	}
	*c.p = &s
	return nil
}

// boolean is a NOT NULL BOOLEAN (0/1 in SQLite).
type boolean struct{ p *bool }

func (c boolean) Value() (driver.Value, error) { return *c.p, nil }

func (c boolean) Scan(src any) (err error) {
	*c.p, err = boolOf(src)
	return err
}

// nullBool is a nullable BOOLEAN.
type nullBool struct{ p **bool }

func (c nullBool) Value() (driver.Value, error) {
	if *c.p == nil {
		return nil, nil
	}
	return **c.p, nil
}

func (c nullBool) Scan(src any) error {
	if src == nil {
		*c.p = nil
		return nil
	}
	b, err := boolOf(src)
	if err != nil {
		return err
	}
	*c.p = &b
	return nil
}

// integer is a NOT NULL integer.
type integer struct{ p *int64 }

func (c integer) Value() (driver.Value, error) { return *c.p, nil }

func (c integer) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("storage: cannot read %T as an integer", src)
	}
	*c.p = v
	return nil
}

// timestamp is a NOT NULL time.
type timestamp struct{ p *time.Time }

func (c timestamp) Value() (driver.Value, error) { return formatTime(*c.p), nil }

func (c timestamp) Scan(src any) (err error) {
	*c.p, err = parseTime(src)
	return err
}

// nullTimestamp is a nullable time.
type nullTimestamp struct{ p **time.Time }

func (c nullTimestamp) Value() (driver.Value, error) {
	if *c.p == nil {
		return nil, nil
	}
	return formatTime(**c.p), nil
}

func (c nullTimestamp) Scan(src any) error {
	if src == nil {
		*c.p = nil
		return nil
	}
	t, err := parseTime(src)
	if err != nil {
		return err
	}
	*c.p = &t
	return nil
}

// jsonKind is what one kind of JSON column adds to jsonCol: its name in
// errors, the text of its empty value, and how a document loads (b nil: an
// empty one).
type jsonKind[V any] interface {
	what() string
	emptyText() driver.Value
	empty(V) bool
	load(b []byte) (V, error)
}

// jsonCol is a JSON column of a V: an empty V is stored as its empty text
// and NULL or an empty document loads as an empty V, so callers never see
// nil. encoding/json sorts map keys, so an unchanged value encodes to the
// same text. Its one field keeps it allocation-free as a codec.
type jsonCol[V any, K jsonKind[V]] struct{ p *V }

func (c jsonCol[V, K]) Value() (driver.Value, error) {
	var k K
	if k.empty(*c.p) {
		return k.emptyText(), nil
	}
	b, err := json.Marshal(*c.p)
	if err != nil {
		return nil, fmt.Errorf("storage: encode %s: %w", k.what(), err)
	}
	return string(b), nil
}

func (c jsonCol[V, K]) Scan(src any) error {
	var k K
	// Most of these columns are empty: skip the decoder for them.
	b, err := jsonText(src)
	if err != nil {
		return err
	}
	v, err := k.load(b)
	if err != nil {
		return fmt.Errorf("storage: decode %s: %w", k.what(), err)
	}
	*c.p = v
	return nil
}

// object is a JSON object column.
type object = jsonCol[JSONObject, objectKind]

type objectKind struct{}

func (objectKind) what() string            { return "JSON object" }
func (objectKind) emptyText() driver.Value { return "{}" }
func (objectKind) empty(m JSONObject) bool { return len(m) == 0 }
func (objectKind) load(b []byte) (JSONObject, error) {
	m := JSONObject{}
	if b != nil {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		if m == nil {
			m = JSONObject{}
		}
	}
	return m, nil
}

// list is a JSON array of strings (traits, drivers).
type list = jsonCol[[]string, listKind]

type listKind struct{}

func (listKind) what() string            { return "JSON list" }
func (listKind) emptyText() driver.Value { return "[]" }
func (listKind) empty(l []string) bool   { return len(l) == 0 }
func (listKind) load(b []byte) ([]string, error) {
	l := []string{}
	if b != nil {
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, err
		}
		if l == nil {
			l = []string{}
		}
	}
	return l, nil
}

// orEmpty gives each nil object an empty map, as a read of it would.
func orEmpty(objs ...*JSONObject) {
	for _, m := range objs {
		if *m == nil {
			*m = JSONObject{}
		}
	}
}

// jsonText returns the JSON document in src, or nil when it is empty
// (NULL, "", {}, [], null) and needs no decoding.
func jsonText(src any) ([]byte, error) {
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil, nil
	case string:
		if len(v) <= 2 || v == "null" {
			return nil, nil
		}
		b = []byte(v)
	case []byte:
		b = v
	default:
		return nil, fmt.Errorf("storage: cannot read %T as JSON text", src)
	}
	if len(b) <= 2 || bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	return b, nil
}

// sameValue compares two values produced by codecs.
func sameValue(a, b driver.Value) bool {
	if x, ok := a.([]byte); ok {
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	if _, ok := b.([]byte); ok {
		return false
	}
	return a == b
}
