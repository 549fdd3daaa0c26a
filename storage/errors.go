package storage

import (
	"errors"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// violation is a constraint a write broke, as far as callers care.
type violation struct {
	unique  string // "table.column" of a UNIQUE or PRIMARY KEY, or ""
	foreign bool   // a FOREIGN KEY
}

// violationOf classifies err. Reading the constraint from the driver's error
// instead of checking beforehand keeps duplicate detection race-free and
// costs nothing on the success path.
func violationOf(err error) (violation, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return violation{}, false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		// "constraint failed: UNIQUE constraint failed: nodes.name (2067)"
		const marker = "constraint failed: "
		msg := se.Error()
		i := strings.LastIndex(msg, marker)
		if i < 0 {
			return violation{}, false
		}
		cols, _, _ := strings.Cut(msg[i+len(marker):], " ")
		// A multi-column constraint reads "t.a, t.b"; none of ours is one.
		cols, _, _ = strings.Cut(cols, ",")
		return violation{unique: cols}, true
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return violation{foreign: true}, true
	}
	return violation{}, false
}
