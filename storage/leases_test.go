package storage

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"castiron/fault"
)

func lease(mac, ip string, expires time.Time) Lease {
	return Lease{MAC: mac, IP: netip.MustParseAddr(ip), Expires: expires}
}

func mustPutLease(t testing.TB, s *SQLite, l Lease) {
	t.Helper()
	if err := s.PutLease(context.Background(), l); err != nil {
		t.Fatalf("PutLease(%s %s): %v", l.MAC, l.IP, err)
	}
}

// TestLeaseLifecycle: acquire, renew, release (expire now, address kept),
// takeover of an expired address, refusal of a live one, delete, prune.
func TestLeaseLifecycle(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now()
	a, b := "52:54:00:C9:00:01", "52:54:00:c9:00:02"

	// Acquire: the MAC is stored lower case.
	mustPutLease(t, s, Lease{MAC: a, IP: netip.MustParseAddr("10.201.0.10"), Expires: now.Add(time.Hour), NodeUUID: "n-a"})
	got, err := s.GetLease(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if got.MAC != "52:54:00:c9:00:01" || got.IP.String() != "10.201.0.10" || got.NodeUUID != "n-a" ||
		!got.Expires.Equal(normTime(now.Add(time.Hour))) || got.UpdatedAt.IsZero() {
		t.Fatalf("got %+v", got)
	}

	// Renew: same MAC, later expiry, one row.
	mustPutLease(t, s, lease(a, "10.201.0.10", now.Add(2*time.Hour)))
	if got, _ := s.GetLease(ctx, a); !got.Expires.Equal(normTime(now.Add(2 * time.Hour))) {
		t.Fatalf("renewed expiry %v", got.Expires)
	}

	// Another MAC cannot take a live address.
	err = s.PutLease(ctx, lease(b, "10.201.0.10", now.Add(time.Hour)))
	var conflict *LeaseConflictError
	if !fault.Is(err, fault.Conflict) || !errors.As(err, &conflict) || conflict.HeldBy != "52:54:00:c9:00:01" {
		t.Fatalf("live address taken: %v", err)
	}

	// Release: expires now, the binding stays (sticky address) ...
	mustPutLease(t, s, lease(a, "10.201.0.10", now.Add(-time.Second)))
	if got, err := s.GetLease(ctx, a); err != nil || got.IP.String() != "10.201.0.10" {
		t.Fatalf("released lease: %+v %v", got, err)
	}
	// ... until another MAC takes the expired address over.
	mustPutLease(t, s, lease(b, "10.201.0.10", now.Add(time.Hour)))
	if _, err := s.GetLease(ctx, a); !fault.Is(err, fault.NotFound) {
		t.Fatalf("taken-over lease still there: %v", err)
	}

	// A MAC moving to another address frees its old one.
	mustPutLease(t, s, lease(b, "10.201.0.11", now.Add(time.Hour)))
	mustPutLease(t, s, lease(a, "10.201.0.10", now.Add(time.Hour)))

	// Expire + prune.
	mustPutLease(t, s, lease("52:54:00:c9:00:03", "10.201.0.12", now.Add(-2*time.Hour)))
	n, err := s.PruneLeases(ctx, now.Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if err := s.DeleteLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLease(ctx, "not-a-mac"); err != nil {
		t.Fatal(err)
	}
	ls, err := s.ListLeases(ctx)
	if err != nil || len(ls) != 1 || ls[0].MAC != "52:54:00:c9:00:02" || ls[0].IP.String() != "10.201.0.11" {
		t.Fatalf("left: %+v %v", ls, err)
	}
}

func TestLeaseInvalid(t *testing.T) {
	s := openTest(t)
	for _, l := range []Lease{
		{MAC: "nope", IP: netip.MustParseAddr("10.201.0.1")},
		{MAC: "52:54:00:c9:00:01"},
		{MAC: "52:54:00:c9:00:01", IP: netip.MustParseAddr("fd00::1")},
		{MAC: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", IP: netip.MustParseAddr("10.201.0.1")},
	} {
		if err := s.PutLease(context.Background(), l); !fault.Is(err, fault.Invalid) {
			t.Errorf("PutLease(%+v) = %v, want Invalid", l, err)
		}
	}
}

// TestLeaseUniqueUnderConcurrency: many MACs race for few addresses through
// the group commit; every address ends with exactly one holder and every
// acknowledged write is what is stored.
func TestLeaseUniqueUnderConcurrency(t *testing.T) {
	raceLeases(t, []*DB{openTest(t)}, 1)
}

// raceLeases has 64 MACs race for 8 addresses of 10.201.<net>.0, each MAC
// writing through the next of stores in turn. Each address must end with
// one holder: the one MAC whose write was acknowledged (the others get a
// Conflict), as every store reads it.
func raceLeases(t *testing.T, stores []*DB, net int) {
	t.Helper()
	ctx := context.Background()
	const macs, addrs = 64, 8
	var mu sync.Mutex
	won := map[string]string{} // ip -> mac
	var wg sync.WaitGroup
	for i := 0; i < macs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			mac := fmt.Sprintf("52:54:00:c9:%02x:%02x", net, i)
			ip := fmt.Sprintf("10.201.%d.%d", net, i%addrs)
			err := stores[i%len(stores)].PutLease(ctx, lease(mac, ip, time.Now().Add(time.Hour)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if prev, dup := won[ip]; dup {
					t.Errorf("%s acknowledged to %s and %s", ip, prev, mac)
				}
				won[ip] = mac
			case !fault.Is(err, fault.Conflict):
				t.Errorf("%s: %v", mac, err)
			}
		}(i)
	}
	wg.Wait()
	ls, err := stores[0].ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != addrs || len(won) != addrs {
		t.Fatalf("%d stored, %d won; want %d", len(ls), len(won), addrs)
	}
	for _, l := range ls {
		if won[l.IP.String()] != l.MAC {
			t.Fatalf("stored %s -> %s, acknowledged to %s", l.IP, l.MAC, won[l.IP.String()])
		}
	}
}

// TestLeaseSurvivesRestart: a lease written is there after reopening the file.
func TestLeaseSurvivesRestart(t *testing.T) {
	path := testDatabase(t)
	s := openAt(t, path)
	exp := time.Now().Add(time.Hour)
	mustPutLease(t, s, lease("52:54:00:c9:00:01", "10.201.0.10", exp))
	s = reopen(t, s, path)
	got, err := s.GetLease(context.Background(), "52:54:00:c9:00:01")
	if err != nil || got.IP.String() != "10.201.0.10" || !got.Expires.Equal(normTime(exp)) {
		t.Fatalf("after restart: %+v %v", got, err)
	}
}

// BenchmarkPutLeaseParallel is the ACK path's write: concurrent leases
// sharing group commits.
func BenchmarkPutLeaseParallel(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	var next int64
	var mu sync.Mutex
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			i := next
			next++
			mu.Unlock()
			mac := fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
			ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) // stored only, never used on a network
			if err := s.PutLease(ctx, Lease{MAC: mac, IP: ip, Expires: time.Now().Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLeases6: the DHCPv6 table keeps its own leases, keyed on the MAC like
// the IPv4 one: one machine holds one lease of each family, an IPv6 address
// held by a live lease is refused to another MAC, the wrong family is
// invalid, and the leases survive a reopen.
func TestLeases6(t *testing.T) {
	path := testDatabase(t)
	ctx := context.Background()
	s := openAt(t, path)
	v6 := s.Leases6()
	now := time.Now()
	a, b := "52:54:00:c9:06:01", "52:54:00:c9:06:02"
	mustPutLease(t, s, lease(a, "10.201.6.10", now.Add(time.Hour)))
	if err := v6.PutLease(ctx, lease(a, "fd51::1000", now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	var conflict *LeaseConflictError
	if err := v6.PutLease(ctx, lease(b, "fd51::1000", now.Add(time.Hour))); !errors.As(err, &conflict) || conflict.HeldBy != a {
		t.Fatalf("live IPv6 address taken: %v", err)
	}
	for _, bad := range []Lease{lease(b, "10.201.6.11", now), {MAC: b, IP: netip.MustParseAddr("fe80::1%eth0")}} {
		if err := v6.PutLease(ctx, bad); !fault.Is(err, fault.Invalid) {
			t.Errorf("PutLease6(%v) = %v, want Invalid", bad.IP, err)
		}
	}
	s = reopen(t, s, path)
	l4, err4 := s.GetLease(ctx, a)
	l6, err6 := s.Leases6().GetLease(ctx, a)
	if err4 != nil || err6 != nil || l4.IP.String() != "10.201.6.10" || l6.IP.String() != "fd51::1000" {
		t.Fatalf("after reopen: v4 %+v %v, v6 %+v %v", l4, err4, l6, err6)
	}
	if n, err := s.Leases6().PruneLeases(ctx, now.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if ls, _ := s.ListLeases(ctx); len(ls) != 1 {
		t.Fatalf("pruning IPv6 leases touched IPv4 ones: %+v", ls)
	}
}

// TestLeaseUniqueAcrossStores: two stores on one database (two conductors
// on one segment: SQLite file or PostgreSQL) race for few addresses; each
// address ends with one holder, and what each store acknowledged is stored.
func TestLeaseUniqueAcrossStores(t *testing.T) {
	raceLeases(t, openStores(t, 2), 2)
}
