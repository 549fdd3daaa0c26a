package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"castiron/engine/fault"
)

// column maps one table column to a field of T. ref returns a pointer to the
// field (or a codec wrapping it) and serves both as bind argument and as scan
// destination, so each table has exactly one column list.
type column[T any] struct {
	name string
	ref  func(*T) any
	// fixed columns are written by INSERT only (identity, creation time).
	fixed bool
	// unsortable columns (JSON documents) are refused as Page.SortKey, as
	// Ironic refuses them.
	unsortable bool
}

func col[T any](name string, ref func(*T) any) column[T] {
	return column[T]{name: name, ref: ref}
}

func fixedCol[T any](name string, ref func(*T) any) column[T] {
	return column[T]{name: name, ref: ref, fixed: true}
}

func docCol[T any](name string, ref func(*T) any) column[T] {
	return column[T]{name: name, ref: ref, unsortable: true}
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
	updateSet  string // "a = ?, b = ?" for the non-fixed columns
	sortable   map[string]bool
}

func newTable[T any](name, tie string, id func(*T) *int64, cols []column[T]) table[T] {
	t := table[T]{name: name, id: id, cols: cols, tie: tie, sortable: map[string]bool{}}
	var sel, ins, marks, set []string
	if id != nil {
		sel = append(sel, "id")
		t.sortable["id"] = true
	}
	for _, c := range cols {
		sel = append(sel, c.name)
		ins = append(ins, c.name)
		marks = append(marks, "?")
		if !c.fixed {
			set = append(set, c.name+" = ?")
		}
		if !c.unsortable {
			t.sortable[c.name] = true
		}
	}
	t.selectList = strings.Join(sel, ", ")
	t.insert = "INSERT INTO " + name + " (" + strings.Join(ins, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
	if id != nil {
		// RETURNING exists in SQLite >= 3.35 and PostgreSQL alike.
		t.insert += " RETURNING id"
	}
	t.updateSet = strings.Join(set, ", ")
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
	args := make([]any, 0, len(t.cols))
	for _, c := range t.cols {
		args = append(args, c.ref(v))
	}
	return args
}

// updateArgs are the SET arguments followed by extra (the WHERE arguments).
func (t *table[T]) updateArgs(v *T, extra ...any) []any {
	args := make([]any, 0, len(t.cols)+len(extra))
	for _, c := range t.cols {
		if !c.fixed {
			args = append(args, c.ref(v))
		}
	}
	return append(args, extra...)
}

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// getOne runs a single-row query; no row gives notFound.
func (t *table[T]) getOne(ctx context.Context, q queryer, notFound error, query string, args ...any) (*T, error) {
	v := new(T)
	err := q.QueryRowContext(ctx, query, args...).Scan(t.scanDest(v)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", t.name, err)
	}
	return v, nil
}

func (t *table[T]) list(ctx context.Context, q queryer, query string, args []any, sizeHint int) ([]*T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", t.name, err)
	}
	defer rows.Close()
	out := make([]*T, 0, sizeHint)
	for rows.Next() {
		v := new(T)
		if err := rows.Scan(t.scanDest(v)...); err != nil {
			return nil, fmt.Errorf("storage: list %s: %w", t.name, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", t.name, err)
	}
	return out, nil
}

// filter accumulates WHERE conditions and their arguments.
type filter struct {
	conds []string
	args  []any
}

func (f *filter) add(cond string, args ...any) {
	f.conds = append(f.conds, cond)
	f.args = append(f.args, args...)
}

// in adds "col IN (?, ...)"; an empty (non-nil) set matches nothing.
func (f *filter) in(col string, values []string) {
	if len(values) == 0 {
		f.add("1 = 0")
		return
	}
	marks := strings.Repeat("?, ", len(values))
	cond := col + " IN (" + marks[:len(marks)-2] + ")"
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	f.add(cond, args...)
}

// nullness adds "col IS NOT NULL" when set is true, "col IS NULL" otherwise.
func (f *filter) nullness(col string, set bool) {
	if set {
		f.add(col + " IS NOT NULL")
	} else {
		f.add(col + " IS NULL")
	}
}

func (f *filter) where() string {
	if len(f.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(f.conds, " AND ")
}

// pageSpec says how a table pages: the default sort key and how a marker
// is found.
type pageSpec struct {
	defaultSort string
	// markerCol identifies the marker row (uuid, hostname).
	markerCol string
	// markerNotFound is the error for an unknown marker; Ironic looks the
	// marker up as the resource itself, so it is that resource's NotFound.
	markerNotFound func(marker string) error
	// scope restricts the marker lookup (e.g. to one node's history).
	scope func(f *filter)
}

// paged runs a list query with Ironic's sort and marker semantics using
// keyset pagination: the marker row's (sort value, tie) pair becomes a WHERE
// bound, so page N costs what page 1 costs instead of an OFFSET scan.
//
// NULLs order as SQLite orders them: first ascending, last descending (a
// PostgreSQL store must say NULLS FIRST/LAST to match).
func (t *table[T]) paged(ctx context.Context, q queryer, f *filter, p Page, spec pageSpec) ([]*T, error) {
	key := p.SortKey
	if key == "" {
		key = spec.defaultSort
	}
	if !t.sortable[key] {
		return nil, fault.New(fault.Invalid, "The sort_key value %s is an invalid field for sorting", p.SortKey)
	}
	var desc bool
	switch p.SortDir {
	case "", Asc:
	case Desc:
		desc = true
	default:
		return nil, fault.New(fault.Invalid, "Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", p.SortDir)
	}
	if p.Limit < 0 {
		return nil, fault.New(fault.Invalid, "Limit must be positive")
	}

	if p.Marker != "" {
		var mv, mt any
		mf := filter{}
		mf.add(spec.markerCol+" = ?", p.Marker)
		if spec.scope != nil {
			spec.scope(&mf)
		}
		err := q.QueryRowContext(ctx, "SELECT "+key+", "+t.tie+" FROM "+t.name+mf.where(), mf.args...).Scan(&mv, &mt)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, spec.markerNotFound(p.Marker)
		}
		if err != nil {
			return nil, fmt.Errorf("storage: read marker: %w", err)
		}
		keysetAfter(f, key, t.tie, desc, mv, mt)
	}

	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	query := t.selectFrom() + f.where() + " ORDER BY " + key + dir
	if key != t.tie {
		query += ", " + t.tie + dir
	}
	args := f.args
	hint := 16
	if p.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, p.Limit)
		hint = p.Limit
	}
	return t.list(ctx, q, query, args, hint)
}

// keyset adds the condition "comes after (mv, mt) in (key, tie) order".
// The ascending non-NULL form leads with "key >= ?" so the index on key
// bounds the scan.
func keysetAfter(f *filter, key, tie string, desc bool, mv, mt any) {
	switch {
	case key == tie && !desc:
		f.add(tie+" > ?", mt)
	case key == tie && desc:
		f.add(tie+" < ?", mt)
	case !desc && mv == nil: // rest of the NULLs, then every value
		f.add("(("+key+" IS NULL AND "+tie+" > ?) OR "+key+" IS NOT NULL)", mt)
	case !desc:
		f.add(key+" >= ? AND ("+key+" > ? OR "+tie+" > ?)", mv, mv, mt)
	case mv == nil: // descending: NULLs come last
		f.add(key+" IS NULL AND "+tie+" < ?", mt)
	default:
		f.add("(("+key+" <= ? AND ("+key+" < ? OR "+tie+" < ?)) OR "+key+" IS NULL)", mv, mv, mt)
	}
}
