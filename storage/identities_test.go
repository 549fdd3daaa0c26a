package storage

import (
	"context"
	"slices"
	"testing"

	"castiron/fault"
)

func TestIdentities(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "", "")
	a, b := nodes[0].UUID, nodes[1].UUID
	serial := Identity{IdentitySystemSerial, "S1"}
	if err := s.SetIdentities(ctx, a, []Identity{{IdentityBMCAddress, "10.0.0.5"}, serial, serial}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetIdentities(ctx, b, []Identity{serial}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.NodesWithIdentity(ctx, serial); !slices.Equal(got, []string{a, b}) {
		t.Errorf("serial S1: %v", got)
	}
	if got, _ := s.NodesWithIdentity(ctx, Identity{IdentityBMCAddress, "10.0.0.5"}); !slices.Equal(got, []string{a}) {
		t.Errorf("bmc: %v", got)
	}
	// Replacing a kind drops its old values and keeps the other kinds.
	if err := s.SetIdentities(ctx, a, []Identity{{IdentityBMCAddress, "10.0.0.6"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.NodesWithIdentity(ctx, Identity{IdentityBMCAddress, "10.0.0.5"}); len(got) != 0 {
		t.Errorf("old BMC address kept: %v", got)
	}
	if got, _ := s.NodesWithIdentity(ctx, serial); !slices.Equal(got, []string{a, b}) {
		t.Errorf("after replacing the BMC address: %v", got)
	}
	if err := s.SetIdentities(ctx, a, []Identity{{IdentitySystemSerial, "S2"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.NodesWithIdentity(ctx, serial); !slices.Equal(got, []string{b}) {
		t.Errorf("after replacing the serial: %v", got)
	}
	if err := s.DeleteNode(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.NodesWithIdentity(ctx, serial); len(got) != 0 {
		t.Errorf("after delete: %v", got)
	}
	wantKind(t, s.SetIdentities(ctx, b, []Identity{serial}), fault.NotFound, "Node "+b+" could not be found.")
}
