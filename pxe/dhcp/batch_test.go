package dhcp

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"castiron/pxe/boot"
)

// slowLeases is a real SQLite lease store whose commits take a while, as
// a busy disk's do, and which records how many leases each commit carried.
type slowLeases struct {
	*sqliteLeases
	delay   time.Duration
	mu      sync.Mutex
	batches []int
}

func (s *slowLeases) PutLeases(ctx context.Context, ls []Lease) ([]error, error) {
	time.Sleep(s.delay)
	s.mu.Lock()
	s.batches = append(s.batches, len(ls))
	s.mu.Unlock()
	return s.sqliteLeases.PutLeases(ctx, ls)
}

// TestNetnsBatchedRounds: a burst of relayed DORAs over real sockets (as
// perfdhcp sends them) is answered in full; the REQUESTs that queued while
// a commit was running share the next one; each ACK leaves only once its
// lease is committed (when a client receives it, the lease is already
// readable from the database, which is what survives kill -9); and every
// exchange is in the boot timeline, in order.
func TestNetnsBatchedRounds(t *testing.T) {
	needRoot(t, "ip", "ping")
	l := newLab(t)
	relay := netip.MustParseAddr("10.201.50.2")
	sh(t, "ip", "-n", l.cliNS, "addr", "add", relay.String()+"/24", "dev", l.cliIf)
	// Both neighbour entries now: a burst to an unresolved address would
	// overflow the kernel's queue for ARP (about 100 packets).
	sh(t, "ip", "netns", "exec", l.cliNS, "ping", "-c1", "-W2", "10.201.50.1")
	st := &slowLeases{sqliteLeases: openStore(t, filepath.Join(l.dir, "castiron.db")), delay: 20 * time.Millisecond}
	rec := &events{}
	srv := l.start(t, Config{
		RangeStart: netip.MustParseAddr("10.201.50.10"), RangeEnd: netip.MustParseAddr("10.201.50.250"),
		Netmask: net.CIDRMask(24, 32), BootFiles: BootFiles{ScriptURL: scriptURL},
	}, &allowGate{all: true}, st, rec)

	var conn *net.UDPConn
	// The server's kind of socket: its 4 MiB receive queue holds every
	// answer of a burst even when this test is slow to read them.
	if err := inNetns(l.cliNS, func() (err error) {
		conn, err = listenOn(context.Background(), l.cliIf, "udp4", netip.AddrPortFrom(relay, portDHCP).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	server := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("10.201.50.1"), portDHCP))

	const n = 200
	macs := make([]net.HardwareAddr, n)
	for i := range macs {
		macs[i] = net.HardwareAddr{0x52, 0x54, 0x02, 0, byte(i >> 8), byte(i)}
	}
	relayed := dhcpv4.WithGatewayIP(relay.AsSlice())
	// burst sends one packet per MAC at once, then reads n replies of
	// type want (keyed by MAC); check runs as each arrives.
	burst := func(build func(i int) *dhcpv4.DHCPv4, want dhcpv4.MessageType, check func(*dhcpv4.DHCPv4)) map[string]*dhcpv4.DHCPv4 {
		t.Helper()
		for i := range n {
			if _, err := conn.WriteToUDP(build(i).ToBytes(), server); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]*dhcpv4.DHCPv4{}
		buf := make([]byte, 4096)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for len(got) < n {
			k, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("%d of %d %s replies: %v\n%s", len(got), n, want, err, srv.log.String())
			}
			r, err := dhcpv4.FromBytes(buf[:k])
			if err != nil {
				t.Fatal(err)
			}
			if r.MessageType() != want {
				t.Fatalf("got a %s, want %s", r.MessageType(), want)
			}
			check(r)
			got[r.ClientHWAddr.String()] = r
		}
		return got
	}
	offers := burst(func(i int) *dhcpv4.DHCPv4 {
		return packet(t, dhcpv4.MessageTypeDiscover, macs[i], plain, relayed)
	}, dhcpv4.MessageTypeOffer, func(*dhcpv4.DHCPv4) {})
	ctx := context.Background()
	burst(func(i int) *dhcpv4.DHCPv4 {
		o := offers[macs[i].String()]
		return packet(t, dhcpv4.MessageTypeRequest, macs[i], plain, relayed, requested(o.YourIPAddr), serverID(o.ServerIdentifier()))
	}, dhcpv4.MessageTypeAck, func(ack *dhcpv4.DHCPv4) {
		l, err := st.GetLease(ctx, ack.ClientHWAddr.String())
		if err != nil || l.IP != netip.AddrFrom4([4]byte(ack.YourIPAddr.To4())) {
			t.Fatalf("ACK of %s for %s received before its lease was committed: %+v %v", ack.ClientHWAddr, ack.YourIPAddr, l, err)
		}
	})

	st.mu.Lock()
	batches := slices.Clone(st.batches)
	st.mu.Unlock()
	total := 0
	for _, b := range batches {
		total += b
	}
	if total != n {
		t.Fatalf("%d leases committed in %v, want %d", total, batches, n)
	}
	// 200 REQUESTs sent at once against 20 ms commits: rounds of tens.
	if len(batches) > n/4 {
		t.Errorf("%d commits for %d ACKs (%v): the REQUESTs that queued during a commit did not share the next", len(batches), n, batches)
	}
	want := []string{boot.DHCPDiscover, boot.DHCPOffer, boot.DHCPRequest, boot.DHCPAck}
	for _, mac := range macs {
		if got := rec.kinds(mac.String()); !slices.Equal(got, want) {
			t.Fatalf("timeline of %s: %v, want %v", mac, got, want)
		}
	}
	if got := rec.last(boot.DHCPAck); got.Took <= 0 {
		t.Errorf("ACK event without castiron's time: %+v", got)
	}
}
