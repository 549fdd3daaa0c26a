package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxStmts bounds each pool's statement cache. List queries vary with their
// filters, but real clients use a handful of combinations.
const maxStmts = 256

// pool is a *sql.DB with a cache of prepared statements: parsing a 60-column
// SELECT costs more than running it for one row.
type pool struct {
	db *sql.DB
	d  *dialect

	mu    sync.Mutex
	stmts map[string]*sql.Stmt

	// foreground, when set, is a pool of its own on the same database for
	// the reads of ctx marked Foreground (SQLite's readers; nil elsewhere).
	foreground *pool
}

type foregroundKey struct{}

// Foreground marks ctx as an operator's read (an API GET): outside a
// transaction its reads run on connections kept for such reads, instead
// of queueing for a reader behind the conductor's tasks and the agents.
// In a 1,000-node storm those kept the 4 shared readers busy with dozens
// of reads waiting (each holding its connection while it decodes a node's
// JSON columns, and while the machine's saturated cores run others), and
// a GET node waited up to 250 ms for one (issue 28's storm profile). The
// reads and their results are the same on either pool.
func Foreground(ctx context.Context) context.Context {
	return context.WithValue(ctx, foregroundKey{}, true)
}

// forCtx is the pool the reads of ctx run on.
func (p *pool) forCtx(ctx context.Context) *pool {
	if p.foreground != nil && ctx.Value(foregroundKey{}) != nil {
		return p.foreground
	}
	return p
}

func newPool(db *sql.DB, d *dialect) *pool {
	return &pool{db: db, d: d, stmts: map[string]*sql.Stmt{}}
}

// cached returns the prepared statement for query, or nil.
func (p *pool) cached(query string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stmts[query]
}

// prepare returns a cached prepared statement for query, preparing it if
// needed; nil when the cache is full or preparing failed (the caller then
// runs the query unprepared, which reports any error in the usual place).
// It takes a connection, so it must not be called from inside a transaction
// of a one-connection pool.
func (p *pool) prepare(ctx context.Context, query string) *sql.Stmt {
	if p.d.postgres {
		// pgx prepares and caches statements per connection itself; a
		// database/sql Stmt would prepare each one again on every
		// connection of the pool.
		return nil
	}
	if st := p.cached(query); st != nil {
		return st
	}
	st, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.stmts[query]; ok {
		st.Close()
		return prev
	}
	if len(p.stmts) >= maxStmts {
		st.Close()
		return nil
	}
	p.stmts[query] = st
	return st
}

func (p *pool) close() error {
	p.mu.Lock()
	var errs []error
	for q, st := range p.stmts {
		errs = append(errs, st.Close())
		delete(p.stmts, q)
	}
	p.mu.Unlock()
	if p.foreground != nil {
		errs = append(errs, p.foreground.close())
	}
	return errors.Join(append(errs, p.db.Close())...)
}

// runner runs statements on a pool, inside tx when tx is set, through the
// pool's prepared statements where it has them.
type runner struct {
	p  *pool
	tx *sql.Tx
	// missed collects the queries a transaction ran unprepared, for
	// writeTx to prepare once the connection is free again.
	missed *[]string
}

// txCtx detaches statements inside a transaction from the caller's
// cancellation: an interrupted INSERT/UPDATE makes SQLite roll back the
// whole transaction, which the group commit shares between callers.
func (r runner) txCtx(ctx context.Context) context.Context {
	if r.tx != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (r runner) stmt(ctx context.Context, query string) *sql.Stmt {
	if r.tx == nil || r.p.d.postgres {
		return r.p.prepare(ctx, query)
	}
	// The transaction holds the writer's only connection: use what is
	// already prepared, never prepare (that would wait for the connection).
	if st := r.p.cached(query); st != nil {
		return r.tx.StmtContext(ctx, st)
	}
	if r.missed != nil {
		*r.missed = append(*r.missed, query)
	}
	return nil
}

// conn runs unprepared statements: the transaction, or else the pool.
type conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// prepared returns the context to run query with and its prepared
// statement, or (st nil) the conn to run it on, with query in the
// dialect's placeholders.
func (r runner) prepared(ctx context.Context, query string) (_ context.Context, st *sql.Stmt, c conn, bound string) {
	ctx = r.txCtx(ctx)
	if r.tx == nil {
		r.p = r.p.forCtx(ctx)
	}
	if st := r.stmt(ctx, query); st != nil {
		return ctx, st, nil, ""
	}
	if r.tx != nil {
		return ctx, nil, r.tx, r.p.d.bind(query)
	}
	return ctx, nil, r.p.db, r.p.d.bind(query)
}

func (r runner) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	ctx, st, c, query := r.prepared(ctx, query)
	if st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.QueryRowContext(ctx, query, args...)
}

func (r runner) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx, st, c, query := r.prepared(ctx, query)
	if st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.QueryContext(ctx, query, args...)
}

func (r runner) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx, st, c, query := r.prepared(ctx, query)
	if st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.ExecContext(ctx, query, args...)
}

// reader runs on the query_only pool.
func (s *DB) reader() runner { return runner{p: s.r} }

// write runs fn as a write transaction (writeTx). Every write goes through
// it, single statements too: on SQLite a statement that committed on its
// own would pay a WAL sync of its own, where the group commit makes
// concurrent writers share one (commit.go).
func (s *DB) write(ctx context.Context, fn func(r runner) error) error { return s.writeTx(ctx, fn) }

// queryAll runs query through r and appends each row, as scan reads it,
// to out; errors say what was being read ("list shards").
func queryAll[T any](ctx context.Context, r runner, out []T, what string, scan func(*sql.Rows, *T) error,
	query string, args ...any) ([]T, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, fmt.Errorf("storage: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: %s: %w", what, err)
	}
	return out, nil
}

// refuseInUse returns inUse when a row of table has key in col (the
// check before deleting what those rows name), nil when none has.
func refuseInUse(ctx context.Context, r runner, table, col, key string, inUse *InUseError) error {
	var one int
	err := r.queryRow(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM "+table+" WHERE "+col+" = ? LIMIT 1) AS used", key).Scan(&one)
	if err != nil {
		return fmt.Errorf("storage: delete %s %s: %w", inUse.Table, inUse.Key, err)
	}
	if one > 0 {
		return inUse
	}
	return nil
}

// scanOne reads a row of one column.
func scanOne[T any](rows *sql.Rows, v *T) error { return rows.Scan(v) }

// execOne runs a statement meant to change one row; when it changes none
// the row did not exist and notFound is returned.
func execOne(ctx context.Context, r runner, notFound error, query string, args ...any) error {
	res, err := r.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound
	}
	return nil
}
