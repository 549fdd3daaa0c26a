package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
)

// column maps one table column to a field of T through a codec, which
// serves as bind argument and as scan destination, so each table has exactly
// one column list.
type column[T any] struct {
	name string
	ref  func(*T) codec
	// fixed columns are written by INSERT only (identity, creation time).
	fixed bool
	// unsortable columns (JSON documents) are refused as Page.SortKey, as
	// Ironic refuses them.
	unsortable bool
	// nullable columns may hold NULL (their codec writes one); the others
	// never do, so an ORDER BY on them needs no NULLS FIRST/LAST, which
	// would keep PostgreSQL from reading them in an index's order.
	nullable bool
}

func strCol[T any](name string, f func(*T) *string) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return str{f(v)} }}
}

func nullStrCol[T any](name string, f func(*T) **string) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return nullStr{f(v)} }, nullable: true}
}

func boolCol[T any](name string, f func(*T) *bool) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return boolean{f(v)} }}
}

func nullBoolCol[T any](name string, f func(*T) **bool) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return nullBool{f(v)} }, nullable: true}
}

func intCol[T any](name string, f func(*T) *int64) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return integer{f(v)} }}
}

func nullIntCol[T any](name string, f func(*T) **int64) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return nullInteger{f(v)} }, nullable: true}
}

func timeCol[T any](name string, f func(*T) *time.Time) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return timestamp{f(v)} }}
}

func nullTimeCol[T any](name string, f func(*T) **time.Time) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return nullTimestamp{f(v)} }, nullable: true}
}

func objectCol[T any](name string, f func(*T) *JSONObject) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return object{f(v)} }, unsortable: true}
}

func listCol[T any](name string, f func(*T) *[]string) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return list{f(v)} }, unsortable: true}
}

// fixed marks c as written by INSERT only.
func fixed[T any](c column[T]) column[T] {
	c.fixed = true
	return c
}

// table is the SQL of one table, generated once from its column list.
type table[T any] struct {
	name string
	// id is the integer primary key (creation order), nil when the table
	// has none (conductors). It is not in cols: the database assigns it.
	id   func(*T) *int64
	cols []column[T]
	// tie is the unique column that ends every ORDER BY, so pages are
	// stable: "id", or the natural key when there is no id.
	tie string

	selectList string // "id, uuid, ..." in scan order
	insert     string // INSERT ... [RETURNING id]
	sortable   map[string]bool
	nullable   map[string]bool // columns that may hold NULL
	byUUID     string          // SELECT ... WHERE uuid = ? (tables with a record)
	byName     string          // SELECT ... WHERE name = ? (named records)

	rec record[T]
}

func newTable[T any](name, tie string, id func(*T) *int64, cols []column[T]) table[T] {
	t := table[T]{name: name, id: id, cols: cols, tie: tie, sortable: map[string]bool{}, nullable: map[string]bool{}}
	var sel, ins, marks []string
	if id != nil {
		sel = append(sel, "id")
		t.sortable["id"] = true
	}
	for _, c := range cols {
		sel = append(sel, c.name)
		ins = append(ins, c.name)
		marks = append(marks, "?")
		if !c.unsortable {
			t.sortable[c.name] = true
		}
		if c.nullable {
			t.nullable[c.name] = true
		}
	}
	t.selectList = strings.Join(sel, ", ")
	t.insert = "INSERT INTO " + name + " (" + strings.Join(ins, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
	if id != nil {
		// RETURNING exists in SQLite >= 3.35 and PostgreSQL alike.
		t.insert += " RETURNING id"
	}
	return t
}

// selectFrom is "SELECT <all columns> FROM <table>".
func (t *table[T]) selectFrom() string {
	return "SELECT " + t.selectList + " FROM " + t.name
}

func (t *table[T]) scanDest(v *T) []any {
	dest := make([]any, 0, len(t.cols)+1)
	if t.id != nil {
		dest = append(dest, t.id(v))
	}
	for _, c := range t.cols {
		dest = append(dest, c.ref(v))
	}
	return dest
}

func (t *table[T]) insertArgs(v *T) []any {
	args := make([]any, len(t.cols))
	for i, c := range t.cols {
		args[i] = c.ref(v)
	}
	return args
}

// values encodes the columns UPDATE may write, in column order.
func (t *table[T]) values(v *T) ([]driver.Value, error) {
	return t.valuesBut(v, nil)
}

// valuesBut is values without the columns skip has a value for (left nil).
func (t *table[T]) valuesBut(v *T, skip []driver.Value) ([]driver.Value, error) {
	vals := make([]driver.Value, len(t.cols))
	for i, c := range t.cols {
		if c.fixed || (skip != nil && skip[i] != nil) {
			continue
		}
		val, err := c.ref(v).Value()
		if err != nil {
			return nil, err
		}
		vals[i] = val
	}
	return vals, nil
}

// updateChanged writes the columns whose encoding differs between before and
// after (both from values) to the row whose tie column equals key. Writing
// only those keeps untouched indexes untouched, which makes a typical state
// change several times cheaper than rewriting the whole row; inside the
// caller's write transaction the result is the same.
func (t *table[T]) updateChanged(ctx context.Context, r runner, before, after []driver.Value, key any) error {
	var set strings.Builder
	args := make([]any, 0, 8)
	for i, c := range t.cols {
		if c.fixed || sameValue(before[i], after[i]) {
			continue
		}
		if set.Len() > 0 {
			set.WriteString(", ")
		}
		set.WriteString(c.name)
		set.WriteString(" = ?")
		args = append(args, after[i])
	}
	if len(args) == 0 {
		return nil
	}
	_, err := r.exec(ctx, "UPDATE "+t.name+" SET "+set.String()+" WHERE "+t.tie+" = ?", append(args, key)...)
	return err
}

// getOne runs a single-row query; no row gives notFound. Inside a write
// transaction the row is locked until commit (PostgreSQL).
func (t *table[T]) getOne(ctx context.Context, r runner, notFound error, query string, args ...any) (*T, error) {
	v := new(T)
	if r.tx != nil {
		query += r.p.d.forUpdate()
	}
	err := r.queryRow(ctx, query, args...).Scan(t.scanDest(v)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", t.name, err)
	}
	return v, nil
}

// storedText is a JSON column's codec that also keeps the text it was
// read from (getStored).
type storedText struct {
	codec
	text *driver.Value
}

func (c storedText) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*c.text = v
	case []byte:
		*c.text = string(v)
	}
	return c.codec.Scan(src)
}

// getStored is getOne that also returns, on SQLite, the stored text of
// the row's JSON columns (by column index; nil for the others and on
// PostgreSQL, whose jsonb is not kept as written), for rewriteStored.
func (t *table[T]) getStored(ctx context.Context, r runner, notFound error, query string, args ...any) (*T, []driver.Value, error) {
	v := new(T)
	if r.tx != nil {
		query += r.p.d.forUpdate()
	}
	dest := t.scanDest(v)
	var stored []driver.Value
	if !r.p.d.postgres {
		stored = make([]driver.Value, len(t.cols))
		off := len(dest) - len(t.cols) // the id column comes first
		for i, c := range t.cols {
			if c.unsortable { // the JSON documents
				dest[off+i] = storedText{codec: dest[off+i].(codec), text: &stored[i]}
			}
		}
	}
	err := r.queryRow(ctx, query, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, notFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("storage: read %s: %w", t.name, err)
	}
	return v, stored, nil
}

// projection returns the select list and scan destinations for the named
// columns (nil or empty: all). The id column is always read. Reading only
// what a list shows matters: each column read costs a cgo-free but
// mutex-guarded call per row in modernc's SQLite.
func (t *table[T]) projection(names []string) (string, func(*T) []any) {
	if len(names) == 0 {
		return t.selectList, t.scanDest
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var sel []string
	var refs []func(*T) codec
	if t.id != nil {
		sel = append(sel, "id")
	}
	for _, c := range t.cols {
		if want[c.name] {
			sel = append(sel, c.name)
			refs = append(refs, c.ref)
		}
	}
	return strings.Join(sel, ", "), func(v *T) []any {
		dest := make([]any, 0, len(refs)+1)
		if t.id != nil {
			dest = append(dest, t.id(v))
		}
		for _, ref := range refs {
			dest = append(dest, ref(v))
		}
		return dest
	}
}

// appendRowsWith runs query and appends the rows it returns to out,
// scanning each into the destinations scan gives.
func (t *table[T]) appendRowsWith(ctx context.Context, r runner, out []*T, query string, args []any, scan func(*T) []any) ([]*T, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", t.name, err)
	}
	defer rows.Close()
	for rows.Next() {
		v := new(T)
		if err := rows.Scan(scan(v)...); err != nil {
			return nil, fmt.Errorf("storage: list %s: %w", t.name, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", t.name, err)
	}
	return out, nil
}
