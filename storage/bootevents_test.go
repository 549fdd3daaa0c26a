package storage

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestAddBootEventsChunks: a batch larger than one INSERT's rows (256 + 32 + 8
// + 4 here) is stored whole, in order, each row with its own values, and
// listed by node or by MAC.
func TestAddBootEventsChunks(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	const n = 300
	evs := make([]BootEvent, n)
	for i := range evs {
		evs[i] = BootEvent{At: t0.Add(time.Duration(i) * time.Millisecond), MAC: fmt.Sprintf("52:54:00:EE:00:%02X", i%4),
			Kind: "dhcp_discover", Detail: fmt.Sprintf("event %d", i)}
		if i%2 == 0 {
			evs[i].NodeUUID = "1be26c0b-03f2-4d2d-ae87-c02d7f33c123"
		}
	}
	if err := s.AddBootEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListBootEvents(ctx, BootEventQuery{MACs: []string{"52:54:00:ee:00:00", "52:54:00:ee:00:01", "52:54:00:ee:00:02", "52:54:00:ee:00:03"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d events listed, want %d", len(got), n)
	}
	for i, e := range got {
		want := evs[i]
		if e.Detail != want.Detail || e.MAC != fmt.Sprintf("52:54:00:ee:00:%02x", i%4) || e.Kind != want.Kind ||
			!e.At.Equal(want.At) || e.NodeUUID != want.NodeUUID {
			t.Fatalf("event %d = %+v, want %+v", i, e, want)
		}
	}
	byNode, err := s.ListBootEvents(ctx, BootEventQuery{NodeUUID: "1be26c0b-03f2-4d2d-ae87-c02d7f33c123"})
	if err != nil || len(byNode) != n/2 {
		t.Fatalf("by node: %d events, %v", len(byNode), err)
	}
}
