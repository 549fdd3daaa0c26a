package storage

import (
	"context"
	"fmt"

	"castiron/fault"
)

// Kinds of hardware identity (IdentityStore).
const (
	IdentityBMCAddress   = "bmc_address"
	IdentityBMCMAC       = "bmc_mac"
	IdentitySystemUUID   = "system_uuid"
	IdentitySystemSerial = "system_serial"
)

// Identity is one fact that identifies a node's hardware.
type Identity struct {
	Kind  string
	Value string
}

// IdentityStore keeps what identifies each node's hardware besides its
// ports, for discovery to find a machine it already knows.
type IdentityStore interface {
	// SetIdentities replaces the node's identities of the kinds ids has
	// (a kind the inspection did not see keeps what an earlier one saw).
	SetIdentities(ctx context.Context, nodeUUID string, ids []Identity) error
	// NodesWithIdentity lists the nodes that have the identity, oldest
	// first.
	NodesWithIdentity(ctx context.Context, id Identity) ([]string, error)
}

// SetIdentities implements IdentityStore in one transaction.
func (s *SQLite) SetIdentities(ctx context.Context, nodeUUID string, ids []Identity) error {
	node := uuidKey(nodeUUID)
	return s.writeTx(ctx, func(r runner) error {
		kinds := map[string]bool{}
		for _, id := range ids {
			if !kinds[id.Kind] {
				kinds[id.Kind] = true
				if _, err := r.exec(ctx, "DELETE FROM hardware_identities WHERE node_uuid = ? AND kind = ?", node, id.Kind); err != nil {
					return fmt.Errorf("storage: clear identities of %s: %w", nodeUUID, err)
				}
			}
		}
		seen := map[Identity]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			if _, err := r.exec(ctx, "INSERT INTO hardware_identities (node_uuid, kind, value) VALUES (?, ?, ?)", node, id.Kind, id.Value); err != nil {
				if v, ok := violationOf(err); ok && v.foreign {
					return fault.NodeNotFound(nodeUUID)
				}
				return fmt.Errorf("storage: add identity of %s: %w", nodeUUID, err)
			}
		}
		return nil
	})
}

// NodesWithIdentity implements IdentityStore.
func (s *SQLite) NodesWithIdentity(ctx context.Context, id Identity) ([]string, error) {
	return queryAll(ctx, s.reader(), nil, "nodes with "+id.Kind+" "+id.Value, scanOne[string],
		`SELECT i.node_uuid FROM hardware_identities i JOIN nodes n ON n.uuid = i.node_uuid
		WHERE i.kind = ? AND i.value = ? ORDER BY n.id`, id.Kind, id.Value)
}
