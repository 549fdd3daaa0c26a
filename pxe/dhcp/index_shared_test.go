package dhcp

import (
	"testing"
	"time"
)

// TestHeldElsewhere: two conductors on one segment share the lease table.
// When the database refuses a lease because another conductor's client
// holds the address, this index learns it: the refused MAC is offered
// another address next, and the address is not offered again until the
// other lease ends.
func TestHeldElsewhere(t *testing.T) {
	now := time.Now()
	x := newIndex(pool[uint32]{first: 10, last: 12, reserved: [2]uint32{1, 2}}, time.Minute)
	mine, theirs, third := hwaddr{0x52, 0x54, 0, 0, 0, 1}, hwaddr{0x52, 0x54, 0, 0, 0, 2}, hwaddr{0x52, 0x54, 0, 0, 0, 3}
	ip, ok := x.offer(mine, 0, now)
	if !ok || !x.claim(mine, ip, now) {
		t.Fatalf("offer/claim: %d %v", ip, ok)
	}
	// The commit of mine's lease on ip failed: the other conductor's
	// client holds it for an hour.
	x.heldElsewhere(mine, ip, theirs, true, now.Add(time.Hour))
	again, ok := x.offer(mine, ip, now)
	if !ok || again == ip {
		t.Fatalf("after a refused lease %s was offered %d again (ok %v)", "mine", again, ok)
	}
	if x.claim(third, ip, now) {
		t.Fatalf("address held by another conductor's client claimed")
	}
	// Unknown holder: the address is quarantined.
	x.heldElsewhere(mine, again, hwaddr{}, false, now.Add(time.Hour))
	if x.claim(third, again, now) {
		t.Fatalf("address refused by the database (holder unknown) claimed")
	}
	// Once the other lease ended, the address is free again.
	if !x.claim(third, ip, now.Add(2*time.Hour)) {
		t.Fatalf("address not free after the other conductor's lease ended")
	}
}
