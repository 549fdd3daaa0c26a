package storage

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func TestChassisRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	zone := time.FixedZone("X", -3*3600)
	full := &Chassis{
		UUID: uuid.NewString(), Description: ptr("rack 1, row A"),
		Extra:     JSONObject{"k": "v", "n": float64(3)},
		CreatedAt: time.Date(2024, 3, 1, 10, 0, 0, 123456789, zone), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreateChassis, full)
	if full.ID == 0 || full.CreatedAt.Location() != time.UTC || full.CreatedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("not normalized: %+v", full)
	}
	wantStored(t, s.GetChassis, full, full.UUID)
	minimal := &Chassis{}
	mustCreate(t, s.CreateChassis, minimal)
	if _, err := uuid.Parse(minimal.UUID); err != nil || minimal.CreatedAt.IsZero() || minimal.Extra == nil {
		t.Fatalf("defaults not filled: %+v", minimal)
	}
	wantStored(t, s.GetChassis, minimal, minimal.UUID)
	if minimal.Description != nil {
		t.Fatalf("minimal has a description: %+v", minimal)
	}
	// Any spelling of the UUID finds it.
	upper := &Chassis{UUID: "F0E1D2C3-B4A5-4697-8899-AABBCCDDEEFF"}
	if err := s.CreateChassis(ctx, upper); err != nil || upper.UUID != "f0e1d2c3-b4a5-4697-8899-aabbccddeeff" {
		t.Fatalf("uppercase uuid: %v %s", err, upper.UUID)
	}
	if _, err := s.GetChassis(ctx, "F0E1D2C3B4A546978899AABBCCDDEEFF"); err != nil {
		t.Fatalf("unhyphenated lookup: %v", err)
	}
}

func TestChassisErrors(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	c := &Chassis{}
	mustCreate(t, s.CreateChassis, c)
	wantUUIDRefusals(t, "chassis", s.CreateChassis, s.GetChassis, &Chassis{UUID: c.UUID}, &Chassis{UUID: "not-a-uuid"})
	missing := uuid.NewString()
	_, err := s.UpdateChassis(ctx, missing, func(*Chassis) error { return nil })
	wantKind(t, err, fault.NotFound, "storage: no chassis row "+missing)
	err = s.DeleteChassis(ctx, missing)
	wantKind(t, err, fault.NotFound, "storage: no chassis row "+missing)
}

func TestListChassis(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var all []*Chassis
	for _, d := range []string{"b", "d", "a", "c"} {
		all = append(all, mustCreate(t, s.CreateChassis, &Chassis{Description: ptr(d)}))
	}
	mustCreate(t, s.CreateChassis, &Chassis{}) // no description: NULL sorts first
	descs := func(c *Chassis) string { return deref(c.Description) }
	checkLists(t, s.ListChassis, descs, []listCase[Page]{
		{"creation order", Page{}, []string{"b", "d", "a", "c", ""}},
		{"limit", Page{Limit: 2}, []string{"b", "d"}},
		{"after marker", Page{Marker: all[1].UUID}, []string{"a", "c", ""}},
		{"by description", Page{SortKey: "description"}, []string{"", "a", "b", "c", "d"}},
		{"by description desc after marker", Page{SortKey: "description", SortDir: Desc, Marker: all[3].UUID, Limit: 2}, []string{"b", "a"}},
	})
	wantListRefusals(t, func(p Page) error { return mustErr(s.ListChassis(ctx, p)) }, "chassis", uuid.NewString(), "extra")
}

func TestUpdateChassis(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	c := &Chassis{Description: ptr("old"), Extra: JSONObject{"a": "b"}}
	mustCreate(t, s.CreateChassis, c)
	out, err := s.UpdateChassis(ctx, c.UUID, func(c *Chassis) error {
		c.Description = nil
		c.Extra = JSONObject{"x": float64(1)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetChassis(ctx, c.UUID)
	if !reflect.DeepEqual(got, out) || got.Description != nil || got.Extra["x"] != float64(1) || got.UpdatedAt == nil || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("after update: %+v", got)
	}
	sentinel := errors.New("no")
	if _, err := s.UpdateChassis(ctx, c.UUID, func(c *Chassis) error { c.Description = ptr("x"); return sentinel }); err != sentinel {
		t.Fatalf("err = %v, want sentinel", err)
	}
	if _, err := s.UpdateChassis(ctx, c.UUID, func(c *Chassis) error { c.UUID = uuid.NewString(); return nil }); err == nil {
		t.Fatal("uuid change accepted")
	}
	if again, _ := s.GetChassis(ctx, c.UUID); !reflect.DeepEqual(again, got) {
		t.Fatalf("failed updates changed the chassis: %+v", again)
	}
}

func TestDeleteChassisRefusedWhileNodesNameIt(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	c := &Chassis{}
	mustCreate(t, s.CreateChassis, c)
	n := newNode("in-chassis")
	n.ChassisUUID = ptr(c.UUID)
	mustCreateNode(t, s, n)
	err := s.DeleteChassis(ctx, c.UUID)
	wantKind(t, err, fault.Conflict, "storage: chassis "+c.UUID+" is in use by nodes")
	if _, err := s.GetChassis(ctx, c.UUID); err != nil {
		t.Fatalf("refused delete removed the chassis: %v", err)
	}
	got, err := s.ListNodes(ctx, NodeQuery{ChassisUUID: ptr(c.UUID)})
	if err != nil || len(got) != 1 || got[0].UUID != n.UUID {
		t.Fatalf("nodes of chassis = %v, %v", got, err)
	}
	if _, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) { n.ChassisUUID = nil; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChassis(ctx, c.UUID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetChassis(ctx, c.UUID)
	wantKind(t, err, fault.NotFound, "")
}
