package storage

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func TestVolumeConnectors(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]

	full := &VolumeConnector{
		UUID: strings.ToUpper(uuid.NewString()), NodeUUID: a.UUID, Type: "iqn",
		ConnectorID: "iqn.2017-05.org.openstack:01:d9a51732c3f", Extra: JSONObject{"k": "v"},
		CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreateVolumeConnector, full)
	if full.ID == 0 || full.UUID != strings.ToLower(full.UUID) {
		t.Fatalf("id %d uuid %s", full.ID, full.UUID)
	}
	wantStored(t, s.GetVolumeConnector, full, strings.ToUpper(full.UUID))
	minimal := &VolumeConnector{NodeUUID: b.UUID, Type: "wwpn", ConnectorID: "50:01"}
	mustCreate(t, s.CreateVolumeConnector, minimal)
	wantStored(t, s.GetVolumeConnector, minimal, minimal.UUID)
	if minimal.Extra == nil || minimal.UpdatedAt != nil {
		t.Fatalf("minimal round trip: %+v", minimal)
	}

	// Duplicates and unknown references, with Ironic's messages.
	err := s.CreateVolumeConnector(ctx, &VolumeConnector{NodeUUID: b.UUID, Type: "iqn", ConnectorID: full.ConnectorID})
	wantKind(t, err, fault.Conflict, "storage: volume_connectors (type, connector_id)=(iqn, "+full.ConnectorID+") already exists")
	err = s.CreateVolumeConnector(ctx, &VolumeConnector{UUID: full.UUID, NodeUUID: b.UUID, Type: "ip", ConnectorID: "10.0.0.1"})
	wantKind(t, err, fault.Conflict, "storage: volume_connectors (uuid)=("+full.UUID+") already exists")
	missing := uuid.NewString()
	err = s.CreateVolumeConnector(ctx, &VolumeConnector{NodeUUID: missing, Type: "ip", ConnectorID: "10.0.0.1"})
	wantKind(t, err, fault.NotFound, "storage: no nodes row "+missing)
	// The same connector_id under another type is another connector.
	mustCreate(t, s.CreateVolumeConnector, &VolumeConnector{NodeUUID: a.UUID, Type: "ip", ConnectorID: full.ConnectorID})

	checkLists(t, s.ListVolumeConnectors, func(c *VolumeConnector) string { return c.Type + "/" + c.ConnectorID }, []listCase[VolumeQuery]{
		{"all in creation order", VolumeQuery{}, []string{"iqn/" + full.ConnectorID, "wwpn/50:01", "ip/" + full.ConnectorID}},
		{"node", VolumeQuery{NodeUUID: ptr(a.UUID)}, []string{"iqn/" + full.ConnectorID, "ip/" + full.ConnectorID}},
		{"sorted by type desc, limit", VolumeQuery{Page: Page{SortKey: "type", SortDir: Desc, Limit: 2}}, []string{"wwpn/50:01", "iqn/" + full.ConnectorID}},
		{"after marker", VolumeQuery{Page: Page{Marker: full.UUID}}, []string{"wwpn/50:01", "ip/" + full.ConnectorID}},
	})
	wantListRefusals(t, func(p Page) error { return mustErr(s.ListVolumeConnectors(ctx, VolumeQuery{Page: p})) }, "volume_connectors", missing, "extra")

	t.Run("update", func(t *testing.T) {
		out, err := s.UpdateVolumeConnector(ctx, full.UUID, func(c *VolumeConnector) error {
			c.NodeUUID = strings.ToUpper(b.UUID)
			c.Extra = nil
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetVolumeConnector(ctx, full.UUID)
		if !reflect.DeepEqual(got, out) || got.NodeUUID != b.UUID || len(got.Extra) != 0 || got.UpdatedAt == nil ||
			!got.CreatedAt.Equal(full.CreatedAt) {
			t.Fatalf("after update: %+v", got)
		}
		_, err = s.UpdateVolumeConnector(ctx, minimal.UUID, func(c *VolumeConnector) error {
			c.Type, c.ConnectorID = "iqn", full.ConnectorID
			return nil
		})
		wantKind(t, err, fault.Conflict, "storage: volume_connectors (type, connector_id)=(iqn, "+full.ConnectorID+") already exists")
		_, err = s.UpdateVolumeConnector(ctx, minimal.UUID, func(c *VolumeConnector) error { c.NodeUUID = missing; return nil })
		wantKind(t, err, fault.NotFound, "storage: no nodes row "+missing)
		sentinel := errors.New("no")
		if _, err := s.UpdateVolumeConnector(ctx, minimal.UUID, func(c *VolumeConnector) error { c.Type = "x"; return sentinel }); err != sentinel {
			t.Fatalf("err = %v, want sentinel", err)
		}
		if again, _ := s.GetVolumeConnector(ctx, minimal.UUID); !reflect.DeepEqual(again, minimal) {
			t.Fatalf("failed updates changed the connector: %+v", again)
		}
		_, err = s.UpdateVolumeConnector(ctx, missing, func(c *VolumeConnector) error { return nil })
		wantKind(t, err, fault.NotFound, "storage: no volume_connectors row "+missing)
	})
	t.Run("delete", func(t *testing.T) {
		if err := s.DeleteVolumeConnector(ctx, minimal.UUID); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetVolumeConnector(ctx, minimal.UUID)
		wantKind(t, err, fault.NotFound, "storage: no volume_connectors row "+minimal.UUID)
		wantKind(t, s.DeleteVolumeConnector(ctx, minimal.UUID), fault.NotFound, "")
	})
}

func TestVolumeTargets(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]

	full := &VolumeTarget{
		UUID: uuid.NewString(), NodeUUID: a.UUID, VolumeType: "iscsi",
		Properties: JSONObject{"target_iqn": "iqn.x", "target_lun": float64(0), "auth_password": "s"},
		BootIndex:  7, VolumeID: "04452bed-5367-4202-8bf5-de4335ac56d2", Extra: JSONObject{"k": "v"},
		CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreateVolumeTarget, full)
	wantStored(t, s.GetVolumeTarget, full, full.UUID)
	boot := &VolumeTarget{NodeUUID: a.UUID, VolumeType: "iscsi", VolumeID: "v0"}
	mustCreate(t, s.CreateVolumeTarget, boot)
	wantStored(t, s.GetVolumeTarget, boot, boot.UUID)
	if boot.BootIndex != 0 || boot.Properties == nil {
		t.Fatalf("minimal round trip: %+v", boot)
	}
	// boot_index is unique per node only.
	err := s.CreateVolumeTarget(ctx, &VolumeTarget{NodeUUID: a.UUID, VolumeType: "fibre_channel", VolumeID: "v1"})
	wantKind(t, err, fault.Conflict, "storage: volume_targets (node_uuid, boot_index)=("+a.UUID+", 0) already exists")
	other := &VolumeTarget{NodeUUID: b.UUID, VolumeType: "iscsi", VolumeID: "v2"}
	mustCreate(t, s.CreateVolumeTarget, other)
	err = s.CreateVolumeTarget(ctx, &VolumeTarget{UUID: full.UUID, NodeUUID: b.UUID, BootIndex: 3})
	wantKind(t, err, fault.Conflict, "storage: volume_targets (uuid)=("+full.UUID+") already exists")

	list, err := s.ListVolumeTargets(ctx, VolumeQuery{NodeUUID: ptr(a.UUID), Page: Page{SortKey: "boot_index"}})
	if err != nil || len(list) != 2 || list[0].UUID != boot.UUID || list[1].UUID != full.UUID {
		t.Fatalf("by boot_index: %v %v", list, err)
	}
	_, err = s.ListVolumeTargets(ctx, VolumeQuery{Page: Page{SortKey: "properties"}})
	wantKind(t, err, fault.Invalid, "storage: invalid sort_key \"properties\"")

	_, err = s.UpdateVolumeTarget(ctx, full.UUID, func(vt *VolumeTarget) error { vt.BootIndex = 0; return nil })
	wantKind(t, err, fault.Conflict, "storage: volume_targets (node_uuid, boot_index)=("+a.UUID+", 0) already exists")
	out, err := s.UpdateVolumeTarget(ctx, full.UUID, func(vt *VolumeTarget) error {
		vt.BootIndex, vt.NodeUUID, vt.Properties = 0, b.UUID, nil
		return nil
	})
	wantKind(t, err, fault.Conflict, "storage: volume_targets (node_uuid, boot_index)=("+b.UUID+", 0) already exists")
	out, err = s.UpdateVolumeTarget(ctx, full.UUID, func(vt *VolumeTarget) error {
		vt.BootIndex, vt.Properties = 1, nil
		return nil
	})
	if err != nil || out.BootIndex != 1 || out.Properties == nil || len(out.Properties) != 0 {
		t.Fatalf("update: %+v %v", out, err)
	}

	// A node's volume goes with it.
	if err := s.DeleteNode(ctx, a.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetVolumeTarget(ctx, boot.UUID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("target of a deleted node: %v", err)
	}
	if list, _ := s.ListVolumeTargets(ctx, VolumeQuery{}); len(list) != 1 || list[0].UUID != other.UUID {
		t.Fatalf("after node delete: %v", list)
	}
	if err := s.DeleteVolumeTarget(ctx, other.UUID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.DeleteVolumeTarget(ctx, other.UUID), fault.NotFound, "storage: no volume_targets row "+other.UUID)
}

func TestVolumeConnectorsGoWithNode(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "")
	n := nodes[0]
	c := &VolumeConnector{NodeUUID: n.UUID, Type: "mac", ConnectorID: "52:54:00:00:00:01"}
	mustCreate(t, s.CreateVolumeConnector, c)
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListVolumeConnectors(ctx, VolumeQuery{}); err != nil || len(list) != 0 {
		t.Fatalf("connectors after node delete: %v %v", list, err)
	}
}
