package storage

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"castiron/fault"
)

// Storage errors are neutral: they say which table, column and value a
// failure is about, never how Ironic words it (engine does, see engine.Word).
// Each carries its fault kind, so that an error nobody words still maps to
// the right HTTP status.

// NotFoundError: no row of Table has Key in Column ("" for the table's
// identity: a uuid, or a name when the key is not a uuid).
type NotFoundError struct {
	Table, Column, Key string
}

func (e *NotFoundError) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("storage: no %s row with %s %s", e.Table, e.Column, e.Key)
	}
	return fmt.Sprintf("storage: no %s row %s", e.Table, e.Key)
}

// FaultKind implements fault.Classified.
func (e *NotFoundError) FaultKind() fault.Kind { return fault.NotFound }

// DuplicateError: a unique constraint of Table refused Values in Columns
// for the row Row (its uuid) because another row holds them.
type DuplicateError struct {
	Table   string
	Columns []string
	Values  []string
	Row     string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("storage: %s (%s)=(%s) already exists", e.Table, strings.Join(e.Columns, ", "), strings.Join(e.Values, ", "))
}

// FaultKind implements fault.Classified.
func (e *DuplicateError) FaultKind() fault.Kind { return fault.Conflict }

// InUseError: the row Key of Table cannot be deleted while rows of By name it.
type InUseError struct {
	Table, Key, By string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("storage: %s %s is in use by %s", e.Table, e.Key, e.By)
}

// FaultKind implements fault.Classified.
func (e *InUseError) FaultKind() fault.Kind { return fault.Conflict }

// InvalidError: Value cannot go in (or, for paging, be used as) Column.
type InvalidError struct {
	Table, Column, Value string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("storage: invalid %s %q", e.Column, e.Value)
}

// FaultKind implements fault.Classified.
func (e *InvalidError) FaultKind() fault.Kind { return fault.Invalid }

// violation is a constraint a write broke, as far as callers care.
type violation struct {
	unique  string // the columns of a UNIQUE or PRIMARY KEY ("name", "type, connector_id"), or ""
	foreign bool   // a FOREIGN KEY
}

// violationOf classifies err. Reading the constraint from the driver's error
// instead of checking beforehand keeps duplicate detection race-free and
// costs nothing on the success path.
func violationOf(err error) (violation, bool) {
	if v, ok := pgViolationOf(err); ok {
		return v, true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return violation{}, false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		// "constraint failed: UNIQUE constraint failed: t.a, t.b (2067)"
		const marker = "constraint failed: "
		msg := se.Error()
		i := strings.LastIndex(msg, marker)
		if i < 0 {
			return violation{}, false
		}
		list := msg[i+len(marker):]
		if j := strings.LastIndex(list, " ("); j >= 0 {
			list = list[:j]
		}
		var cols []string
		for _, c := range strings.Split(list, ", ") {
			_, col, _ := strings.Cut(c, ".")
			cols = append(cols, col)
		}
		return violation{unique: strings.Join(cols, ", ")}, true
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return violation{foreign: true}, true
	}
	return violation{}, false
}

// noSpace reports whether err says the database's disk is full: SQLite's
// SQLITE_FULL (a write of the WAL or database file got ENOSPC), ENOSPC
// itself, PostgreSQL's 53100 disk_full.
func noSpace(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "53100" {
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}

// pgUnavailable reports whether err says the PostgreSQL server cannot be
// reached or is going away: castiron could not connect, the connection
// broke, or the server is shutting down, restarting or still starting
// (SQLSTATE class 08, 57P01-57P03).
func pgUnavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	// A connection the server dropped mid-exchange (an immediate shutdown
	// or a crash closes it without a message): pgx returns the read's own
	// error, which is not SafeToRetry, since the statement may have run.
	var ne *net.OpError
	return pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne)
}

// Unreachable reports whether err says castiron's database server could
// not be reached or went away (pgUnavailable): a read that failed so is
// answered 503 (engine.Word), as writes are (classifyWrite), not 500.
func Unreachable(err error) bool { return err != nil && pgUnavailable(err) }

// classifyWrite turns a write that failed for want of disk space into
// fault.NoSpace (503), one that failed because the PostgreSQL server was
// unreachable into fault.Unavailable (503: the client retries; a write
// whose connection broke during COMMIT may or may not be stored, as for
// any request that got no answer), so that no caller reports either as an
// internal error; other errors are returned unchanged.
func classifyWrite(err error) error {
	switch {
	case err == nil || fault.Is(err, fault.StorageFull) || fault.Is(err, fault.Unavailable):
		return err
	case noSpace(err):
		return fault.NoSpace(err)
	case pgUnavailable(err):
		return fault.Wrap(fault.Unavailable, err, "castiron's database server cannot be reached: the change may not have been stored. Retry shortly.")
	}
	return err
}
