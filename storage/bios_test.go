package storage

import (
	"context"
	"testing"
)

// TestBIOSSettingsSync: SetBIOSSettings creates, updates (updated_at set,
// created_at kept), leaves unchanged rows alone and deletes what the BMC
// no longer reports; deleting the node deletes its settings.
func TestBIOSSettingsSync(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := mustCreateNode(t, s, newNode("bios"))
	lo, hi, yes := int64(-5), int64(31), true
	first := []BIOSSetting{
		{Name: "A", Value: ptr("Enabled"), AttributeType: ptr("Enumeration"), AllowableValues: []string{"Enabled", "Disabled"}, ResetRequired: &yes},
		{Name: "B", Value: ptr("0"), AttributeType: ptr("Integer"), LowerBound: &lo, UpperBound: &hi},
		{Name: "C", Value: nil},
	}
	if err := s.SetBIOSSettings(ctx, n.UUID, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListBIOSSettings(ctx, n.UUID)
	if err != nil || len(got) != 3 {
		t.Fatalf("%v %v", got, err)
	}
	a, b, c := got[0], got[1], got[2]
	if a.Name != "A" || *a.Value != "Enabled" || len(a.AllowableValues) != 2 || !*a.ResetRequired || a.ReadOnly != nil || a.UpdatedAt != nil || a.CreatedAt.IsZero() ||
		*b.LowerBound != -5 || *b.UpperBound != 31 || b.AllowableValues != nil || c.Value != nil || c.AttributeType != nil {
		t.Fatalf("stored %+v %+v %+v", a, b, c)
	}
	second := []BIOSSetting{first[0], {Name: "B", Value: ptr("4"), AttributeType: ptr("Integer"), LowerBound: &lo, UpperBound: &hi}}
	if err := s.SetBIOSSettings(ctx, n.UUID, second); err != nil {
		t.Fatal(err)
	}
	got, _ = s.ListBIOSSettings(ctx, n.UUID)
	if len(got) != 2 || got[0].UpdatedAt != nil || *got[1].Value != "4" || got[1].UpdatedAt == nil || !got[1].CreatedAt.Equal(b.CreatedAt) {
		t.Fatalf("after sync %+v", got)
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListBIOSSettings(ctx, n.UUID); err != nil || len(got) != 0 {
		t.Fatalf("after node delete: %v %v", got, err)
	}
}
