package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// FirmwareComponent is one row of a node's firmware_information (Ironic's
// FirmwareComponent): nil pointers read null.
type FirmwareComponent struct {
	NodeUUID           string
	Component          string
	InitialVersion     string
	CurrentVersion     *string
	LastVersionFlashed *string
	Vendor             *string
	Model              *string
	SerialNumber       *string
	CreatedAt          time.Time
	UpdatedAt          *time.Time
}

// FirmwareReading is what a firmware interface read from the BMC for one
// component.
type FirmwareReading struct {
	Component                   string
	CurrentVersion              string
	Vendor, Model, SerialNumber string
}

// FirmwareStore keeps nodes' firmware components; they go with their node.
type FirmwareStore interface {
	// ListFirmwareComponents lists a node's components by name; an unknown
	// node is NodeNotFound.
	ListFirmwareComponents(ctx context.Context, nodeUUID string) ([]*FirmwareComponent, error)
	// SyncFirmwareComponents records readings as Ironic's
	// cache_firmware_components does: a new component is created with
	// initial_version = current_version; a known one whose version changed
	// gets last_version_flashed and current_version = the new version;
	// vendor, model and serial_number follow the reading. Components not
	// read are kept.
	SyncFirmwareComponents(ctx context.Context, nodeUUID string, readings []FirmwareReading) error
}

const firmwareColumns = "node_uuid, component, initial_version, current_version, last_version_flashed, vendor, model, serial_number, created_at, updated_at"

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func strPtr(ns sql.NullString) *string {
	if !ns.Valid {
		return nil
	}
	return &ns.String
}

// ListFirmwareComponents implements FirmwareStore.
func (s *DB) ListFirmwareComponents(ctx context.Context, nodeUUID string) ([]*FirmwareComponent, error) {
	key := uuidKey(nodeUUID)
	var n int
	if err := s.reader().queryRow(ctx, "SELECT COUNT(*) FROM nodes WHERE uuid = ?", key).Scan(&n); err != nil {
		return nil, fmt.Errorf("storage: list firmware of node %s: %w", nodeUUID, err)
	}
	if n == 0 {
		return nil, &NotFoundError{Table: "nodes", Key: nodeUUID}
	}
	rows, err := s.reader().query(ctx, "SELECT "+firmwareColumns+" FROM firmware_information WHERE node_uuid = ? ORDER BY component", key)
	if err != nil {
		return nil, fmt.Errorf("storage: list firmware of node %s: %w", nodeUUID, err)
	}
	defer rows.Close()
	var out []*FirmwareComponent
	for rows.Next() {
		var c FirmwareComponent
		var cur, last, vendor, model, serial, updated sql.NullString
		var created string
		if err := rows.Scan(&c.NodeUUID, &c.Component, &c.InitialVersion, &cur, &last, &vendor, &model, &serial, &created, &updated); err != nil {
			return nil, fmt.Errorf("storage: read firmware of node %s: %w", nodeUUID, err)
		}
		c.CurrentVersion, c.LastVersionFlashed = strPtr(cur), strPtr(last)
		c.Vendor, c.Model, c.SerialNumber = strPtr(vendor), strPtr(model), strPtr(serial)
		if c.CreatedAt, err = parseTime(created); err != nil {
			return nil, err
		}
		if updated.Valid {
			t, err := parseTime(updated.String)
			if err != nil {
				return nil, err
			}
			c.UpdatedAt = &t
		}
		out = append(out, &c)
	}
	return out, rows.Err()
}

// SyncFirmwareComponents implements FirmwareStore, in one transaction.
func (s *DB) SyncFirmwareComponents(ctx context.Context, nodeUUID string, readings []FirmwareReading) error {
	key := uuidKey(nodeUUID)
	now := formatTime(time.Now())
	return s.writeTx(ctx, func(r runner) error {
		var n int
		if err := r.queryRow(ctx, "SELECT COUNT(*) FROM nodes WHERE uuid = ?", key).Scan(&n); err != nil {
			return fmt.Errorf("storage: sync firmware of node %s: %w", nodeUUID, err)
		}
		if n == 0 {
			return &NotFoundError{Table: "nodes", Key: nodeUUID}
		}
		for _, rd := range readings {
			var cur sql.NullString
			err := r.queryRow(ctx, "SELECT current_version FROM firmware_information WHERE node_uuid = ? AND component = ?", key, rd.Component).Scan(&cur)
			switch {
			case err == sql.ErrNoRows:
				if _, err := r.exec(ctx, "INSERT INTO firmware_information ("+firmwareColumns+") VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, NULL)",
					key, rd.Component, rd.CurrentVersion, nullText(rd.CurrentVersion), nullText(rd.Vendor), nullText(rd.Model), nullText(rd.SerialNumber), now); err != nil {
					return fmt.Errorf("storage: add firmware component %s of node %s: %w", rd.Component, nodeUUID, err)
				}
			case err != nil:
				return fmt.Errorf("storage: read firmware component %s of node %s: %w", rd.Component, nodeUUID, err)
			case cur.String != rd.CurrentVersion || !cur.Valid:
				if _, err := r.exec(ctx, "UPDATE firmware_information SET last_version_flashed = ?, current_version = ?, vendor = ?, model = ?, serial_number = ?, updated_at = ? WHERE node_uuid = ? AND component = ?",
					nullText(rd.CurrentVersion), nullText(rd.CurrentVersion), nullText(rd.Vendor), nullText(rd.Model), nullText(rd.SerialNumber), now, key, rd.Component); err != nil {
					return fmt.Errorf("storage: update firmware component %s of node %s: %w", rd.Component, nodeUUID, err)
				}
			default:
				if _, err := r.exec(ctx, "UPDATE firmware_information SET vendor = ?, model = ?, serial_number = ?, updated_at = ? WHERE node_uuid = ? AND component = ?",
					nullText(rd.Vendor), nullText(rd.Model), nullText(rd.SerialNumber), now, key, rd.Component); err != nil {
					return fmt.Errorf("storage: update firmware component %s of node %s: %w", rd.Component, nodeUUID, err)
				}
			}
		}
		return nil
	})
}
