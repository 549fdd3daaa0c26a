package storage

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
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
	// named: a row is also found by its name when the ident is no uuid.
	named bool
	// version is the row version (nodes): random at insert, so a row
	// deleted and created again under its uuid does not repeat an old
	// version, and one more with every rewrite. Statements that update
	// rows outside rewrite add one to it themselves.
	version func(*T) *int64
}

// resourceTable is the table of an API resource: stamps names the row's id,
// uuid and times, which the table stores as uuid (first), the columns cols,
// created_at and updated_at (last); the uuid is unique.
func resourceTable[T any](name string, stamps func(*T) (*int64, *string, *time.Time, **time.Time), cols []column[T], r record[T]) table[T] {
	r.uuid = func(v *T) *string { _, u, _, _ := stamps(v); return u }
	r.created = func(v *T) *time.Time { _, _, c, _ := stamps(v); return c }
	r.updated = func(v *T) **time.Time { _, _, _, u := stamps(v); return u }
	if r.unique == nil {
		r.unique = map[string]func(*T) []string{}
	}
	r.unique["uuid"] = func(v *T) []string { return []string{*r.uuid(v)} }
	all := append([]column[T]{fixed(strCol("uuid", r.uuid))}, cols...)
	all = append(all, fixed(timeCol("created_at", r.created)), nullTimeCol("updated_at", r.updated))
	id := func(v *T) *int64 { i, _, _, _ := stamps(v); return i }
	return newTable(name, "id", id, all).withRecord(r)
}

// withRecord returns t with its record set and its lookups by uuid (and by
// name) generated.
func (t table[T]) withRecord(r record[T]) table[T] {
	t.rec = r
	t.byUUID = t.selectFrom() + " WHERE uuid = ?"
	if r.named {
		t.byName = t.selectFrom() + " WHERE name = ?"
	}
	return t
}

// identColumn is where ident is looked up: its canonical uuid, or (for a
// named table) the name when it is no uuid. A non-uuid ident of a table
// without names matches nothing.
func (t *table[T]) identColumn(ident string) (query, col, key string) {
	if u, ok := canonicalUUID(ident); ok {
		return t.byUUID, "uuid", u
	}
	if !t.rec.named {
		return t.byUUID, "uuid", ident
	}
	return t.byName, "name", ident
}

// get finds the row ident (see identColumn); none is a NotFoundError.
func (t *table[T]) get(ctx context.Context, r runner, ident string) (*T, error) {
	query, _, key := t.identColumn(ident)
	return t.getOne(ctx, r, &NotFoundError{Table: t.name, Key: ident}, query, key)
}

// update reads the row ident, applies fn and writes the columns it changed,
// in one write transaction of s. An error from fn is returned unchanged.
func (t *table[T]) update(ctx context.Context, s *DB, ident string, fn func(*T) error) (*T, error) {
	var out *T
	err := s.writeTx(ctx, func(r runner) error {
		v, err := t.get(ctx, r, ident)
		if err != nil {
			return err
		}
		if err := t.rewrite(ctx, r, v, fn); err != nil {
			return err
		}
		out = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// list returns one page of the rows f selects, in creation order unless
// the page sorts otherwise; the marker is a uuid.
func (t *table[T]) list(ctx context.Context, r runner, f *filter, p Page) ([]*T, error) {
	return t.paged(ctx, r, f, p, pageSpec{defaultSort: "id", markerCol: "uuid"})
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
	if t.rec.version != nil {
		*t.rec.version(v) = rand.Int64N(1 << 62) // far from overflow
	}
	t.normalize(v)
	return nil
}

// normalize gives v the shape a later read returns: UTC microsecond times,
// then the table's own normal form.
func (t *table[T]) normalize(v *T) {
	if t.rec.created != nil {
		c := t.rec.created(v)
		*c = normTime(*c)
	}
	if t.rec.updated != nil {
		u := t.rec.updated(v)
		*u = normTimePtr(*u)
	}
	if t.rec.normalize != nil {
		t.rec.normalize(v)
	}
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
	return t.rewriteStored(ctx, r, v, nil, fn)
}

// rewriteStored is rewrite of a row read by getStored, with the stored
// text of its JSON columns: a column whose new encoding is its stored text
// is unchanged without encoding what was read. Encoding every JSON
// document of a node twice per update (before and after fn) was a quarter
// of the group commit's CPU in a 1,000-node storm, on the one goroutine
// every write waits for.
func (t *table[T]) rewriteStored(ctx context.Context, r runner, v *T, stored []driver.Value, fn func(*T) error) error {
	id, u := *t.id(v), t.rowUUID(v)
	created := *t.rec.created(v)
	var version int64
	if t.rec.version != nil {
		version = *t.rec.version(v)
	}
	before, err := t.valuesBut(v, stored)
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
	if t.rec.version != nil {
		*t.rec.version(v) = version + 1
	}
	now := time.Now()
	*t.rec.updated(v) = &now
	t.normalize(v)
	after, err := t.values(v)
	if err != nil {
		return err
	}
	t.settleStored(before, stored)
	if err := t.updateChanged(ctx, r, before, after, id); err != nil {
		return t.writeError(err, v)
	}
	return nil
}

// settleStored fills in before the columns given as stored text: the
// text itself, so a column is written when after encodes it otherwise.
// That is when fn changed it, or when the stored text is not the
// encoder's (written by hand or by SQL): that column is then rewritten
// once in the encoder's form, with the same content. Decoding the stored
// text to compare contents instead cost more than the encoding it saved
// when the changed document is the node's largest (a heartbeat's
// driver_internal_info, BenchmarkUpdateNodeHeartbeat).
func (t *table[T]) settleStored(before, stored []driver.Value) {
	for i, text := range stored {
		if text != nil {
			before[i] = text
		}
	}
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

// remove deletes the row ident (see identColumn); none is a
// NotFoundError.
func (t *table[T]) remove(ctx context.Context, r runner, ident string) error {
	nf := &NotFoundError{Table: t.name, Key: ident}
	_, col, key := t.identColumn(ident)
	err := execOne(ctx, r, nf, "DELETE FROM "+t.name+" WHERE "+col+" = ?", key)
	if err != nil && err != error(nf) {
		return fmt.Errorf("storage: delete %s %s: %w", t.name, ident, err)
	}
	return err
}
