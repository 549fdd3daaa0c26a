package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// BootEvent is one step of a machine's network boot (see pxe/boot).
type BootEvent struct {
	ID       int64
	At       time.Time
	MAC      string
	NodeUUID string
	Kind     string
	Detail   string
}

// BootEventQuery selects a timeline: by node, by MAC, or both (OR: a node's
// timeline includes what its MACs did before it was known).
type BootEventQuery struct {
	NodeUUID string
	MACs     []string
	Since    time.Time
	Limit    int // newest Limit events; 0 = 1000
}

// BootEventStore keeps the boot timeline.
type BootEventStore interface {
	AddBootEvents(ctx context.Context, evs []BootEvent) error
	// ListBootEvents returns matching events oldest first.
	ListBootEvents(ctx context.Context, q BootEventQuery) ([]BootEvent, error)
	// PruneBootEvents deletes events older than before.
	PruneBootEvents(ctx context.Context, before time.Time) (int64, error)
	// LatestBootEvents returns each node's newest event since since, one per
	// node, NodeUUID filled in from the ports for events only a MAC names.
	LatestBootEvents(ctx context.Context, since time.Time) ([]BootEvent, error)
}

const insertBootEvent = " INTO boot_events (at, mac, node_uuid, kind, detail) VALUES (?, ?, ?, ?, ?)"

// AddBootEvents implements BootEventStore, in one transaction.
func (s *DB) AddBootEvents(ctx context.Context, evs []BootEvent) error {
	if len(evs) == 0 {
		return nil
	}
	return s.writeTx(ctx, func(r runner) error {
		// A boot storm records thousands of events a second: several rows
		// per statement halve the per-row cost of binding and executing.
		// Chunks of 256, 128, ..., 1 rows keep to nine statements, each
		// prepared once (256 rather than 64: 10 % less CPU per event in
		// BenchmarkAddBootEvents).
		args := make([]any, 0, 5*maxEventRows)
		for len(evs) > 0 {
			n := maxEventRows
			for n > len(evs) {
				n /= 2
			}
			args = args[:0]
			for _, e := range evs[:n] {
				args = append(args, formatTime(e.At), strings.ToLower(e.MAC), uuidKey(e.NodeUUID), e.Kind, e.Detail)
			}
			if _, err := r.exec(ctx, insertBootEvents(r.p.d, n), args...); err != nil {
				return fmt.Errorf("storage: add boot event: %w", err)
			}
			evs = evs[n:]
		}
		return nil
	})
}

// maxEventRows is the most rows one INSERT of boot events carries (a power
// of two; 5 parameters a row, far below SQLite's and PostgreSQL's limits).
const maxEventRows = 256

// insertBootEvents is the INSERT of n rows. On SQLite it is INSERT OR
// IGNORE: a statement that writes several rows and may abort half way
// (ABORT, the default for the NOT NULL columns) first copies every page it
// touches to a statement journal, 12 % of the rows' cost here; with IGNORE
// nothing aborts it, and nothing is ignored either (every value is bound
// non-NULL, the id is the rowid).
func insertBootEvents(d *dialect, n int) string {
	verb := "INSERT OR IGNORE"
	if d.postgres {
		verb = "INSERT"
	}
	return verb + insertBootEvent + strings.Repeat(", (?, ?, ?, ?, ?)", n-1)
}

// ListBootEvents implements BootEventStore.
func (s *DB) ListBootEvents(ctx context.Context, q BootEventQuery) ([]BootEvent, error) {
	var where []string
	var args []any
	if q.NodeUUID != "" {
		where = append(where, "node_uuid = ?")
		args = append(args, uuidKey(q.NodeUUID))
	}
	if len(q.MACs) > 0 {
		marks := strings.TrimSuffix(strings.Repeat("?,", len(q.MACs)), ",")
		where = append(where, "mac IN ("+marks+")")
		for _, m := range q.MACs {
			args = append(args, strings.ToLower(m))
		}
	}
	if len(where) == 0 {
		return nil, fmt.Errorf("storage: boot events need a node or a MAC")
	}
	cond := "(" + strings.Join(where, " OR ") + ")"
	if !q.Since.IsZero() {
		cond += " AND at >= ?"
		args = append(args, formatTime(q.Since))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	args = append(args, limit)
	query := "SELECT id, at, mac, node_uuid, kind, detail FROM (SELECT * FROM boot_events WHERE " + cond +
		" ORDER BY id DESC LIMIT ?) AS recent ORDER BY id"
	return queryAll(ctx, s.reader(), nil, "list boot events", func(rows *sql.Rows, e *BootEvent) error {
		return rows.Scan(&e.ID, timestamp{&e.At}, &e.MAC, &e.NodeUUID, &e.Kind, &e.Detail)
	}, query, args...)
}

// LatestBootEvents implements BootEventStore. One pass over the events since
// since (the newest per node and MAC), then the MAC-only ones are given the
// node of their port: TFTP and early DHCP events name only a MAC.
func (s *DB) LatestBootEvents(ctx context.Context, since time.Time) ([]BootEvent, error) {
	query := "SELECT e.id, e.at, e.mac, COALESCE(NULLIF(e.node_uuid, ''), p.node_uuid, ''), e.kind, e.detail" +
		" FROM boot_events e LEFT JOIN ports p ON p.address = e.mac AND e.mac <> ''" +
		" WHERE e.id IN (SELECT MAX(id) FROM boot_events WHERE id > ? AND at >= ? GROUP BY node_uuid, mac) ORDER BY e.id"
	// There is no index on at; ids grow with time, so the newest row older
	// than since (walked from the newest back: as many rows as are recent)
	// bounds the scan. Events are written in batches, a little out of
	// order between conductors: the bound is taken a minute earlier.
	var floor int64
	err := s.reader().queryRow(ctx, "SELECT id FROM boot_events WHERE at < ? ORDER BY id DESC LIMIT 1",
		formatTime(since.Add(-time.Minute))).Scan(&floor)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("storage: latest boot events: %w", err)
	}
	evs, err := queryAll(ctx, s.reader(), nil, "latest boot events", func(rows *sql.Rows, e *BootEvent) error {
		return rows.Scan(&e.ID, timestamp{&e.At}, &e.MAC, &e.NodeUUID, &e.Kind, &e.Detail)
	}, query, floor, formatTime(since))
	if err != nil {
		return nil, err
	}
	// Oldest first: the last one seen for a node is its newest.
	at := map[string]int{}
	out := evs[:0]
	for _, e := range evs {
		if e.NodeUUID == "" {
			continue
		}
		if i, ok := at[e.NodeUUID]; ok {
			out[i] = e
			continue
		}
		at[e.NodeUUID] = len(out)
		out = append(out, e)
	}
	return out, nil
}

// PruneBootEvents implements BootEventStore.
func (s *DB) PruneBootEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(r runner) error {
		res, err := r.exec(ctx, "DELETE FROM boot_events WHERE at < ?", formatTime(before))
		if err != nil {
			return fmt.Errorf("storage: prune boot events: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}
