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

// TestLatestBootEvents: one event per node, the newest since the cut-off,
// with MAC-only events (TFTP) given the node of their port.
func TestLatestBootEvents(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a, b := newNode("a"), newNode("b")
	for _, n := range []*Node{a, b} {
		if err := s.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreatePort(ctx, &Port{NodeUUID: b.UUID, Address: "52:54:00:ee:01:02"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	evs := []BootEvent{
		{At: t0, MAC: "52:54:00:ee:01:01", NodeUUID: a.UUID, Kind: "dhcp_discover"}, // before the cut-off
		{At: t0.Add(2 * time.Minute), MAC: "52:54:00:ee:01:01", NodeUUID: a.UUID, Kind: "dhcp_ack"},
		{At: t0.Add(3 * time.Minute), MAC: "52:54:00:ee:01:01", Kind: "tftp_served", Detail: "file=undionly.kpxe"}, // no port: no node
		{At: t0.Add(2 * time.Minute), MAC: "52:54:00:ee:01:02", NodeUUID: b.UUID, Kind: "dhcp_ack"},
		{At: t0.Add(4 * time.Minute), MAC: "52:54:00:ee:01:02", Kind: "tftp_served", Detail: "file=snponly.efi"},
		{At: t0.Add(5 * time.Minute), MAC: "52:54:00:ee:09:09", Kind: "dhcp_ignored"}, // unknown machine
	}
	if err := s.AddBootEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, err := s.LatestBootEvents(ctx, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d events, want one per node: %+v", len(got), got)
	}
	if got[0].NodeUUID != a.UUID || got[0].Kind != "dhcp_ack" {
		t.Errorf("node a: %+v", got[0])
	}
	if got[1].NodeUUID != b.UUID || got[1].Kind != "tftp_served" || got[1].Detail != "file=snponly.efi" || !got[1].At.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("node b: %+v", got[1])
	}
	if got, err := s.LatestBootEvents(ctx, time.Now()); err != nil || len(got) != 0 {
		t.Errorf("since now: %+v %v", got, err)
	}
}
