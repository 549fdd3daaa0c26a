package storage

import (
	"context"
	"slices"
	"testing"
)

// TestPortAddresses: every port's address, none of a deleted node's.
func TestPortAddresses(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if got, err := s.PortAddresses(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v %v", got, err)
	}
	a, b := mustCreateNode(t, s, newNode("pa-a")), mustCreateNode(t, s, newNode("pa-b"))
	for _, p := range []*Port{
		{NodeUUID: a.UUID, Address: "52:54:00:aa:00:01"},
		{NodeUUID: a.UUID, Address: "52:54:00:aa:00:02"},
		{NodeUUID: b.UUID, Address: "52:54:00:bb:00:01"},
	} {
		if err := s.CreatePort(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteNode(ctx, b.UUID); err != nil {
		t.Fatal(err)
	}
	got, err := s.PortAddresses(ctx)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"52:54:00:aa:00:01", "52:54:00:aa:00:02"}) {
		t.Fatalf("PortAddresses = %v, %v", got, err)
	}
}
