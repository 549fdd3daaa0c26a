package dhcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Lease is one address binding. It is keyed on the client's hardware address
// (chaddr), never on option 61, so a machine keeps its address from firmware
// PXE through iPXE to the ramdisk.
type Lease struct {
	MAC string     // aa:bb:cc:dd:ee:ff, lower case
	IP  netip.Addr // IPv4
	// Expires is when the lease ends. An expired lease still ties the
	// address to the MAC until another MAC takes the address over.
	Expires   time.Time
	NodeUUID  string // the node the boot gate matched; empty when unknown
	UpdatedAt time.Time
}

// LeaseConflictError is what a LeaseStore returns (possibly wrapped) when a
// lease's address is held by another MAC whose lease has not expired.
type LeaseConflictError struct {
	IP     netip.Addr
	HeldBy string
}

// holder is HeldBy as an index key; false when it is not a MAC (unknown).
func (e *LeaseConflictError) holder() (hwaddr, bool) {
	var h hwaddr
	hw, err := net.ParseMAC(e.HeldBy)
	if err != nil || len(hw) != len(h) {
		return h, false
	}
	copy(h[:], hw)
	return h, true
}

func (e *LeaseConflictError) Error() string {
	return fmt.Sprintf("address %s is leased to %s", e.IP, e.HeldBy)
}

// LeaseStore keeps leases durable. PutLeases stores all of ls in one
// transaction and returns once they are durable: errs[i] is the outcome of
// ls[i] (a *LeaseConflictError when its address is taken), err (nothing
// stored) when the store failed.
type LeaseStore interface {
	ListLeases(ctx context.Context) ([]Lease, error)
	PutLeases(ctx context.Context, ls []Lease) (errs []error, err error)
	DeleteLease(ctx context.Context, mac string) error
}
