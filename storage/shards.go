package storage

import (
	"context"
	"fmt"
)

// Shard is one value of the nodes' shard field with the number of nodes
// that have it; Name is nil for the nodes without a shard.
type Shard struct {
	Name  *string
	Count int
}

// ShardStore answers GET /v1/shards.
type ShardStore interface {
	// ListShards counts the nodes per shard, most populated first (ties in
	// shard order, unsharded first), as Ironic's get_shard_list.
	ListShards(ctx context.Context) ([]Shard, error)
}

// ListShards groups every node (children included) by shard.
func (s *DB) ListShards(ctx context.Context) ([]Shard, error) {
	rows, err := s.reader().query(ctx,
		"SELECT shard, COUNT(*) FROM nodes GROUP BY shard ORDER BY COUNT(*) DESC, shard"+s.r.d.nulls(false))
	if err != nil {
		return nil, fmt.Errorf("storage: list shards: %w", err)
	}
	defer rows.Close()
	out := []Shard{}
	for rows.Next() {
		var sh Shard
		if err := rows.Scan(nullStr{&sh.Name}, &sh.Count); err != nil {
			return nil, fmt.Errorf("storage: list shards: %w", err)
		}
		out = append(out, sh)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: list shards: %w", err)
	}
	return out, nil
}
