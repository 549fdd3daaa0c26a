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

// scalarKind is what one kind of scalar column adds to scalar and
// nullable: how a value is bound and how a driver's value is read.
type scalarKind[V any] interface {
	value(V) driver.Value
	read(src any) (V, error)
}

// scalar is a NOT NULL column of a V. Its one field keeps it
// allocation-free as a codec.
type scalar[V any, K scalarKind[V]] struct{ p *V }

func (c scalar[V, K]) Value() (driver.Value, error) {
	var k K
	return k.value(*c.p), nil
}

func (c scalar[V, K]) Scan(src any) (err error) {
	var k K
	*c.p, err = k.read(src)
	return err
}

// nullable is a nullable column of a V; NULL is a nil pointer.
type nullable[V any, K scalarKind[V]] struct{ p **V }

func (c nullable[V, K]) Value() (driver.Value, error) {
	if *c.p == nil {
		return nil, nil
	}
	var k K
	return k.value(**c.p), nil
}

func (c nullable[V, K]) Scan(src any) error {
	if src == nil {
		*c.p = nil
		return nil
	}
	var k K
	v, err := k.read(src)
	if err != nil {
		return err
	}
	*c.p = &v
	return nil
}

type textKind struct{}

func (textKind) value(s string) driver.Value  { return s }
func (textKind) read(src any) (string, error) { return textOf(src) }

// boolKind is a BOOLEAN (0/1 in SQLite).
type boolKind struct{}

func (boolKind) value(b bool) driver.Value  { return b }
func (boolKind) read(src any) (bool, error) { return boolOf(src) }

type timeKind struct{}

func (timeKind) value(t time.Time) driver.Value  { return formatTime(t) }
func (timeKind) read(src any) (time.Time, error) { return parseTime(src) }

// intKind is an INTEGER (PostgreSQL's may come back as a float).
type intKind struct{}

func (intKind) value(i int64) driver.Value { return i }
func (intKind) read(src any) (int64, error) {
	switch v := src.(type) {
	case int64:
		return v, nil
	case float64:
		return int64(v), nil
	}
	return 0, fmt.Errorf("storage: cannot read %T as an integer", src)
}

type (
	str           = scalar[string, textKind]
	nullStr       = nullable[string, textKind]
	boolean       = scalar[bool, boolKind]
	nullBool      = nullable[bool, boolKind]
	timestamp     = scalar[time.Time, timeKind]
	nullTimestamp = nullable[time.Time, timeKind]
	integer       = scalar[int64, intKind]
	nullInteger   = nullable[int64, intKind]
)

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

// arrayKind is what every JSON array kind shares: "[]" is its empty text,
// and an empty slice is empty.
type arrayKind[E any] struct{}

func (arrayKind[E]) emptyText() driver.Value { return "[]" }
func (arrayKind[E]) empty(l []E) bool        { return len(l) == 0 }

// loadArray decodes the JSON array b (nil: none) with unmarshal, never
// returning a nil slice.
func loadArray[E any](b []byte, unmarshal func([]byte, any) error) ([]E, error) {
	l := []E{}
	if b != nil {
		if err := unmarshal(b, &l); err != nil {
			return nil, err
		}
		if l == nil {
			l = []E{}
		}
	}
	return l, nil
}

// list is a JSON array of strings (traits, drivers).
type list = jsonCol[[]string, listKind]

type listKind struct{ arrayKind[string] }

func (listKind) what() string                    { return "JSON list" }
func (listKind) load(b []byte) ([]string, error) { return loadArray[string](b, json.Unmarshal) }

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
