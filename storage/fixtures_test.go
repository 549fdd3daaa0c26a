package storage

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/uuid"

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

// mustCreate creates v through create; an error fails the test.
func mustCreate[T any](tb testing.TB, create func(context.Context, *T) error, v *T) *T {
	tb.Helper()
	if err := create(context.Background(), v); err != nil {
		tb.Fatalf("create %T: %v", v, err)
	}
	return v
}

// wantStored reads the row by each of idents through get: each must find
// it, equal to want.
func wantStored[T any](t *testing.T, get func(context.Context, string) (*T, error), want *T, idents ...string) {
	t.Helper()
	for _, ident := range idents {
		got, err := get(context.Background(), ident)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read %s:\n got %+v (%v)\nwant %+v", ident, got, err, want)
		}
	}
}

// wantUUIDRefusals checks what every resource table refuses about uuids:
// dup, a row with the uuid of a stored one (Conflict); bad, one whose uuid
// is no uuid (Invalid); and the lookup of an unknown uuid (NotFound).
func wantUUIDRefusals[T any](t *testing.T, table string, create func(context.Context, *T) error,
	get func(context.Context, string) (*T, error), dup, bad *T) {
	t.Helper()
	ctx := context.Background()
	uuidOf := func(v *T) string { return reflect.ValueOf(v).Elem().FieldByName("UUID").String() }
	wantKind(t, create(ctx, dup), fault.Conflict, "storage: "+table+" (uuid)=("+uuidOf(dup)+") already exists")
	wantKind(t, create(ctx, bad), fault.Invalid, "storage: invalid uuid \""+uuidOf(bad)+"\"")
	missing := uuid.NewString()
	_, err := get(ctx, missing)
	wantKind(t, err, fault.NotFound, "storage: no "+table+" row "+missing)
}

// wantNameRefusals checks what a table whose rows have a unique name
// refuses: sameName and sameUUID, rows with the name or uuid of a stored
// one (Conflict), and the lookup of the unknown name missing (NotFound).
func wantNameRefusals[T any](t *testing.T, table string, create func(context.Context, *T) error,
	get func(context.Context, string) (*T, error), sameName, sameUUID *T, missing string) {
	t.Helper()
	ctx := context.Background()
	field := func(v *T, name string) string { return reflect.ValueOf(v).Elem().FieldByName(name).String() }
	wantKind(t, create(ctx, sameName), fault.Conflict, "storage: "+table+" (name)=("+field(sameName, "Name")+") already exists")
	wantKind(t, create(ctx, sameUUID), fault.Conflict, "storage: "+table+" (uuid)=("+field(sameUUID, "UUID")+") already exists")
	_, err := get(ctx, missing)
	wantKind(t, err, fault.NotFound, "storage: no "+table+" row "+missing)
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
