package storage

import (
	"context"
	"fmt"
	"testing"
)

func TestZZPlan(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for i := 0; i < 300; i++ {
		mustCreateNode(t, s, benchNode(i))
	}
	qs := []string{
		"SELECT id FROM nodes WHERE parent_node IS NULL AND id > ? ORDER BY id ASC LIMIT 100",
		"SELECT id FROM nodes WHERE parent_node IS NULL AND name >= ? AND (name > ? OR id > ?) ORDER BY name ASC, id ASC LIMIT 100",
		"SELECT id FROM nodes WHERE parent_node IS NULL AND ((name <= ? AND (name < ? OR id < ?)) OR name IS NULL) ORDER BY name DESC, id DESC LIMIT 100",
		"SELECT id FROM nodes WHERE parent_node IS NULL AND provision_state = ? AND id > ? ORDER BY id ASC LIMIT 100",
		"SELECT id FROM nodes WHERE parent_node IS NULL AND created_at >= ? AND (created_at > ? OR id > ?) ORDER BY created_at ASC, id ASC LIMIT 100",
	}
	for _, q := range qs {
		rows, err := s.r.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "a", "a", 1)
		if err != nil {
			rows, err = s.r.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "a", 1)
		}
		if err != nil { t.Fatal(err) }
		fmt.Println(q)
		for rows.Next() {
			var a, b, c int
			var d string
			rows.Scan(&a, &b, &c, &d)
			fmt.Println("   ", d)
		}
		rows.Close()
	}
}
