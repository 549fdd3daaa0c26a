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
// relayLab is a server in the lab answering a relay agent's socket in the
// client namespace (giaddr 10.201.50.2), as perfdhcp's relay mode does.
type relayLab struct {
	t      *testing.T
	srv    *running
	conn   *net.UDPConn
	server *net.UDPAddr
	relay  netip.Addr
}

func newRelayLab(t *testing.T, st LeaseStore, rec boot.Recorder) *relayLab {
	needRoot(t, "ip", "ping")
	l := newLab(t)
	r := &relayLab{t: t, relay: netip.MustParseAddr("10.201.50.2"),
		server: net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("10.201.50.1"), portDHCP))}
	sh(t, "ip", "-n", l.cliNS, "addr", "add", r.relay.String()+"/24", "dev", l.cliIf)
	// Both neighbour entries now: a burst to an unresolved address would
	// overflow the kernel's queue for ARP (about 100 packets).
	sh(t, "ip", "netns", "exec", l.cliNS, "ping", "-c1", "-W2", "10.201.50.1")
	if sl, ok := st.(*slowLeases); ok && sl.sqliteLeases == nil {
		sl.sqliteLeases = openStore(t, filepath.Join(l.dir, "castiron.db"))
	}
	r.srv = l.start(t, Config{
		RangeStart: netip.MustParseAddr("10.201.50.10"), RangeEnd: netip.MustParseAddr("10.201.50.250"),
		Netmask: net.CIDRMask(24, 32), BootFiles: BootFiles{ScriptURL: scriptURL},
	}, &allowGate{all: true}, st, rec)
	// The server's kind of socket: its 4 MiB receive queue holds every
	// answer of a burst even when this test is slow to read them.
	if err := inNetns(l.cliNS, func() (err error) {
		r.conn, err = listenOn(context.Background(), l.cliIf, "udp4", netip.AddrPortFrom(r.relay, portDHCP).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })
	return r
}

// exchange sends n packets, spacing apart, then reads n replies of type
// want (keyed by MAC); check runs as each arrives.
func (r *relayLab) exchange(n int, spacing time.Duration, build func(i int) *dhcpv4.DHCPv4, want dhcpv4.MessageType, check func(*dhcpv4.DHCPv4)) map[string]*dhcpv4.DHCPv4 {
	t := r.t
	t.Helper()
	for i := range n {
		if _, err := r.conn.WriteToUDP(build(i).ToBytes(), r.server); err != nil {
			t.Fatal(err)
		}
		if spacing > 0 {
			time.Sleep(spacing)
		}
	}
	got := map[string]*dhcpv4.DHCPv4{}
	buf := make([]byte, 4096)
	r.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(got) < n {
		k, err := r.conn.Read(buf)
		if err != nil {
			t.Fatalf("%d of %d %s replies: %v\n%s", len(got), n, want, err, r.srv.log.String())
		}
		d, err := dhcpv4.FromBytes(buf[:k])
		if err != nil {
			t.Fatal(err)
		}
		if d.MessageType() != want {
			t.Fatalf("got a %s, want %s", d.MessageType(), want)
		}
		check(d)
		got[d.ClientHWAddr.String()] = d
	}
	return got
}

// dora runs n relayed DORAs (MACs 52:54:02:00:xx:xx), each phase's
// packets spacing apart; check sees each ACK as it arrives.
func (r *relayLab) dora(n int, spacing time.Duration, check func(*dhcpv4.DHCPv4)) []net.HardwareAddr {
	t := r.t
	macs := make([]net.HardwareAddr, n)
	for i := range macs {
		macs[i] = net.HardwareAddr{0x52, 0x54, 0x02, 0, byte(i >> 8), byte(i)}
	}
	relayed := dhcpv4.WithGatewayIP(r.relay.AsSlice())
	offers := r.exchange(n, spacing, func(i int) *dhcpv4.DHCPv4 {
		return packet(t, dhcpv4.MessageTypeDiscover, macs[i], plain, relayed)
	}, dhcpv4.MessageTypeOffer, func(*dhcpv4.DHCPv4) {})
	r.exchange(n, spacing, func(i int) *dhcpv4.DHCPv4 {
		o := offers[macs[i].String()]
		return packet(t, dhcpv4.MessageTypeRequest, macs[i], plain, relayed, requested(o.YourIPAddr), serverID(o.ServerIdentifier()))
	}, dhcpv4.MessageTypeAck, check)
	return macs
}

func (s *slowLeases) commits() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

func TestNetnsBatchedRounds(t *testing.T) {
	st := &slowLeases{delay: 20 * time.Millisecond}
	rec := &events{}
	r := newRelayLab(t, st, rec)
	ctx := context.Background()
	const n = 200
	macs := r.dora(n, 0, func(ack *dhcpv4.DHCPv4) {
		l, err := st.GetLease(ctx, ack.ClientHWAddr.String())
		if err != nil || l.IP != netip.AddrFrom4([4]byte(ack.YourIPAddr.To4())) {
			t.Fatalf("ACK of %s for %s received before its lease was committed: %+v %v", ack.ClientHWAddr, ack.YourIPAddr, l, err)
		}
	})

	batches := st.commits()
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

// TestNetnsCoalescedRounds: requests arriving one at a time but close
// together (a steady boot storm, not a burst) still share rounds: the busy
// loop waits out its coalescing window, so many ACKs ride on one commit.
func TestNetnsCoalescedRounds(t *testing.T) {
	st := &slowLeases{}
	r := newRelayLab(t, st, boot.Discard{})
	const n = 100
	r.dora(n, 200*time.Microsecond, func(*dhcpv4.DHCPv4) {})
	batches := st.commits()
	// 100 REQUESTs over 20 ms or more, 4 ms windows: a handful of commits
	// (one per REQUEST without coalescing: the server is faster than 200 µs).
	if len(batches) > n/2 {
		t.Errorf("%d commits for %d ACKs sent 200 µs apart: %v", len(batches), n, batches)
	}
	t.Logf("%d ACKs in %d commits: %v", n, len(batches), batches)
}
