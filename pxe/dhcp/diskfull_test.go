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
	"github.com/insomniacslk/dhcp/dhcpv6"

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

// TestDiskFullKnownLeases6 is TestDiskFullKnownLeases for DHCPv6: a Renew
// of a stored lease is granted for the stored remainder, a new machine's
// Request fails, and both work again once space is back.
func TestDiskFullKnownLeases6(t *testing.T) {
	ctx := context.Background()
	dir := disktest.Small(t, 4)
	st := openStore(t, filepath.Join(dir, "castiron.db"))
	known := net.HardwareAddr{0x52, 0x54, 0x00, 0xd6, 0x00, 0x01}
	unknown := net.HardwareAddr{0x52, 0x54, 0x00, 0xd6, 0x00, 0x02}
	s := newServer6(t, gateFor(known.String(), unknown.String()), st.Leases6(), nil)
	grant := func(mac net.HardwareAddr) (dhcpv6.DHCPv6, error) {
		adv := reply6(t, s, msg6(t, dhcpv6.MessageTypeSolicit, append(agentOpts(mac), iaNA(1, netip.Addr{}))...), eui64(mac)).(*dhcpv6.Message)
		req := msg6(t, dhcpv6.MessageTypeRequest, append(agentOpts(mac), dhcpv6.OptServerID(adv.Options.ServerID()), iaNA(1, addrIn(t, adv)))...)
		return s.Reply6(ctx, req, eui64(mac))
	}
	resp, err := grant(known)
	if err != nil {
		t.Fatal(err)
	}
	addr := addrIn(t, resp.(*dhcpv6.Message))
	sid := resp.(*dhcpv6.Message).Options.ServerID()
	renew := func() (dhcpv6.DHCPv6, error) {
		return s.Reply6(ctx, msg6(t, dhcpv6.MessageTypeRenew, append(agentOpts(known), dhcpv6.OptServerID(sid), iaNA(1, addr))...), eui64(known))
	}

	_, free := disktest.Fill(t, dir)
	for i := 0; i < 10000 && err == nil; i++ {
		err = st.PutLease(ctx, storage.Lease{MAC: fmt.Sprintf("52:54:01:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff),
			IP: netip.AddrFrom4([4]byte{10, 202, byte(i >> 8), byte(i)}), Expires: time.Now().Add(time.Hour)})
	}
	if !fault.Is(err, fault.StorageFull) {
		t.Fatalf("filling the WAL: %v, want a fault.StorageFull", err)
	}
	resp, err = renew()
	if err != nil || resp == nil {
		t.Fatalf("Renew of a stored lease on a full disk: %v, %v", resp, err)
	}
	m := resp.(*dhcpv6.Message)
	if got := m.Options.OneIANA().Options.OneAddress(); addrIn(t, m) != addr || got.ValidLifetime > time.Hour || got.ValidLifetime < time.Hour-time.Minute {
		t.Errorf("Renew on a full disk: %s, want %s for the stored remainder (just under 1h)", m.Summary(), addr)
	}
	if resp, err := grant(unknown); resp != nil || !fault.Is(err, fault.StorageFull) {
		t.Fatalf("Request of a new machine on a full disk: %v, %v; want no answer and a fault.StorageFull", resp, err)
	}

	free()
	if _, err := grant(unknown); err != nil {
		t.Fatalf("new machine once space is back: %v", err)
	}
	resp, err = renew()
	if err != nil || resp.(*dhcpv6.Message).Options.OneIANA().Options.OneAddress().ValidLifetime != time.Hour {
		t.Fatalf("Renew once space is back: %v, %v", resp, err)
	}
}
