package storage

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Column codecs. Each wraps a pointer to a struct field and is both a
// sql.Scanner and a driver.Valuer, so one column list can drive INSERT,
// UPDATE and SELECT. Plain fields need no codec: database/sql binds *T by
// dereferencing it (nil pointer = NULL) and scans NULL into **T as nil.

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

// timeCol is a NOT NULL timestamp.
type timeCol struct{ p *time.Time }

func (c timeCol) Value() (driver.Value, error) { return formatTime(*c.p), nil }

func (c timeCol) Scan(src any) error {
	t, err := parseTime(src)
	if err != nil {
		return err
	}
	*c.p = t
	return nil
}

// nullTimeCol is a nullable timestamp.
type nullTimeCol struct{ p **time.Time }

func (c nullTimeCol) Value() (driver.Value, error) {
	if *c.p == nil {
		return nil, nil
	}
	return formatTime(**c.p), nil
}

func (c nullTimeCol) Scan(src any) error {
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

// objectCol is a JSON object column; nil is stored as {} and loads as an
// empty map, so callers never see a nil map.
type objectCol struct{ p *JSONObject }

func (c objectCol) Value() (driver.Value, error) {
	if len(*c.p) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(*c.p)
	if err != nil {
		return nil, fmt.Errorf("storage: encode JSON: %w", err)
	}
	return string(b), nil
}

func (c objectCol) Scan(src any) error {
	b, err := textBytes(src)
	if err != nil {
		return err
	}
	m := JSONObject{}
	// Most of these columns are empty: skip the decoder for them.
	if len(b) > 2 && string(b) != "null" {
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("storage: decode JSON object: %w", err)
		}
		if m == nil {
			m = JSONObject{}
		}
	}
	*c.p = m
	return nil
}

// listCol is a JSON array of strings (traits, drivers); never nil once loaded.
type listCol struct{ p *[]string }

func (c listCol) Value() (driver.Value, error) {
	if len(*c.p) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(*c.p)
	if err != nil {
		return nil, fmt.Errorf("storage: encode JSON: %w", err)
	}
	return string(b), nil
}

func (c listCol) Scan(src any) error {
	b, err := textBytes(src)
	if err != nil {
		return err
	}
	l := []string{}
	if len(b) > 2 && string(b) != "null" {
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("storage: decode JSON list: %w", err)
		}
		if l == nil {
			l = []string{}
		}
	}
	*c.p = l
	return nil
}

func textBytes(src any) ([]byte, error) {
	switch v := src.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	}
	return nil, fmt.Errorf("storage: cannot read %T as JSON text", src)
}
