package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Pool sizes on PostgreSQL: writes run concurrently there (row locks, not
// one writer), so the writer pool is as wide as the reader pool.
const (
	pgWriterConns = 16
	pgReaderConns = 16
	// pgRetries bounds how often a write transaction is run again after a
	// deadlock or serialization failure (both mean: nothing was written).
	pgRetries = 5
)

// IsPostgresURL reports whether database names a PostgreSQL server
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgresURL(database string) bool {
	return strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://")
}

// OpenDatabase opens the store database names: a PostgreSQL URL, else a
// SQLite file path.
func OpenDatabase(ctx context.Context, database string) (*DB, error) {
	if IsPostgresURL(database) {
		return OpenPostgres(ctx, database)
	}
	return Open(ctx, database)
}

// OpenPostgres connects to the PostgreSQL database at dsn (a postgres://
// URL, as libpq takes it), applies pending migrations (one conductor at a
// time, under an advisory lock) and returns the store. Readers use
// read-only sessions, as SQLite's readers are query_only.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("storage: database URL: %w", err)
	}
	w, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("storage: open writer: %w", err)
	}
	w.SetMaxOpenConns(pgWriterConns)
	w.SetMaxIdleConns(pgWriterConns)
	w.SetConnMaxIdleTime(5 * time.Minute)
	if err := migrate(ctx, w, postgresDialect); err != nil {
		w.Close()
		return nil, err
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	r, err := sql.Open("pgx", u.String())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("storage: open readers: %w", err)
	}
	r.SetMaxOpenConns(pgReaderConns)
	r.SetMaxIdleConns(pgReaderConns)
	r.SetConnMaxIdleTime(5 * time.Minute)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("storage: open readers: %w", err)
	}
	return &DB{
		w:     newPool(w, postgresDialect),
		r:     newPool(r, postgresDialect),
		nodes: newNodeSQL(),
		ports: newPortSQL(),
		conds: newConductorSQL(),
		hist:  newEventSQL(),
	}, nil
}

// concurrentTx is writeTx on PostgreSQL: fn runs in a transaction of its own
// on the writer pool. PostgreSQL's WAL commit already groups the flushes
// of concurrent commits, which is what the SQLite committer does by hand.
// A deadlock or serialization failure rolls everything back, so fn runs
// again; its other errors are returned unchanged.
func (s *DB) concurrentTx(ctx context.Context, fn func(r runner) error) error {
	for attempt := 0; ; attempt++ {
		err := s.onceTx(ctx, fn)
		if attempt >= pgRetries || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
}

func (s *DB) onceTx(ctx context.Context, fn func(r runner) error) error {
	tx, err := s.w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storage: begin: %w", err)
	}
	if err := fn(runner{p: s.w, tx: tx}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// retryable: 40001 serialization_failure, 40P01 deadlock_detected.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// savepoint runs fn so that a statement failing inside it fails alone, as
// a failing statement does in SQLite (which undoes only that statement);
// PostgreSQL would otherwise abort the whole transaction.
func savepoint(ctx context.Context, r runner, fn func() error) error {
	if !r.p.d.postgres || r.tx == nil {
		return fn()
	}
	if _, err := r.tx.ExecContext(ctx, "SAVEPOINT stmt"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, err2 := r.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT stmt"); err2 != nil {
			return errors.Join(err, err2)
		}
		return err
	}
	_, err := r.tx.ExecContext(ctx, "RELEASE SAVEPOINT stmt")
	return err
}
