package storage

import (
	"context"
	"reflect"
	"testing"

	"castiron/fault"
)

// openWithNodes opens a store on a fresh database holding a node of each
// name (newNode), created in order.
func openWithNodes(tb testing.TB, names ...string) (*DB, []*Node) {
	tb.Helper()
	s := openTest(tb)
	nodes := make([]*Node, len(names))
	for i, name := range names {
		nodes[i] = mustCreateNode(tb, s, newNode(name))
	}
	return s, nodes
}

// openStores opens n stores on one fresh database, as n conductors (or
// processes) sharing it would.
func openStores(tb testing.TB, n int) []*DB {
	tb.Helper()
	db := testDatabase(tb)
	stores := make([]*DB, n)
	for i := range stores {
		stores[i] = openAt(tb, db)
	}
	return stores
}

// keys maps rows to the keys a list test compares (names, addresses, ...).
func keys[T any](rows []*T, key func(*T) string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = key(r)
	}
	return out
}

// listCase is one case of a list test: a query, and the keys of the rows it
// must return, in order.
type listCase[Q any] struct {
	name string
	q    Q
	want []string
}

// checkLists runs each case as a subtest: list(q) must return exactly the
// rows whose keys are want, in that order.
func checkLists[Q, T any](t *testing.T, list func(context.Context, Q) ([]*T, error), key func(*T) string, cases []listCase[Q]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := list(context.Background(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if g := keys(got, key); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %v, want %v", g, tc.want)
			}
		})
	}
}

// wantListRefusals checks the two pages every list refuses: a marker that
// names no row of table (NotFound) and a sort key that is no sortable
// column (Invalid).
func wantListRefusals(t *testing.T, list func(Page) error, table, marker, sortKey string) {
	t.Helper()
	wantKind(t, list(Page{Marker: marker}), fault.NotFound, "storage: no "+table+" row "+marker)
	wantKind(t, list(Page{SortKey: sortKey}), fault.Invalid, "storage: invalid sort_key \""+sortKey+"\"")
}
