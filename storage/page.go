package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// filter accumulates WHERE conditions and their arguments.
type filter struct {
	conds []string
	args  []any
}

func (f *filter) add(cond string, args ...any) {
	f.conds = append(f.conds, cond)
	f.args = append(f.args, args...)
}

// eq adds "col = ?" when v is set, with the value key gives (key nil: the
// value as it is).
func (f *filter) eq(col string, v *string, key func(string) string) {
	switch {
	case v == nil:
	case key == nil:
		f.add(col+" = ?", *v)
	default:
		f.add(col+" = ?", key(*v))
	}
}

// in adds "col IN (?, ...)"; an empty (non-nil) set matches nothing.
func (f *filter) in(col string, values []string) {
	if len(values) == 0 {
		f.add("1 = 0")
		return
	}
	marks := strings.Repeat("?, ", len(values))
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	f.add(col+" IN ("+marks[:len(marks)-2]+")", args...)
}

// nullness adds "col IS NOT NULL" when set is true, "col IS NULL" otherwise.
func (f *filter) nullness(col string, set bool) {
	if set {
		f.add(col + " IS NOT NULL")
	} else {
		f.add(col + " IS NULL")
	}
}

// with returns a copy of f with one more condition.
func (f *filter) with(cond string, args ...any) *filter {
	g := &filter{
		conds: append(f.conds[:len(f.conds):len(f.conds)], cond),
		args:  append(f.args[:len(f.args):len(f.args)], args...),
	}
	return g
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
	// scope restricts the marker lookup (e.g. to one node's history).
	scope func(f *filter)
	// columns, when set, are the only columns read (a projection); the
	// other fields stay zero.
	columns []string
}

// paged runs a list query with Ironic's sort and marker semantics using
// keyset pagination: the marker row's (sort value, tie) pair becomes a WHERE
// bound, so page N costs what page 1 costs instead of an OFFSET scan.
func (t *table[T]) paged(ctx context.Context, r runner, f *filter, p Page, spec pageSpec) ([]*T, error) {
	key := p.SortKey
	if key == "" {
		key = spec.defaultSort
	}
	if !t.sortable[key] {
		return nil, &InvalidError{Table: t.name, Column: "sort_key", Value: p.SortKey}
	}
	var desc bool
	switch p.SortDir {
	case "", Asc:
	case Desc:
		desc = true
	default:
		return nil, &InvalidError{Table: t.name, Column: "sort_dir", Value: string(p.SortDir)}
	}
	if p.Limit < 0 {
		return nil, &InvalidError{Table: t.name, Column: "limit", Value: strconv.Itoa(p.Limit)}
	}

	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	order := " ORDER BY " + key + dir
	if t.nullable[key] {
		order += r.p.d.nulls(desc)
	}
	if key != t.tie {
		order += ", " + t.tie + dir
	}

	segments := []*filter{f}
	if p.Marker != "" {
		var mv, mt any
		mf := &filter{}
		mf.add(spec.markerCol+" = ?", p.Marker)
		if spec.scope != nil {
			spec.scope(mf)
		}
		err := r.queryRow(ctx, "SELECT "+key+", "+t.tie+" FROM "+t.name+mf.where(), mf.args...).Scan(&mv, &mt)
		if errors.Is(err, sql.ErrNoRows) {
			// Ironic looks the marker up as the resource itself.
			return nil, &NotFoundError{Table: t.name, Key: p.Marker}
		}
		if err != nil {
			return nil, fmt.Errorf("storage: read marker: %w", err)
		}
		segments = after(f, key, t.tie, desc, mv, mt)
	}

	hint := 16
	if p.Limit > 0 {
		hint = p.Limit
	}
	out := make([]*T, 0, hint)
	selectList, scan := t.projection(spec.columns)
	for _, seg := range segments {
		query := "SELECT " + selectList + " FROM " + t.name + seg.where() + order
		args := seg.args
		if p.Limit > 0 {
			query += " LIMIT ?"
			args = append(args[:len(args):len(args)], p.Limit-len(out))
		}
		var err error
		if out, err = t.appendRowsWith(ctx, r, out, query, args, scan); err != nil {
			return nil, err
		}
		if p.Limit > 0 && len(out) >= p.Limit {
			break
		}
	}
	return out, nil
}

// after returns, in order, the filters selecting the rows that follow the
// marker (sort value mv, tie value mt) in (key, tie) order.
//
// NULLs order as SQLite orders them: first ascending, last descending
// (PostgreSQL is told so: dialect.nulls). Rather than one condition
// with "OR key IS NULL", which no index can serve, the rows on either side
// of the NULL/non-NULL boundary are a separate segment, and each segment
// starts with a range on key that its index bounds.
func after(f *filter, key, tie string, desc bool, mv, mt any) []*filter {
	switch {
	case key == tie && !desc:
		return []*filter{f.with(tie+" > ?", mt)}
	case key == tie:
		return []*filter{f.with(tie+" < ?", mt)}
	case !desc && mv == nil: // the rest of the NULLs, then every value
		return []*filter{
			f.with(key+" IS NULL AND "+tie+" > ?", mt),
			f.with(key + " IS NOT NULL"),
		}
	case !desc:
		return []*filter{f.with(key+" >= ? AND ("+key+" > ? OR "+tie+" > ?)", mv, mv, mt)}
	case mv == nil: // descending: only NULLs are left
		return []*filter{f.with(key+" IS NULL AND "+tie+" < ?", mt)}
	default: // descending: smaller values, then the NULLs
		return []*filter{
			f.with(key+" <= ? AND ("+key+" < ? OR "+tie+" < ?)", mv, mv, mt),
			f.with(key + " IS NULL"),
		}
	}
}
