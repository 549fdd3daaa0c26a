package storage

import (
	"errors"
	"regexp"

	"github.com/jackc/pgx/v5/pgconn"
	"sync"
)

// pgKeyRE reads the columns out of PostgreSQL's unique-violation detail,
// "Key (type, connector_id)=(iqn, x) already exists.".
var pgKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^Key \(([^)]*)\)=`) })

// pgViolationOf is violationOf for PostgreSQL's errors (SQLSTATE 23505
// unique_violation, 23503 foreign_key_violation).
func pgViolationOf(err error) (violation, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return violation{}, false
	}
	switch pe.Code {
	case "23505":
		if m := pgKeyRE().FindStringSubmatch(pe.Detail); m != nil {
			return violation{unique: m[1]}, true
		}
	case "23503":
		return violation{foreign: true}, true
	}
	return violation{}, false
}
