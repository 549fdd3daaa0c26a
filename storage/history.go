package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"castiron/engine/fault"
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
		fixedCol("uuid", func(e *event) any { return &e.UUID }),
		fixedCol("node_uuid", func(e *event) any { return &e.NodeUUID }),
		fixedCol("created_at", func(e *event) any { return timeCol{&e.CreatedAt} }),
		fixedCol("conductor", func(e *event) any { return &e.Conductor }),
		fixedCol("event_type", func(e *event) any { return &e.EventType }),
		fixedCol("severity", func(e *event) any { return &e.Severity }),
		fixedCol("event", func(e *event) any { return &e.Event.Event }),
		fixedCol("user_name", func(e *event) any { return &e.User }),
		fixedCol("verb", func(e *event) any { return &e.Verb }),
		fixedCol("from_state", func(e *event) any { return &e.FromState }),
		fixedCol("to_state", func(e *event) any { return &e.ToState }),
	})
	return eventSQL{
		table:  t,
		byUUID: t.selectFrom() + " WHERE uuid = ? AND node_uuid = ?",
	}
}

func historyNotFound(eventUUID string) error {
	return fault.New(fault.NotFound, "Node history record %s could not be found.", eventUUID)
}

// insertEvent fills e's UUID and CreatedAt when empty and inserts it through
// q (the writer, or UpdateNode's transaction).
func (s *SQLite) insertEvent(ctx context.Context, q queryer, e *Event) error {
	if e.UUID == "" {
		e.UUID = uuid.NewString()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	e.CreatedAt = normTime(e.CreatedAt)
	e.NodeUUID = uuidKey(e.NodeUUID)
	row := event{Event: *e}
	if err := q.QueryRowContext(ctx, s.hist.insert, s.hist.insertArgs(&row)...).Scan(&row.id); err != nil {
		if v, ok := violationOf(err); ok {
			switch {
			case v.foreign:
				return fault.NodeNotFound(e.NodeUUID)
			case v.unique == "node_history.uuid":
				return fault.New(fault.Conflict, "A node history record with UUID %s already exists.", e.UUID)
			}
		}
		return fmt.Errorf("storage: add event to node %s: %w", e.NodeUUID, err)
	}
	return nil
}

// AddEvent records e in its node's history.
func (s *SQLite) AddEvent(ctx context.Context, e *Event) error {
	return s.insertEvent(ctx, s.w, e)
}

// ListEvents lists a node's history, oldest first unless page says
// otherwise. The marker is an event UUID of the same node.
func (s *SQLite) ListEvents(ctx context.Context, nodeUUID string, page Page) ([]*Event, error) {
	key := uuidKey(nodeUUID)
	f := &filter{}
	f.add("node_uuid = ?", key)
	rows, err := s.hist.paged(ctx, s.r, f, page, pageSpec{
		defaultSort:    "created_at",
		markerCol:      "uuid",
		markerNotFound: historyNotFound,
		scope:          func(f *filter) { f.add("node_uuid = ?", key) },
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		// Only an empty answer pays for telling "no events" from "no node".
		var n int
		if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM nodes WHERE uuid = ?", key).Scan(&n); err != nil {
			return nil, fmt.Errorf("storage: list events of node %s: %w", nodeUUID, err)
		}
		if n == 0 {
			return nil, fault.NodeNotFound(nodeUUID)
		}
	}
	out := make([]*Event, len(rows))
	for i, r := range rows {
		out[i] = &r.Event
	}
	return out, nil
}

// GetEvent finds one event of a node.
func (s *SQLite) GetEvent(ctx context.Context, nodeUUID, eventUUID string) (*Event, error) {
	e, err := s.hist.getOne(ctx, s.r, historyNotFound(eventUUID), s.hist.byUUID, uuidKey(eventUUID), uuidKey(nodeUUID))
	if err != nil {
		return nil, err
	}
	return &e.Event, nil
}
