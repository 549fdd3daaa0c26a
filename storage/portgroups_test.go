package storage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func TestPortgroupRoundTrip(t *testing.T) {
	s, nodes := openWithNodes(t, "a")
	a := nodes[0]
	full := &Portgroup{
		UUID: uuid.NewString(), Name: ptr("bond0"), NodeUUID: a.UUID, Address: ptr("52:54:00:AB:CD:EF"),
		Extra: JSONObject{"k": "v"}, InternalInfo: JSONObject{"tenant_vif_port_id": "vif"},
		StandalonePortsSupported: true, Mode: ptr("802.3ad"), Properties: JSONObject{"miimon": float64(100)},
		PhysicalNetwork: ptr("physnet1"), Category: ptr("bond"), DynamicPortgroup: true,
		CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreatePortgroup, full)
	if *full.Address != "52:54:00:ab:cd:ef" || full.ID == 0 {
		t.Fatalf("address %s id %d", *full.Address, full.ID)
	}
	wantStored(t, s.GetPortgroup, full, full.UUID, "bond0")
	minimal := &Portgroup{NodeUUID: a.UUID}
	mustCreate(t, s.CreatePortgroup, minimal)
	wantStored(t, s.GetPortgroup, minimal, minimal.UUID)
	if minimal.Address != nil || minimal.Name != nil || minimal.Properties == nil || minimal.StandalonePortsSupported {
		t.Fatalf("minimal round trip: %+v", minimal)
	}
}

func TestPortgroupErrors(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a")
	a := nodes[0]
	pg := &Portgroup{NodeUUID: a.UUID, Name: ptr("bond0"), Address: ptr("52:54:00:00:00:01")}
	mustCreate(t, s.CreatePortgroup, pg)
	missingNode := uuid.NewString()
	tests := []struct {
		name string
		pg   *Portgroup
		kind fault.Kind
		msg  string
	}{
		{"uuid", &Portgroup{UUID: pg.UUID, NodeUUID: a.UUID}, fault.Conflict, "storage: portgroups (uuid)=(" + pg.UUID + ") already exists"},
		{"name", &Portgroup{NodeUUID: a.UUID, Name: ptr("bond0")}, fault.Conflict, "storage: portgroups (name)=(bond0) already exists"},
		{"address any case", &Portgroup{NodeUUID: a.UUID, Address: ptr("52:54:00:00:00:01")}, fault.Conflict, "storage: portgroups (address)=(52:54:00:00:00:01) already exists"},
		{"unknown node", &Portgroup{NodeUUID: missingNode}, fault.NotFound, "storage: no nodes row " + missingNode},
		{"bad uuid", &Portgroup{UUID: "nope", NodeUUID: a.UUID}, fault.Invalid, "storage: invalid uuid \"nope\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantKind(t, s.CreatePortgroup(ctx, tc.pg), tc.kind, tc.msg)
		})
	}
	// A port may share a portgroup's MAC (a bond takes one of its NICs').
	if err := s.CreatePort(ctx, &Port{NodeUUID: a.UUID, Address: "52:54:00:00:00:01"}); err != nil {
		t.Fatalf("port with the portgroup's MAC: %v", err)
	}
	_, err := s.GetPortgroup(ctx, "nope")
	wantKind(t, err, fault.NotFound, "storage: no portgroups row nope")
	missing := uuid.NewString()
	_, err = s.UpdatePortgroup(ctx, missing, func(*Portgroup) error { return nil })
	wantKind(t, err, fault.NotFound, "storage: no portgroups row "+missing)
	wantKind(t, s.DeletePortgroup(ctx, missing), fault.NotFound, "storage: no portgroups row "+missing)
}

func TestListPortgroups(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	var pgs []*Portgroup
	for i, n := range []*Node{a, b, a, a} {
		pg := &Portgroup{NodeUUID: n.UUID, Name: ptr(fmt.Sprintf("pg%d", i)), Address: ptr(fmt.Sprintf("52:54:00:00:00:%02x", i))}
		mustCreate(t, s.CreatePortgroup, pg)
		pgs = append(pgs, pg)
	}
	checkLists(t, s.ListPortgroups, func(pg *Portgroup) string { return deref(pg.Name) }, []listCase[PortgroupQuery]{
		{"all", PortgroupQuery{}, []string{"pg0", "pg1", "pg2", "pg3"}},
		{"node", PortgroupQuery{NodeUUID: ptr(a.UUID)}, []string{"pg0", "pg2", "pg3"}},
		{"unknown address", PortgroupQuery{Address: ptr("52:54:00:00:00:0A")}, []string{}},
		{"address", PortgroupQuery{Address: ptr("52:54:00:00:00:01")}, []string{"pg1"}},
		{"node, after marker, limit", PortgroupQuery{NodeUUID: ptr(a.UUID), Page: Page{Marker: pgs[0].UUID, Limit: 1}}, []string{"pg2"}},
		{"by name desc", PortgroupQuery{Page: Page{SortKey: "name", SortDir: Desc}}, []string{"pg3", "pg2", "pg1", "pg0"}},
	})
	wantListRefusals(t, func(p Page) error { return mustErr(s.ListPortgroups(ctx, PortgroupQuery{Page: p})) }, "portgroups", uuid.NewString(), "properties")
}

func TestUpdatePortgroup(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	pg := &Portgroup{NodeUUID: a.UUID, Name: ptr("bond0"), StandalonePortsSupported: true}
	other := &Portgroup{NodeUUID: a.UUID, Name: ptr("bond1"), Address: ptr("52:54:00:00:00:09")}
	for _, p := range []*Portgroup{pg, other} {
		mustCreate(t, s.CreatePortgroup, p)
	}
	out, err := s.UpdatePortgroup(ctx, pg.UUID, func(p *Portgroup) error {
		p.NodeUUID = b.UUID
		p.Address = ptr("52:54:00:AA:BB:CC")
		p.StandalonePortsSupported = false
		p.Mode = ptr("balance-rr")
		p.Name = nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetPortgroup(ctx, pg.UUID)
	if !reflect.DeepEqual(got, out) || got.NodeUUID != b.UUID || *got.Address != "52:54:00:aa:bb:cc" ||
		got.StandalonePortsSupported || *got.Mode != "balance-rr" || got.Name != nil || got.UpdatedAt == nil {
		t.Fatalf("after update: %+v", got)
	}
	_, err = s.UpdatePortgroup(ctx, pg.UUID, func(p *Portgroup) error { p.Name = ptr("bond1"); return nil })
	wantKind(t, err, fault.Conflict, "storage: portgroups (name)=(bond1) already exists")
	_, err = s.UpdatePortgroup(ctx, pg.UUID, func(p *Portgroup) error { p.Address = ptr("52:54:00:00:00:09"); return nil })
	wantKind(t, err, fault.Conflict, "storage: portgroups (address)=(52:54:00:00:00:09) already exists")
	missing := uuid.NewString()
	_, err = s.UpdatePortgroup(ctx, pg.UUID, func(p *Portgroup) error { p.NodeUUID = missing; return nil })
	wantKind(t, err, fault.NotFound, "storage: no nodes row "+missing)
	sentinel := errors.New("no")
	if _, err := s.UpdatePortgroup(ctx, pg.UUID, func(p *Portgroup) error { p.Mode = nil; return sentinel }); err != sentinel {
		t.Fatalf("err = %v, want sentinel", err)
	}
	if again, _ := s.GetPortgroup(ctx, pg.UUID); !reflect.DeepEqual(again, got) {
		t.Fatalf("failed updates changed the portgroup: %+v", again)
	}
}

func TestDeletePortgroup(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a")
	a := nodes[0]
	pg := &Portgroup{NodeUUID: a.UUID}
	mustCreate(t, s.CreatePortgroup, pg)
	p := &Port{NodeUUID: a.UUID, Address: "52:54:00:00:00:01", PortgroupUUID: ptr(pg.UUID)}
	mustCreate(t, s.CreatePort, p)
	err := s.DeletePortgroup(ctx, pg.UUID)
	wantKind(t, err, fault.Conflict, fmt.Sprintf("storage: portgroups %d is in use by ports", pg.ID))
	if err := s.DeletePort(ctx, p.UUID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePortgroup(ctx, pg.UUID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetPortgroup(ctx, pg.UUID)
	wantKind(t, err, fault.NotFound, "")
}

func TestDeleteNodeRemovesPortgroups(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	pa := &Portgroup{NodeUUID: a.UUID, Name: ptr("a-bond")}
	pb := &Portgroup{NodeUUID: b.UUID, Name: ptr("b-bond")}
	for _, pg := range []*Portgroup{pa, pb} {
		mustCreate(t, s.CreatePortgroup, pg)
	}
	mustCreate(t, s.CreatePort, &Port{NodeUUID: a.UUID, Address: "52:54:00:00:00:01", PortgroupUUID: ptr(pa.UUID)})
	if err := s.DeleteNode(ctx, a.UUID); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetPortgroup(ctx, pa.UUID)
	wantKind(t, err, fault.NotFound, "")
	if _, err := s.GetPortgroup(ctx, pb.UUID); err != nil {
		t.Fatalf("other node's portgroup: %v", err)
	}
}
