package storage

import (
	"context"
	"database/sql"
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
	return queryAll(ctx, s.reader(), []Shard{}, "list shards", func(rows *sql.Rows, sh *Shard) error {
		return rows.Scan(nullStr{&sh.Name}, &sh.Count)
	}, "SELECT shard, COUNT(*) FROM nodes GROUP BY shard ORDER BY COUNT(*) DESC, shard"+s.r.d.nulls(false))
}
