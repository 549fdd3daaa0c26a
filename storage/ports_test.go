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

func TestPorts(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	pg := uuid.NewString()
	full := &Port{
		UUID: uuid.NewString(), Name: ptr("eth0"), NodeUUID: a.UUID, PortgroupUUID: ptr(pg),
		Address:             "52:54:00:AB:CD:EF",
		LocalLinkConnection: JSONObject{"switch_id": "aa:bb", "port_id": "Gi0/1"},
		PXEEnabled:          true, PhysicalNetwork: ptr("physnet1"),
		InternalInfo: JSONObject{"tenant_vif_port_id": "x"}, Extra: JSONObject{"k": "v"},
		IsSmartNIC: true, Description: ptr("uplink"), Vendor: ptr("acme"), Category: ptr("fast"), AvailableForDynamicPortgroup: true, CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreatePort, full)
	if full.Address != "52:54:00:ab:cd:ef" || full.ID == 0 {
		t.Fatalf("address %s id %d", full.Address, full.ID)
	}
	wantStored(t, s.GetPort, full, full.UUID)
	minimal := &Port{NodeUUID: b.UUID, Address: "52:54:00:00:00:01"}
	mustCreate(t, s.CreatePort, minimal)
	wantStored(t, s.GetPort, minimal, minimal.UUID)
	if minimal.Extra == nil || minimal.Name != nil {
		t.Fatalf("minimal round trip: %+v", minimal)
	}
	byAddr, err := s.GetPortByAddress(ctx, "52:54:00:Ab:cD:eF")
	if err != nil || byAddr.UUID != full.UUID {
		t.Fatalf("GetPortByAddress = %v, %v", byAddr, err)
	}
	for i := 2; i < 6; i++ {
		p := &Port{NodeUUID: a.UUID, Address: fmt.Sprintf("52:54:00:00:00:%02x", i)}
		mustCreate(t, s.CreatePort, p)
	}

	checkLists(t, s.ListPorts, func(p *Port) string { return p.Address }, []listCase[PortQuery]{
		{"all", PortQuery{}, []string{"52:54:00:ab:cd:ef", "52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03", "52:54:00:00:00:04", "52:54:00:00:00:05"}},
		{"node", PortQuery{NodeUUID: ptr(b.UUID)}, []string{"52:54:00:00:00:01"}},
		{"address any case", PortQuery{Address: ptr("52:54:00:AB:CD:EF")}, []string{"52:54:00:ab:cd:ef"}},
		{"portgroup", PortQuery{PortgroupUUID: ptr(pg)}, []string{"52:54:00:ab:cd:ef"}},
		{"sorted by address desc, limit", PortQuery{Page: Page{SortKey: "address", SortDir: Desc, Limit: 2}}, []string{"52:54:00:ab:cd:ef", "52:54:00:00:00:05"}},
		{"node, after marker", PortQuery{NodeUUID: ptr(a.UUID), Page: Page{Marker: full.UUID, Limit: 2}}, []string{"52:54:00:00:00:02", "52:54:00:00:00:03"}},
	})
	_, err = s.ListPorts(ctx, PortQuery{Page: Page{SortKey: "extra"}})
	wantKind(t, err, fault.Invalid, "storage: invalid sort_key \"extra\"")

	t.Run("update", func(t *testing.T) {
		out, err := s.UpdatePort(ctx, full.UUID, func(p *Port) error {
			p.Address = "52:54:00:FF:FF:FF"
			p.NodeUUID = b.UUID
			p.PXEEnabled = false
			p.Name = nil
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetPort(ctx, full.UUID)
		if !reflect.DeepEqual(got, out) || got.Address != "52:54:00:ff:ff:ff" || got.NodeUUID != b.UUID || got.PXEEnabled || got.Name != nil || got.UpdatedAt == nil {
			t.Fatalf("after update: %+v", got)
		}
		sentinel := errors.New("no")
		if _, err := s.UpdatePort(ctx, full.UUID, func(p *Port) error { p.Address = "x"; return sentinel }); err != sentinel {
			t.Fatalf("err = %v, want sentinel", err)
		}
		missing := uuid.NewString()
		_, err = s.UpdatePort(ctx, full.UUID, func(p *Port) error { p.NodeUUID = missing; return nil })
		wantKind(t, err, fault.NotFound, "storage: no nodes row "+missing)
		if again, _ := s.GetPort(ctx, full.UUID); !reflect.DeepEqual(again, got) {
			t.Fatalf("failed updates changed the port: %+v", again)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := s.DeletePort(ctx, minimal.UUID); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetPort(ctx, minimal.UUID)
		wantKind(t, err, fault.NotFound, "")
	})
}
