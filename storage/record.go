package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// record is what a resource table adds to its columns: the fields every
// create and update touches, the row's normal form, and what each of its
// constraints means. It is the one place that turns a driver's constraint
// violation into a neutral error for the table.
type record[T any] struct {
	uuid    func(*T) *string
	created func(*T) *time.Time
	updated func(*T) **time.Time
	// normalize gives a row the shape a later read returns (canonical
	// uuids, lower-case MACs, UTC microsecond times, non-nil maps).
	normalize func(*T)
	// unique maps each unique constraint, by its columns as violationOf
	// names them ("name", "type, connector_id"), to the row's values there.
	unique map[string]func(*T) []string
	// parent is the node a row's foreign key names; nil: no foreign key.
	parent func(*T) string
}

// withRecord returns t with its record set.
func (t table[T]) withRecord(r record[T]) table[T] {
	t.rec = r
	return t
}

// rowUUID is v's uuid, or "" for a table without one.
func (t *table[T]) rowUUID(v *T) string {
	if t.rec.uuid == nil {
		return ""
	}
	return *t.rec.uuid(v)
}

// prepare is the one create preparation: an empty uuid is filled (v4), a
// given one canonicalised (a non-uuid refused), an unset creation time is
// now, and the row is normalised so the caller's copy equals what a later
// read returns.
func (t *table[T]) prepare(v *T) error {
	if t.rec.uuid != nil {
		u := t.rec.uuid(v)
		switch c, ok := canonicalUUID(*u); {
		case *u == "":
			*u = uuid.NewString()
		case ok:
			*u = c
		default:
			return &InvalidError{Table: t.name, Column: "uuid", Value: *u}
		}
	}
	if t.rec.created != nil {
		if c := t.rec.created(v); c.IsZero() {
			*c = time.Now()
		}
	}
	if t.rec.normalize != nil {
		t.rec.normalize(v)
	}
	return nil
}

// create prepares v and inserts it through r, filling its id.
func (t *table[T]) create(ctx context.Context, r runner, v *T) error {
	if err := t.prepare(v); err != nil {
		return err
	}
	var err error
	if t.id != nil {
		err = r.queryRow(ctx, t.insert, t.insertArgs(v)...).Scan(t.id(v))
	} else {
		_, err = r.exec(ctx, t.insert, t.insertArgs(v)...)
	}
	if err != nil {
		return t.writeError(err, v)
	}
	return nil
}

// rewrite applies fn to v (as read inside r's write transaction) and writes
// the columns it changed, setting the update time. An error from fn is
// returned unchanged; id, uuid and creation time cannot change.
func (t *table[T]) rewrite(ctx context.Context, r runner, v *T, fn func(*T) error) error {
	id, u := *t.id(v), t.rowUUID(v)
	created := *t.rec.created(v)
	before, err := t.values(v)
	if err != nil {
		return err
	}
	if err := fn(v); err != nil {
		return err
	}
	if *t.id(v) != id || t.rowUUID(v) != u {
		// Other tables reference the uuid.
		return fmt.Errorf("storage: update %s %s: id and uuid cannot change", t.name, u)
	}
	*t.rec.created(v) = created
	now := time.Now()
	*t.rec.updated(v) = &now
	if t.rec.normalize != nil {
		t.rec.normalize(v)
	}
	after, err := t.values(v)
	if err != nil {
		return err
	}
	if err := t.updateChanged(ctx, r, before, after, id); err != nil {
		return t.writeError(err, v)
	}
	return nil
}

// writeError turns a constraint violation writing v into a neutral error.
func (t *table[T]) writeError(err error, v *T) error {
	if vi, ok := violationOf(err); ok {
		switch {
		case vi.foreign && t.rec.parent != nil:
			return &NotFoundError{Table: "nodes", Key: t.rec.parent(v)}
		case vi.unique != "":
			if values, ok := t.rec.unique[vi.unique]; ok {
				return &DuplicateError{Table: t.name, Columns: strings.Split(vi.unique, ", "), Values: values(v), Row: t.rowUUID(v)}
			}
		}
	}
	return fmt.Errorf("storage: write %s %s: %w", t.name, t.rowUUID(v), err)
}

// one returns the values of single-valued columns for a unique map.
func one[T any](f func(*T) string) func(*T) []string {
	return func(v *T) []string { return []string{f(v)} }
}

// deleteOne deletes the row of table whose uuid is ident; none is a
// NotFoundError.
func deleteOne(ctx context.Context, r runner, table, ident string) error {
	nf := &NotFoundError{Table: table, Key: ident}
	err := execOne(ctx, r, nf, "DELETE FROM "+table+" WHERE uuid = ?", uuidKey(ident))
	if err != nil && err != error(nf) {
		return fmt.Errorf("storage: delete %s %s: %w", table, ident, err)
	}
	return err
}
