package dhcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// leaseState is a full-mode server's leases: the in-memory index, filled
// once from the store, and the writer that makes new leases durable. The
// DHCPv4 server keys its index on IPv4 addresses, the DHCPv6 server on the
// low 64 bits of addresses in one /64.
type leaseState[K addrKey] struct {
	idx    *index[K]
	store  LeaseStore
	writer *leaseWriter
	// key maps a stored address to the index's key; false for addresses
	// this server does not hand out (another family, another prefix).
	key func(netip.Addr) (K, bool)

	loadMu sync.Mutex
	loaded atomic.Bool
}

func newLeaseState[K addrKey](p pool[K], hold time.Duration, store LeaseStore, key func(netip.Addr) (K, bool)) leaseState[K] {
	return leaseState[K]{idx: newIndex(p, hold), store: store, writer: &leaseWriter{store: store}, key: key}
}

// ensureLoaded fills the index from the store once (no-op without an
// index: proxy mode).
func (l *leaseState[K]) ensureLoaded(ctx context.Context, log *slog.Logger, now time.Time) error {
	if l.loaded.Load() || l.idx == nil {
		return nil
	}
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	if l.loaded.Load() {
		return nil
	}
	ls, err := l.store.ListLeases(ctx)
	if err != nil {
		return fmt.Errorf("dhcp: load leases: %w", err)
	}
	for _, lease := range ls {
		hw, err := net.ParseMAC(lease.MAC)
		k, ok := l.key(lease.IP)
		if err != nil || len(hw) != 6 || !ok {
			continue
		}
		var mac hwaddr
		copy(mac[:], hw)
		l.idx.load(mac, k, lease.Expires)
	}
	l.loaded.Store(true)
	bound, live := l.idx.counts(now)
	log.Info("dhcp leases loaded", "bound", bound, "live", live)
	return nil
}

// macFor names the machine holding key (leased or offered); "" when none
// or without an index.
func (l *leaseState[K]) macFor(key K) string {
	if l.idx == nil {
		return ""
	}
	l.idx.mu.Lock()
	defer l.idx.mu.Unlock()
	if b := l.idx.byIP[key]; b != nil {
		return net.HardwareAddr(b.mac[:]).String()
	}
	return ""
}
