package storage

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// dataVersion reads SQLite's PRAGMA data_version on a connection of its
// own: the value changes whenever another connection commits, castiron's
// writer or any other process's (an operator's sqlite3, a second store on
// the file). It is what WriteGeneration reports on SQLite: a few
// microseconds, where reading a node's row version costs a query.
type dataVersion struct {
	mu   sync.Mutex
	db   *sql.DB
	stmt *sql.Stmt
}

func openDataVersion(ctx context.Context, path string) (*dataVersion, error) {
	db, err := sql.Open("sqlite", path+"?"+readerDSN)
	if err != nil {
		return nil, fmt.Errorf("storage: open data_version reader: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	st, err := db.PrepareContext(ctx, "PRAGMA data_version")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: prepare data_version: %w", err)
	}
	return &dataVersion{db: db, stmt: st}, nil
}

func (d *dataVersion) read() (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var v int64
	err := d.stmt.QueryRowContext(context.Background()).Scan(&v)
	return uint64(v), err
}

func (d *dataVersion) close() error {
	if d == nil {
		return nil
	}
	d.stmt.Close()
	return d.db.Close()
}
