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

// Config is how a store is opened, beyond the database's address.
type Config struct {
	// NonDurableTest lets the store open a PostgreSQL server that does not
	// make commits durable (fsync or synchronous_commit off), which it
	// otherwise refuses: a commit castiron acknowledges there can be lost
	// by a crash of the server. Only for throwaway test servers.
	NonDurableTest bool
}

// OpenDatabase opens the store database names: a PostgreSQL URL, else a
// SQLite file path.
func OpenDatabase(ctx context.Context, database string) (*DB, error) {
	return OpenDatabaseWith(ctx, database, Config{})
}

// OpenDatabaseWith is OpenDatabase with cfg.
func OpenDatabaseWith(ctx context.Context, database string, cfg Config) (*DB, error) {
	if IsPostgresURL(database) {
		return OpenPostgresWith(ctx, database, cfg)
	}
	return Open(ctx, database)
}

// OpenPostgres connects to the PostgreSQL database at dsn (a postgres://
// URL, as libpq takes it), applies pending migrations (one conductor at a
// time, under an advisory lock) and returns the store. Readers use
// read-only sessions, as SQLite's readers are query_only.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	return OpenPostgresWith(ctx, dsn, Config{})
}

// OpenPostgresWith is OpenPostgres with cfg. It refuses a server whose
// commits are not durable (checkDurable) unless cfg.NonDurableTest.
func OpenPostgresWith(ctx context.Context, dsn string, cfg Config) (*DB, error) {
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
	if !cfg.NonDurableTest {
		if err := checkDurable(ctx, w); err != nil {
			w.Close()
			return nil, err
		}
	}
	if err := migrate(ctx, w, postgresDialect); err != nil {
		w.Close()
		return nil, err
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	// A host list for failover (host=a,b&target_session_attrs=read-write)
	// would refuse every reader session: they are read-only by design. The
	// readers want the same server the writer gets, the primary.
	if q.Get("target_session_attrs") == "read-write" {
		q.Set("target_session_attrs", "primary")
	}
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
		stats: newNodeStats(w),
	}, nil
}

// NonDurableError: the PostgreSQL server would acknowledge commits that a
// crash or power cut can undo (Setting is fsync or synchronous_commit, as
// SHOW reported it for castiron's session).
type NonDurableError struct {
	Setting, Value string
}

func (e *NonDurableError) Error() string {
	return fmt.Sprintf("storage: the PostgreSQL server has %s = %s: commits castiron acknowledges could be lost "+
		"by a crash of the server; set %s = on (the default), or open with the test option for a throwaway test server",
		e.Setting, e.Value, e.Setting)
}

// checkDurable refuses a server with fsync off (a crash of the server or
// host can lose or corrupt committed data) or synchronous_commit off for
// castiron's session (COMMIT returns before its WAL is flushed: the last
// commits vanish in a crash). Both are read as the session sees them, so a
// setting of the role, the database or the URL's options counts too.
func checkDurable(ctx context.Context, db *sql.DB) error {
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		var v string
		if err := db.QueryRowContext(ctx, "SHOW "+setting).Scan(&v); err != nil {
			return fmt.Errorf("storage: SHOW %s: %w", setting, err)
		}
		if strings.EqualFold(v, "off") {
			return &NonDurableError{Setting: setting, Value: v}
		}
	}
	return nil
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
