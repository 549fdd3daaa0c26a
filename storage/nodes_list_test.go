package storage

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func names(nodes []*Node) []string { return keys(nodes, nodeName) }

func nodeName(n *Node) string { return deref(n.Name) }

func TestListNodesFilters(t *testing.T) {
	s := openTest(t)
	mk := func(name string, f func(n *Node)) *Node {
		n := newNode(name)
		f(n)
		return mustCreateNode(t, s, n)
	}
	inst := uuid.NewString()
	chassis := uuid.NewString()
	a := mk("a", func(n *Node) {
		n.ProvisionState = "available"
		n.ConductorGroup = "g1"
		n.Description = ptr("Rack 10, slot 5%")
		n.Owner = ptr("o1")
		n.Shard = ptr("s1")
		n.ResourceClass = ptr("rc1")
	})
	mk("b", func(n *Node) {
		n.Maintenance = true
		n.Fault = ptr("power failure")
		n.Driver = "ipmi"
		n.InstanceUUID = ptr(inst)
		n.Lessee = ptr("l1")
		n.Description = ptr("rack 11")
		n.Shard = ptr("s2")
	})
	mk("c", func(n *Node) {
		n.Retired = true
		n.ChassisUUID = ptr(chassis)
		n.Reservation = ptr("host1")
		n.ConductorGroup = "g2"
		n.ProvisionState = "cleaning"
		n.TargetPowerState = ptr("power on")
		n.Description = ptr("slot_5")
	})
	mk("child", func(n *Node) { n.ParentNode = ptr(a.UUID) })

	checkLists(t, s.ListNodes, nodeName, []listCase[NodeQuery]{
		{"all top level", NodeQuery{}, []string{"a", "b", "c"}},
		{"include children", NodeQuery{IncludeChildren: true}, []string{"a", "b", "c", "child"}},
		{"parent node", NodeQuery{ParentNode: ptr(a.UUID)}, []string{"child"}},
		{"provision state", NodeQuery{ProvisionState: ptr("available")}, []string{"a"}},
		{"provision state child", NodeQuery{ProvisionState: ptr("enroll"), IncludeChildren: true}, []string{"b", "child"}},
		{"provision states", NodeQuery{ProvisionStates: []string{"available", "cleaning", "deploying"}}, []string{"a", "c"}},
		{"provision states empty", NodeQuery{ProvisionStates: []string{}}, []string{}},
		{"power pending", NodeQuery{PowerPending: ptr(true)}, []string{"c"}},
		{"power not pending", NodeQuery{PowerPending: ptr(false), IncludeChildren: true}, []string{"a", "b", "child"}},
		{"maintenance true", NodeQuery{Maintenance: ptr(true)}, []string{"b"}},
		{"maintenance false", NodeQuery{Maintenance: ptr(false)}, []string{"a", "c"}},
		{"driver", NodeQuery{Driver: ptr("ipmi")}, []string{"b"}},
		{"associated", NodeQuery{Associated: ptr(true)}, []string{"b"}},
		{"not associated", NodeQuery{Associated: ptr(false)}, []string{"a", "c"}},
		{"instance uuid", NodeQuery{InstanceUUID: ptr(inst)}, []string{"b"}},
		{"chassis", NodeQuery{ChassisUUID: ptr(chassis)}, []string{"c"}},
		{"conductor groups", NodeQuery{ConductorGroups: []string{"g1", "g2"}}, []string{"a", "c"}},
		{"conductor group default", NodeQuery{ConductorGroups: []string{""}}, []string{"b"}},
		{"conductor groups empty", NodeQuery{ConductorGroups: []string{}}, []string{}},
		{"fault", NodeQuery{Fault: ptr("power failure")}, []string{"b"}},
		{"resource class", NodeQuery{ResourceClass: ptr("rc1")}, []string{"a"}},
		{"owner", NodeQuery{Owner: ptr("o1")}, []string{"a"}},
		{"lessee", NodeQuery{Lessee: ptr("l1")}, []string{"b"}},
		{"description contains", NodeQuery{DescriptionContains: ptr("rack 1")}, []string{"a", "b"}},
		{"description wildcard is literal %", NodeQuery{DescriptionContains: ptr("5%")}, []string{"a"}},
		{"description wildcard is literal _", NodeQuery{DescriptionContains: ptr("_")}, []string{"c"}},
		{"retired", NodeQuery{Retired: ptr(true)}, []string{"c"}},
		{"not retired", NodeQuery{Retired: ptr(false)}, []string{"a", "b"}},
		{"shards", NodeQuery{Shards: []string{"s1", "s3"}}, []string{"a"}},
		{"shards empty", NodeQuery{Shards: []string{}}, []string{}},
		{"sharded", NodeQuery{Sharded: ptr(true)}, []string{"a", "b"}},
		{"not sharded", NodeQuery{Sharded: ptr(false)}, []string{"c"}},
		{"reserved", NodeQuery{Reserved: ptr(true)}, []string{"c"}},
		{"not reserved", NodeQuery{Reserved: ptr(false)}, []string{"a", "b"}},
		{"combined", NodeQuery{Maintenance: ptr(false), Sharded: ptr(true)}, []string{"a"}},
		{"limit", NodeQuery{Page: Page{Limit: 2}}, []string{"a", "b"}},
	})
}

func TestListNodesPagination(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []string{"available", "active", "enroll"}
	const count = 23
	for i := 0; i < count; i++ {
		n := newNode(fmt.Sprintf("n%02d", (i*7)%count)) // names not in id order
		n.ProvisionState = states[i%3]
		n.Maintenance = i%4 == 0
		n.CreatedAt = base.Add(time.Duration(i%5) * time.Microsecond) // ties
		if i%3 != 0 {
			n.Owner = ptr(fmt.Sprintf("owner-%d", i%4)) // NULLs and ties
		}
		if i%2 == 0 {
			n.ProvisionUpdatedAt = ptr(base.Add(time.Duration(count-i) * time.Second))
		}
		mustCreateNode(t, s, n)
	}
	all, err := s.ListNodes(ctx, NodeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	// Expected orders, computed in Go: NULL first ascending, id breaks ties.
	type key struct {
		null bool
		v    string
	}
	keyOf := map[string]func(n *Node) key{
		"":                func(n *Node) key { return key{v: fmt.Sprintf("%020d", n.ID)} },
		"id":              func(n *Node) key { return key{v: fmt.Sprintf("%020d", n.ID)} },
		"name":            func(n *Node) key { return key{v: deref(n.Name)} },
		"provision_state": func(n *Node) key { return key{v: n.ProvisionState} },
		"maintenance":     func(n *Node) key { return key{v: fmt.Sprint(n.Maintenance)} },
		"created_at":      func(n *Node) key { return key{v: formatTime(n.CreatedAt)} },
		"owner":           func(n *Node) key { return key{null: n.Owner == nil, v: deref(n.Owner)} },
		"provision_updated_at": func(n *Node) key {
			if n.ProvisionUpdatedAt == nil {
				return key{null: true}
			}
			return key{v: formatTime(*n.ProvisionUpdatedAt)}
		},
	}
	less := func(a, b key) int {
		switch {
		case a.null && !b.null:
			return -1
		case !a.null && b.null:
			return 1
		}
		return strings.Compare(a.v, b.v)
	}
	for sortKey, kf := range keyOf {
		for _, dir := range []SortDir{"", Asc, Desc} {
			want := append([]*Node(nil), all...)
			sort.SliceStable(want, func(i, j int) bool {
				c := less(kf(want[i]), kf(want[j]))
				if c == 0 {
					c = int(want[i].ID - want[j].ID)
				}
				if dir == Desc {
					return c > 0
				}
				return c < 0
			})
			full, err := s.ListNodes(ctx, NodeQuery{Page: Page{SortKey: sortKey, SortDir: dir}})
			if err != nil {
				t.Fatalf("%s %s: %v", sortKey, dir, err)
			}
			if !reflect.DeepEqual(names(full), names(want)) {
				t.Fatalf("sort %q %q:\n got %v\nwant %v", sortKey, dir, names(full), names(want))
			}
			for _, limit := range []int{1, 4, 7, count} {
				var walked []*Node
				marker := ""
				for pages := 0; ; pages++ {
					if pages > count+1 {
						t.Fatalf("%s %s limit %d: pagination does not end", sortKey, dir, limit)
					}
					page, err := s.ListNodes(ctx, NodeQuery{Page: Page{Limit: limit, Marker: marker, SortKey: sortKey, SortDir: dir}})
					if err != nil {
						t.Fatalf("%s %s limit %d: %v", sortKey, dir, limit, err)
					}
					if len(page) > limit {
						t.Fatalf("page of %d > limit %d", len(page), limit)
					}
					walked = append(walked, page...)
					if len(page) < limit {
						break
					}
					marker = page[len(page)-1].UUID
				}
				if !reflect.DeepEqual(names(walked), names(want)) {
					t.Fatalf("sort %q %q limit %d walked:\n got %v\nwant %v", sortKey, dir, limit, names(walked), names(want))
				}
			}
		}
	}

	t.Run("marker with filter", func(t *testing.T) {
		q := NodeQuery{ProvisionState: ptr("active"), Page: Page{Limit: 2}}
		first, err := s.ListNodes(ctx, q)
		if err != nil || len(first) != 2 {
			t.Fatalf("%v %v", first, err)
		}
		q.Marker = first[1].UUID
		q.Limit = 0
		rest, err := s.ListNodes(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range rest {
			if n.ProvisionState != "active" || n.ID <= first[1].ID {
				t.Fatalf("unexpected node %s in rest", deref(n.Name))
			}
		}
		if len(first)+len(rest) != 8 {
			t.Fatalf("got %d active nodes, want 8", len(first)+len(rest))
		}
	})

	bad := []struct {
		name string
		page Page
		msg  string
	}{
		{"json sort key", Page{SortKey: "properties"}, "storage: invalid sort_key \"properties\""},
		{"unknown sort key", Page{SortKey: "id; DROP TABLE nodes"}, "storage: invalid sort_key \"id; DROP TABLE nodes\""},
		{"sort dir", Page{SortDir: "up"}, "storage: invalid sort_dir \"up\""},
		{"negative limit", Page{Limit: -1}, "storage: invalid limit \"-1\""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ListNodes(ctx, NodeQuery{Page: tc.page})
			wantKind(t, err, fault.Invalid, tc.msg)
		})
	}
}

func TestListNodesProjectionReadsUUID(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	n := &Node{UUID: "8a1b4b38-3a0c-4c5a-9a57-111111111111", Driver: "fake-hardware", ProvisionState: "manageable", CreatedAt: time.Now()}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListNodes(ctx, NodeQuery{Columns: []string{"provision_state"}, IncludeChildren: true})
	if err != nil || len(got) != 1 || got[0].UUID != n.UUID || got[0].ProvisionState != "manageable" {
		t.Fatalf("projection: %v %+v", err, got)
	}
}
