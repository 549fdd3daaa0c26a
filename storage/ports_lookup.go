package storage

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// PortLookupStore finds a port by any of the identities Ironic's
// objects.Port.get accepts.
type PortLookupStore interface {
	// LookupPort finds a port by integer id, UUID, MAC address or name, in
	// that order of recognition (Ironic's Port.get). Not found gives
	// PortNotFound naming ident.
	LookupPort(ctx context.Context, ident string) (*Port, error)
	// PortAddresses returns every port's MAC address (lower case), in no
	// particular order: the boot gate's set of known machines.
	PortAddresses(ctx context.Context) ([]string, error)
}

// portMACRE is oslo netutils.is_valid_mac (applied to the lower-cased value).
var portMACRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`) })

// isIntLike is oslo strutils.is_int_like: str(int(v)) == v.
func isIntLike(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != v {
		return 0, false
	}
	return n, true
}

// LookupPort implements PortLookupStore.
func (s *DB) LookupPort(ctx context.Context, ident string) (*Port, error) {
	notFound := portNotFound(ident)
	if id, ok := isIntLike(ident); ok {
		return s.ports.getOne(ctx, s.reader(), notFound, s.ports.selectFrom()+" WHERE id = ?", id)
	}
	if u, ok := canonicalUUID(ident); ok {
		return s.ports.getOne(ctx, s.reader(), notFound, s.ports.byUUID, u)
	}
	if portMACRE().MatchString(strings.ToLower(ident)) {
		return s.ports.getOne(ctx, s.reader(), notFound, s.ports.byAddress, strings.ToLower(ident))
	}
	return s.ports.getOne(ctx, s.reader(), notFound, s.ports.selectFrom()+" WHERE name = ?", ident)
}

// PortAddresses implements PortLookupStore.
func (s *DB) PortAddresses(ctx context.Context) ([]string, error) {
	rows, err := s.reader().query(ctx, "SELECT address FROM ports")
	if err != nil {
		return nil, fmt.Errorf("storage: port addresses: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, fmt.Errorf("storage: port addresses: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: port addresses: %w", err)
	}
	return out, nil
}
