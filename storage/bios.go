package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// BIOSSetting is one cached BIOS setting of a node (Ironic's
// bios_settings row): its value and its registry entry; nil fields are
// unknown (NULL).
type BIOSSetting struct {
	Name            string
	Value           *string
	AttributeType   *string
	AllowableValues []string
	LowerBound      *int64
	UpperBound      *int64
	MinLength       *int64
	MaxLength       *int64
	ReadOnly        *bool
	ResetRequired   *bool
	Unique          *bool
	CreatedAt       time.Time
	UpdatedAt       *time.Time
}

// BIOSStore keeps the BIOS settings cached from nodes' BMCs.
type BIOSStore interface {
	// ListBIOSSettings returns the node's settings by name; none when
	// nothing is cached.
	ListBIOSSettings(ctx context.Context, nodeUUID string) ([]BIOSSetting, error)
	// SetBIOSSettings replaces the node's cached settings with settings
	// (Ironic's sync_node_setting: created, updated, deleted); a setting
	// that is still there keeps its created_at and gets an updated_at
	// when its row changes.
	SetBIOSSettings(ctx context.Context, nodeUUID string, settings []BIOSSetting) error
}

var _ BIOSStore = (*DB)(nil)

const biosColumns = `name, value, attribute_type, allowable_values, lower_bound, upper_bound,
	min_length, max_length, read_only, reset_required, is_unique, created_at, updated_at`

// ListBIOSSettings implements BIOSStore.
func (s *DB) ListBIOSSettings(ctx context.Context, nodeUUID string) ([]BIOSSetting, error) {
	return listBIOS(ctx, s.reader(), nodeUUID)
}

func listBIOS(ctx context.Context, r runner, nodeUUID string) ([]BIOSSetting, error) {
	return queryAll(ctx, r, []BIOSSetting{}, "list bios settings", func(rows *sql.Rows, b *BIOSSetting) error {
		var value, typ, allowed, updated sql.NullString
		var lo, hi, minL, maxL sql.NullInt64
		var ro, rr, uq sql.NullBool
		var created string
		if err := rows.Scan(&b.Name, &value, &typ, &allowed, &lo, &hi, &minL, &maxL, &ro, &rr, &uq, &created, &updated); err != nil {
			return err
		}
		b.Value, b.AttributeType = strOrNil(value), strOrNil(typ)
		if allowed.Valid {
			if err := json.Unmarshal([]byte(allowed.String), &b.AllowableValues); err != nil {
				return fmt.Errorf("allowable_values of %s: %w", b.Name, err)
			}
		}
		b.LowerBound, b.UpperBound, b.MinLength, b.MaxLength = intOrNil(lo), intOrNil(hi), intOrNil(minL), intOrNil(maxL)
		b.ReadOnly, b.ResetRequired, b.Unique = boolOrNil(ro), boolOrNil(rr), boolOrNil(uq)
		t, err := parseTime(created)
		if err != nil {
			return err
		}
		b.CreatedAt = t
		if updated.Valid {
			u, err := parseTime(updated.String)
			if err != nil {
				return err
			}
			b.UpdatedAt = &u
		}
		return nil
	}, `SELECT `+biosColumns+` FROM bios_settings WHERE node_uuid = ? ORDER BY name`, nodeUUID)
}

// SetBIOSSettings implements BIOSStore.
func (s *DB) SetBIOSSettings(ctx context.Context, nodeUUID string, settings []BIOSSetting) error {
	now := formatTime(time.Now())
	return s.write(ctx, func(r runner) error {
		old, err := listBIOS(ctx, r, nodeUUID)
		if err != nil {
			return err
		}
		prev := map[string]BIOSSetting{}
		for _, o := range old {
			prev[o.Name] = o
		}
		keep := map[string]bool{}
		for _, b := range settings {
			keep[b.Name] = true
			var allowed any
			if b.AllowableValues != nil {
				j, err := json.Marshal(b.AllowableValues)
				if err != nil {
					return err
				}
				allowed = string(j)
			}
			args := []any{nilStr(b.Value), nilStr(b.AttributeType), allowed, nilInt(b.LowerBound), nilInt(b.UpperBound),
				nilInt(b.MinLength), nilInt(b.MaxLength), nilBool(b.ReadOnly), nilBool(b.ResetRequired), nilBool(b.Unique)}
			o, had := prev[b.Name]
			switch {
			case !had:
				_, err = r.exec(ctx, `INSERT INTO bios_settings (node_uuid, `+biosColumns+`)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`, append(append([]any{nodeUUID, b.Name}, args...), now)...)
			case !sameBIOSRow(o, b):
				_, err = r.exec(ctx, `UPDATE bios_settings SET value = ?, attribute_type = ?, allowable_values = ?,
					lower_bound = ?, upper_bound = ?, min_length = ?, max_length = ?, read_only = ?, reset_required = ?,
					is_unique = ?, updated_at = ? WHERE node_uuid = ? AND name = ?`, append(args, now, nodeUUID, b.Name)...)
			}
			if err != nil {
				return fmt.Errorf("storage: set bios setting %s: %w", b.Name, err)
			}
		}
		for _, o := range old {
			if !keep[o.Name] {
				if _, err := r.exec(ctx, `DELETE FROM bios_settings WHERE node_uuid = ? AND name = ?`, nodeUUID, o.Name); err != nil {
					return fmt.Errorf("storage: delete bios setting %s: %w", o.Name, err)
				}
			}
		}
		return nil
	})
}

func sameBIOSRow(a, b BIOSSetting) bool {
	a.CreatedAt, a.UpdatedAt, b.CreatedAt, b.UpdatedAt = time.Time{}, nil, time.Time{}, nil
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func strOrNil(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

func intOrNil(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

func boolOrNil(v sql.NullBool) *bool {
	if !v.Valid {
		return nil
	}
	return &v.Bool
}

func nilStr(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func nilInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func nilBool(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}
