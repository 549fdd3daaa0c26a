package dhcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"castiron/fault"
	"castiron/storage"
	"castiron/storage/disktest"
)

// TestDiskFullKnownLeases: with the database's disk full, a machine whose
// lease is stored is still acknowledged (for what is left of its stored
// lease, no longer), a new machine gets no ACK (its lease cannot be made
// durable), and once space is back both get full leases again.
func TestDiskFullKnownLeases(t *testing.T) {
	ctx := context.Background()
	dir := disktest.Small(t, 4)
	st := openStore(t, filepath.Join(dir, "castiron.db"))
	known, unknown := mustMAC("52:54:00:d1:00:01"), mustMAC("52:54:00:d1:00:02")
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), gateFor(known.String(), unknown.String()), st, nil, nil)
	_, ack := dora(t, s, known, plain)
	ip := ack.YourIPAddr
	renew := func(mac net.HardwareAddr, ip net.IP) (*dhcpv4.DHCPv4, error) {
		return s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, mac, plain, dhcpv4.WithClientIP(ip)))
	}

	_, free := disktest.Fill(t, dir)
	// The WAL may have room left: other writes use it up first (addresses
	// outside the server's range).
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		err = st.PutLease(ctx, storage.Lease{MAC: fmt.Sprintf("52:54:01:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff),
			IP: netip.AddrFrom4([4]byte{10, 202, byte(i >> 8), byte(i)}), Expires: time.Now().Add(time.Hour)})
	}
	if !fault.Is(err, fault.StorageFull) {
		t.Fatalf("filling the WAL: %v, want a fault.StorageFull", err)
	}

	resp, err := renew(known, ip)
	if err != nil || resp == nil || resp.MessageType() != dhcpv4.MessageTypeAck || !resp.YourIPAddr.Equal(ip) {
		t.Fatalf("renewal of a stored lease on a full disk: %v, %v; want an ACK of %s", resp, err, ip)
	}
	if lt := resp.IPAddressLeaseTime(0); lt > DefaultLeaseTime || lt < DefaultLeaseTime-time.Minute {
		t.Errorf("lease time on a full disk: %s, want the stored lease's remainder (just under %s)", lt, DefaultLeaseTime)
	}
	offer, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, unknown, plain))
	if err != nil || offer == nil {
		t.Fatalf("DISCOVER of a new machine on a full disk: %v, %v", offer, err)
	}
	resp, err = s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, unknown, plain, requested(offer.YourIPAddr), serverID(offer.ServerIdentifier())))
	if resp != nil || !fault.Is(err, fault.StorageFull) {
		t.Fatalf("REQUEST of a new machine on a full disk: %v, %v; want no answer and a fault.StorageFull", resp, err)
	}

	free()
	if _, ack := dora(t, s, unknown, plain); !within(ack.IPAddressLeaseTime(0), DefaultLeaseTime) {
		t.Errorf("new machine once space is back: lease time %s", ack.IPAddressLeaseTime(0))
	}
	resp, err = renew(known, ip)
	if err != nil || resp == nil || resp.MessageType() != dhcpv4.MessageTypeAck || !within(resp.IPAddressLeaseTime(0), DefaultLeaseTime) {
		t.Fatalf("renewal once space is back: %v, %v", resp, err)
	}
}
