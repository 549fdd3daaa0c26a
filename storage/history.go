package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// event is an Event with its row id, which only pagination needs.
type event struct {
	id int64
	Event
}

// eventSQL is the generated SQL of the node_history table.
type eventSQL struct {
	table[event]
	byUUID string
}

func newEventSQL() eventSQL {
	t := newTable("node_history", "id", func(e *event) *int64 { return &e.id }, []column[event]{
		// Events are never updated, so no column needs to be fixed.
		strCol("uuid", func(e *event) *string { return &e.UUID }),
		strCol("node_uuid", func(e *event) *string { return &e.NodeUUID }),
		timeCol("created_at", func(e *event) *time.Time { return &e.CreatedAt }),
		strCol("conductor", func(e *event) *string { return &e.Conductor }),
		strCol("event_type", func(e *event) *string { return &e.EventType }),
		strCol("severity", func(e *event) *string { return &e.Severity }),
		strCol("event", func(e *event) *string { return &e.Event.Event }),
		strCol("user_name", func(e *event) *string { return &e.User }),
		strCol("verb", func(e *event) *string { return &e.Verb }),
		strCol("from_state", func(e *event) *string { return &e.FromState }),
		strCol("to_state", func(e *event) *string { return &e.ToState }),
		strCol("project", func(e *event) *string { return &e.Project }),
		strCol("target_provision_state", func(e *event) *string { return &e.TargetProvisionState }),
		nullIntCol("duration_seconds", func(e *event) **int64 { return &e.DurationSeconds }),
	}).withRecord(record[event]{
		uuid:   func(e *event) *string { return &e.UUID },
		unique: map[string]func(*event) []string{"uuid": one(func(e *event) string { return e.UUID })},
		parent: func(e *event) string { return e.NodeUUID },
	})
	return eventSQL{
		table:  t,
		byUUID: t.selectFrom() + " WHERE uuid = ? AND node_uuid = ?",
	}
}

func historyNotFound(eventUUID string) error {
	return &NotFoundError{Table: "node_history", Key: eventUUID}
}

// insertEvent fills e's UUID and CreatedAt when empty and inserts it through
// r (the writer, or UpdateNode's transaction).
func (s *DB) insertEvent(ctx context.Context, r runner, e *Event) error {
	if e.UUID == "" {
		// Time-ordered (v7), so new rows append to the uuid index instead
		// of landing on a random page of it.
		u, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("storage: event uuid: %w", err)
		}
		e.UUID = u.String()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	e.CreatedAt = normTime(e.CreatedAt)
	e.NodeUUID = uuidKey(e.NodeUUID)
	row := event{Event: *e}
	if err := r.queryRow(ctx, s.hist.insert, s.hist.insertArgs(&row)...).Scan(&row.id); err != nil {
		return s.hist.writeError(err, &row)
	}
	return nil
}

// AddEvent records e in its node's history.
func (s *DB) AddEvent(ctx context.Context, e *Event) error {
	return s.write(ctx, func(r runner) error { return s.insertEvent(ctx, r, e) })
}

// ListEvents lists a node's history, oldest first unless page says
// otherwise. The marker is an event UUID of the same node.
func (s *DB) ListEvents(ctx context.Context, nodeUUID string, page Page) ([]*Event, error) {
	key := uuidKey(nodeUUID)
	f := &filter{}
	f.add("node_uuid = ?", key)
	rows, err := s.hist.paged(ctx, s.reader(), f, page, pageSpec{
		defaultSort: "created_at",
		markerCol:   "uuid",
		scope:       func(f *filter) { f.add("node_uuid = ?", key) },
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		// Only an empty answer pays for telling "no events" from "no node".
		var n int
		if err := s.reader().queryRow(ctx, "SELECT COUNT(*) FROM nodes WHERE uuid = ?", key).Scan(&n); err != nil {
			return nil, fmt.Errorf("storage: list events of node %s: %w", nodeUUID, err)
		}
		if n == 0 {
			return nil, &NotFoundError{Table: "nodes", Key: nodeUUID}
		}
	}
	out := make([]*Event, len(rows))
	for i, r := range rows {
		out[i] = &r.Event
	}
	return out, nil
}

// GetEvent finds one event of a node.
func (s *DB) GetEvent(ctx context.Context, nodeUUID, eventUUID string) (*Event, error) {
	e, err := s.hist.getOne(ctx, s.reader(), historyNotFound(eventUUID), s.hist.byUUID, uuidKey(eventUUID), uuidKey(nodeUUID))
	if err != nil {
		return nil, err
	}
	return &e.Event, nil
}
