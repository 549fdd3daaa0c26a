package storage

import (
	"context"
	"strings"
	"testing"
)

// TestPartialNodeIndexesMigration: a database made before migration 0013
// (full indexes on the flags and on owner/lessee/resource_class), holding
// nodes, gets the partial indexes on its next open, and every filter they
// serve still finds the same nodes.
func TestPartialNodeIndexesMigration(t *testing.T) {
	ctx := context.Background()
	dsn := testDatabase(t)
	s := openAt(t, dsn)
	// Back to the schema before 0013.
	for _, q := range []string{
		"DELETE FROM schema_migrations WHERE version = 13",
		"DROP INDEX nodes_maintenance_idx", "DROP INDEX nodes_retired_idx", "DROP INDEX nodes_resource_class_idx",
		"DROP INDEX nodes_owner_idx", "DROP INDEX nodes_lessee_idx", "DROP INDEX nodes_conductor_group_idx",
		"CREATE INDEX nodes_maintenance_idx ON nodes (maintenance)", "CREATE INDEX nodes_retired_idx ON nodes (retired)",
		"CREATE INDEX nodes_resource_class_idx ON nodes (resource_class)", "CREATE INDEX nodes_owner_idx ON nodes (owner)",
		"CREATE INDEX nodes_lessee_idx ON nodes (lessee)", "CREATE INDEX nodes_conductor_group_idx ON nodes (conductor_group)",
	} {
		if _, err := s.w.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := range 100 {
		mustCreateNode(t, s, filterNode(i))
	}
	s = reopen(t, s, dsn)
	defQuery := "SELECT sql FROM sqlite_master WHERE name = ?"
	if s.w.d.postgres {
		defQuery = "SELECT indexdef FROM pg_indexes WHERE indexname = ?"
	}
	for _, idx := range []string{"nodes_maintenance_idx", "nodes_retired_idx", "nodes_resource_class_idx", "nodes_owner_idx", "nodes_lessee_idx", "nodes_conductor_group_idx"} {
		var def string
		if err := s.reader().queryRow(ctx, defQuery, idx).Scan(&def); err != nil {
			t.Fatalf("%s: %v", idx, err)
		}
		if !strings.Contains(def, "WHERE") {
			t.Errorf("%s is not partial after the migration: %s", idx, def)
		}
	}
	tr, fa := ptr(true), ptr(false)
	for _, c := range []struct {
		name string
		q    NodeQuery
		want int
	}{
		{"maintenance=true", NodeQuery{Maintenance: tr}, 1},
		{"maintenance=false", NodeQuery{Maintenance: fa}, 99},
		{"retired=true", NodeQuery{Retired: tr}, 1},
		{"retired=false", NodeQuery{Retired: fa}, 99},
		{"owner", NodeQuery{Owner: ptr("project-b")}, 10},
		{"lessee", NodeQuery{Lessee: ptr("tenant-x")}, 5},
		{"resource_class=gpu", NodeQuery{ResourceClass: ptr("gpu")}, 2},
		{"resource_class=baremetal", NodeQuery{ResourceClass: ptr("baremetal")}, 98},
		{"maintenance and owner", NodeQuery{Maintenance: tr, Owner: ptr("project-a")}, 1},
		{"conductor_group=rack1", NodeQuery{ConductorGroups: []string{"rack1"}}, 10},
		{"conductor_group=''", NodeQuery{ConductorGroups: []string{""}}, 90},
		{"conductor_group in ('', rack1)", NodeQuery{ConductorGroups: []string{"", "rack1"}}, 100},
	} {
		got, err := s.ListNodes(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != c.want {
			t.Errorf("%s: %d nodes, want %d", c.name, len(got), c.want)
		}
	}
}
