package dhcp

import (
	"math"
	"sync"
	"time"
)

// hwaddr is an Ethernet MAC as a map key.
type hwaddr [6]byte

// addrKey is an address as the index keeps it: an IPv4 address in host
// order (uint32), or the low 64 bits of an IPv6 address whose pool lies in
// one /64 (uint64).
type addrKey interface{ ~uint32 | ~uint64 }

// pool is the range of addresses an index hands out, and the addresses in
// it that are never handed out (the server's own, the router's; 0 = none).
type pool[K addrKey] struct {
	first, last K
	reserved    [2]K
}

// binding ties a MAC to an address. expires is the durable lease's end (zero
// when the binding was never committed: an offer's reservation); hold is an
// in-memory reservation (an OFFER, or a REQUEST whose commit is running).
type binding[K addrKey] struct {
	mac     hwaddr
	ip      K
	expires time.Time
	hold    time.Time
}

// free reports whether b no longer keeps its address from others: no
// reservation and no live lease. Its MAC still gets the address back first
// (sticky), as long as nobody else took it.
func (b *binding[K]) free(now time.Time) bool {
	return !now.Before(b.hold) && !now.Before(b.expires)
}

// index is the in-memory copy of the leases plus offer reservations, so an
// OFFER needs no database read. The database is written only for committed
// leases (REQUEST, RELEASE, DECLINE), and the index is the authority that
// serialises concurrent claims on one address.
type index[K addrKey] struct {
	sn       pool[K]
	hold     time.Duration
	mu       sync.Mutex
	byMAC    map[hwaddr]*binding[K]
	byIP     map[K]*binding[K]
	declined map[K]time.Time // addresses a client found in use (DECLINE)
	cursor   K               // next-fit start of the never-used scan
}

// declineQuarantine is how long a declined address is not offered again.
const declineQuarantine = 10 * time.Minute

func newIndex[K addrKey](sn pool[K], hold time.Duration) *index[K] {
	return &index[K]{sn: sn, hold: hold, byMAC: map[hwaddr]*binding[K]{}, byIP: map[K]*binding[K]{},
		declined: map[K]time.Time{}, cursor: sn.first}
}

// inRange reports whether ip may be handed out.
func (x *index[K]) inRange(ip K) bool {
	return ip >= x.sn.first && ip <= x.sn.last && ip != x.sn.reserved[0] && ip != x.sn.reserved[1]
}

// load adds a stored lease (start-up); addresses outside the range are
// ignored (the range changed).
func (x *index[K]) load(mac hwaddr, ip K, expires time.Time) {
	if !x.inRange(ip) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	b := &binding[K]{mac: mac, ip: ip, expires: expires}
	x.byMAC[mac], x.byIP[ip] = b, b
}

// available reports whether mac may take ip now. Caller holds mu.
func (x *index[K]) available(mac hwaddr, ip K, now time.Time) bool {
	if !x.inRange(ip) {
		return false
	}
	if until, ok := x.declined[ip]; ok {
		if now.Before(until) {
			return false
		}
		delete(x.declined, ip)
	}
	b := x.byIP[ip]
	return b == nil || b.mac == mac || b.free(now)
}

// bind moves mac's binding to ip, evicting whatever free binding of another
// MAC held ip, and reserves it until now+hold. Caller holds mu and checked
// available.
func (x *index[K]) bind(mac hwaddr, ip K, now time.Time) *binding[K] {
	if old := x.byIP[ip]; old != nil && old.mac != mac {
		delete(x.byMAC, old.mac)
		delete(x.byIP, ip)
	}
	b := x.byMAC[mac]
	switch {
	case b == nil:
		b = &binding[K]{mac: mac, ip: ip}
		x.byMAC[mac] = b
	case b.ip != ip:
		delete(x.byIP, b.ip)
		// The old address's lease is replaced in the database by the same
		// upsert (the row is keyed on the MAC).
		b.ip, b.expires = ip, time.Time{}
	}
	x.byIP[ip] = b
	b.hold = now.Add(x.hold)
	return b
}

// offer picks the address to offer mac: its own binding if it has one (the
// same machine keeps its address), else the requested one if available, else
// a never-used address, else the one whose lease expired longest ago. ok is
// false when the pool is exhausted.
func (x *index[K]) offer(mac hwaddr, requested K, now time.Time) (ip K, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.byMAC[mac]; b != nil && x.available(mac, b.ip, now) {
		b.hold = now.Add(x.hold)
		return b.ip, true
	}
	if requested != 0 && x.available(mac, requested, now) {
		return x.bind(mac, requested, now).ip, true
	}
	if ip, ok := x.neverUsed(now); ok {
		return x.bind(mac, ip, now).ip, true
	}
	if ip, ok := x.oldestFree(mac, now); ok {
		return x.bind(mac, ip, now).ip, true
	}
	return 0, false
}

// neverUsed scans next-fit for an address no binding holds. Caller holds mu.
func (x *index[K]) neverUsed(now time.Time) (K, bool) {
	if len(x.byIP) > int(x.sn.last-x.sn.first) {
		return 0, false // every address is bound (the range may include the server's own)
	}
	n := x.sn.last - x.sn.first + 1
	ip := x.cursor
	for i := K(0); i < n; i++ {
		if ip > x.sn.last || ip < x.sn.first {
			ip = x.sn.first
		}
		cand := ip
		ip++
		if x.byIP[cand] == nil && x.inRange(cand) {
			if until, ok := x.declined[cand]; ok && now.Before(until) {
				continue
			}
			x.cursor = ip
			return cand, true
		}
	}
	return 0, false
}

// oldestFree finds the free binding whose lease ended first (linear: only
// reached when every address has been used once). Caller holds mu.
func (x *index[K]) oldestFree(mac hwaddr, now time.Time) (K, bool) {
	var best *binding[K]
	for _, b := range x.byIP {
		if b.mac == mac || !b.free(now) || !x.available(mac, b.ip, now) {
			continue
		}
		if best == nil || b.expires.Before(best.expires) || (b.expires.Equal(best.expires) && b.ip < best.ip) {
			best = b
		}
	}
	if best == nil {
		return 0, false
	}
	return best.ip, true
}

// claim reserves ip for mac for a REQUEST; false when it is not available
// to mac (held by another MAC, out of range, declined).
func (x *index[K]) claim(mac hwaddr, ip K, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.available(mac, ip, now) {
		return false
	}
	x.bind(mac, ip, now)
	return true
}

// committed records that mac's lease on ip is durable until expires.
func (x *index[K]) committed(mac hwaddr, ip K, expires, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.byMAC[mac]; b != nil && b.ip == ip {
		b.expires = expires
		b.hold = now // the lease itself now keeps the address
	}
}

// durableUntil returns when mac's stored lease of ip ends: zero when mac
// has no committed lease of ip.
func (x *index[K]) durableUntil(mac hwaddr, ip K) time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.byMAC[mac]; b != nil && b.ip == ip {
		return b.expires
	}
	return time.Time{}
}

// lookup returns mac's binding: address, whether a lease was ever committed
// and whether it is live.
func (x *index[K]) lookup(mac hwaddr, now time.Time) (ip K, leased, live bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.byMAC[mac]
	if b == nil {
		return 0, false, false
	}
	return b.ip, !b.expires.IsZero(), now.Before(b.expires)
}

// unhold drops mac's offer reservation (the client chose another server).
// A binding that was never committed is forgotten.
func (x *index[K]) unhold(mac hwaddr, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.byMAC[mac]
	if b == nil {
		return
	}
	b.hold = now
	if b.expires.IsZero() {
		delete(x.byMAC, mac)
		delete(x.byIP, b.ip)
	}
}

// release ends mac's lease on ip now, keeping the binding (sticky address).
func (x *index[K]) release(mac hwaddr, ip K, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.byMAC[mac]
	if b == nil || b.ip != ip || b.expires.IsZero() {
		return false
	}
	b.expires, b.hold = now, now
	return true
}

// decline forgets mac's binding on ip and quarantines ip: something else on
// the network answers on it. It reports whether mac held ip.
func (x *index[K]) decline(mac hwaddr, ip K, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.byMAC[mac]
	if b == nil || b.ip != ip {
		return false
	}
	delete(x.byMAC, mac)
	delete(x.byIP, ip)
	x.declined[ip] = now.Add(declineQuarantine)
	return true
}

// heldElsewhere records that another server sharing the lease database
// (another conductor on the segment) holds ip for holder until until: the
// database refused mac's lease on it. mac loses its claim, so its next
// DISCOVER is offered another address, and this index stops offering ip.
// Without a holder (unknown), ip is kept out of offers until until.
func (x *index[K]) heldElsewhere(mac hwaddr, ip K, holder hwaddr, known bool, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.byMAC[mac]; b != nil && b.ip == ip {
		delete(x.byMAC, mac)
		delete(x.byIP, ip)
	}
	if !known || !x.inRange(ip) {
		x.declined[ip] = until
		return
	}
	if old := x.byMAC[holder]; old != nil {
		delete(x.byIP, old.ip)
	}
	if old := x.byIP[ip]; old != nil {
		delete(x.byMAC, old.mac)
	}
	b := &binding[K]{mac: holder, ip: ip, expires: until}
	x.byMAC[holder], x.byIP[ip] = b, b
}

// counts reports bindings and live leases (tests, metrics).
func (x *index[K]) counts(now time.Time) (bound, live int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, b := range x.byIP {
		if now.Before(b.expires) {
			live++
		}
	}
	return len(x.byIP), live
}

// usage counts the range's addresses in use (a live lease or a
// reservation) and those free to hand out now (neither in use nor
// quarantined after a DECLINE). An IPv6 pool larger than an int counts as
// the largest int.
func (x *index[K]) usage(now time.Time) (inUse, free int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	span := uint64(x.sn.last - x.sn.first)
	size := math.MaxInt
	if span < math.MaxInt {
		size = int(span) + 1
	}
	for _, ip := range x.sn.reserved {
		if ip != 0 && ip >= x.sn.first && ip <= x.sn.last {
			size--
		}
	}
	for _, b := range x.byIP {
		if !b.free(now) {
			inUse++
		}
	}
	quarantined := 0
	for ip, until := range x.declined {
		if now.Before(until) {
			if b := x.byIP[ip]; b == nil || b.free(now) {
				quarantined++
			}
		}
	}
	return inUse, max(0, size-inUse-quarantined)
}
