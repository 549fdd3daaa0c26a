package engine

import (
	"context"
	"net"
	"testing"

	"castiron/storage"
)

// TestBootTargetCacheFollowsWrites: the gate's answers are cached per MAC
// and its port addresses as a set, yet every committed write through the
// conductor shows at once: a new port makes its MAC known, a changed port
// address moves the answer, a node leaving a boot state is refused.
func TestBootTargetCacheFollowsWrites(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	n := h.nodeIn(t, InspectWait, nil)
	macA, _ := net.ParseMAC("52:54:00:b0:00:0a")
	macB, _ := net.ParseMAC("52:54:00:b0:00:0b")

	// The node has no port: an unknown MAC is served (portless inspection),
	// as anonymous.
	for range 3 {
		if d, ok := h.c.BootTarget(ctx, macA); !ok || d.NodeUUID != "" {
			t.Fatalf("portless inspection: %+v %v", d, ok)
		}
	}
	p := &storage.Port{NodeUUID: n.UUID, Address: macA.String()}
	if err := h.c.CreatePort(ctx, p); err != nil {
		t.Fatal(err)
	}
	if d, ok := h.c.BootTarget(ctx, macA); !ok || d.NodeUUID != n.UUID {
		t.Fatalf("after port create: %+v %v", d, ok)
	}
	// The node has a port now: other MACs are nobody's.
	if _, ok := h.c.BootTarget(ctx, macB); ok {
		t.Fatal("unknown MAC served while no portless node is inspected")
	}
	if _, err := h.c.UpdatePort(ctx, p.UUID, func(p *storage.Port) error { p.Address = macB.String(); return nil }); err != nil {
		t.Fatal(err)
	}
	if d, ok := h.c.BootTarget(ctx, macB); !ok || d.NodeUUID != n.UUID {
		t.Fatalf("after the address moved: %+v %v", d, ok)
	}
	if _, ok := h.c.BootTarget(ctx, macA); ok {
		t.Fatal("old address still served")
	}
	// Out of inspect wait (as abort does): refused at once.
	if _, err := h.c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		n.ProvisionState = string(InspectFail)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.c.BootTarget(ctx, macB); ok {
		t.Fatal("node in inspect failed still served")
	}
}
