package dhcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"castiron/pxe/boot"
	"castiron/storage"
)

// Test addresses: 10.201.0.0/16 belongs to this package's tests.
var (
	testServer = netip.MustParseAddr("10.201.0.1")
	testRouter = netip.MustParseAddr("10.201.0.254")
)

// allowGate allows the MACs in it (all when all is set).
type allowGate struct {
	mu  sync.Mutex
	all bool
	ok  map[string]string // mac -> node UUID
}

func (g *allowGate) Allow(_ context.Context, mac net.HardwareAddr) (boot.Decision, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.all {
		return boot.Decision{Purpose: "inspect"}, true
	}
	node, ok := g.ok[mac.String()]
	return boot.Decision{NodeUUID: node, Purpose: "inspect"}, ok
}

func gateFor(macs ...string) *allowGate {
	g := &allowGate{ok: map[string]string{}}
	for i, m := range macs {
		g.ok[m] = "00000000-0000-4000-8000-00000000000" + string(rune('0'+i%10))
	}
	return g
}

// events records the timeline.
type events struct {
	mu  sync.Mutex
	evs []boot.Event
}

func (e *events) Record(_ context.Context, ev boot.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) kinds(mac string) []string {
	var out []string
	for _, ev := range e.all(mac) {
		out = append(out, ev.Kind)
	}
	return out
}

// all are the events of mac, in order.
func (e *events) all(mac string) []boot.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []boot.Event
	for _, ev := range e.evs {
		if ev.MAC == mac {
			out = append(out, ev)
		}
	}
	return out
}

func (e *events) last(kind string) boot.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.evs) - 1; i >= 0; i-- {
		if e.evs[i].Kind == kind {
			return e.evs[i]
		}
	}
	return boot.Event{}
}

func openStore(tb testing.TB, path string) *sqliteLeases {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "castiron.db")
	}
	st, err := storage.Open(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return &sqliteLeases{st}
}

// sqliteLeases keeps the server's leases in a real SQLite store, as main's
// adapter does in production.
type sqliteLeases struct{ *storage.SQLite }

func (s *sqliteLeases) ListLeases(ctx context.Context) ([]Lease, error) {
	return storeLeases{s.SQLite}.ListLeases(ctx)
}

func (s *sqliteLeases) PutLeases(ctx context.Context, ls []Lease) ([]error, error) {
	return storeLeases{s.SQLite}.PutLeases(ctx, ls)
}

// Leases6 is the store's DHCPv6 table through the same adapter.
func (s *sqliteLeases) Leases6() storeLeases { return storeLeases{s.SQLite.Leases6()} }

// storeLeases adapts a storage.LeaseStore (either table) to LeaseStore.
type storeLeases struct{ storage.LeaseStore }

func (s storeLeases) ListLeases(ctx context.Context) ([]Lease, error) {
	ls, err := s.LeaseStore.ListLeases(ctx)
	out := make([]Lease, len(ls))
	for i, l := range ls {
		out[i] = Lease(l)
	}
	return out, err
}

func (s storeLeases) PutLeases(ctx context.Context, ls []Lease) ([]error, error) {
	in := make([]storage.Lease, len(ls))
	for i, l := range ls {
		in[i] = storage.Lease(l)
	}
	errs, err := s.LeaseStore.PutLeases(ctx, in)
	for i, e := range errs {
		var conflict *storage.LeaseConflictError
		if errors.As(e, &conflict) {
			errs[i] = &LeaseConflictError{IP: conflict.IP, HeldBy: conflict.HeldBy}
		}
	}
	return errs, err
}

func scriptURL(mac net.HardwareAddr, arch string) string {
	return "http://10.201.0.1:8080/boot/" + mac.String() + ".ipxe?arch=" + arch
}

func fullConfig(start, end string) Config {
	return Config{
		Interface:  "test0",
		ServerIP:   testServer,
		RangeStart: netip.MustParseAddr(start),
		RangeEnd:   netip.MustParseAddr(end),
		Netmask:    net.CIDRMask(16, 32),
		Router:     testRouter,
		BootFiles:  BootFiles{HTTPBootBase: "http://10.201.0.1:8080/boot/", ScriptURL: scriptURL},
	}
}

// testLog collects the server's log.
type testLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newTestServer(tb testing.TB, cfg Config, gate boot.Gate, st LeaseStore, rec boot.Recorder, logTo io.Writer) *Server {
	tb.Helper()
	if logTo == nil {
		logTo = io.Discard
	}
	s, err := New(cfg, gate, st, rec, slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// A client profile builds the packets a real client of that kind sends
// (lab/NOTES.md "Observed DHCP / TFTP behaviour").
type profile func(mac net.HardwareAddr) []dhcpv4.Modifier

var prlIPXE = []byte{1, 3, 6, 7, 12, 15, 17, 26, 43, 60, 66, 67, 119, 128, 129, 130, 131, 132, 133, 134, 135, 175, 203}
var prlEDK2 = []byte{1, 2, 3, 4, 5, 6, 12, 13, 15, 17, 18, 22, 23, 28, 40, 41, 42, 43, 50, 51, 54, 58, 59, 60, 66, 67, 97, 128, 129, 130, 131, 132, 133, 134, 135}
var prlUdhcpc = []byte{1, 3, 6, 12, 15, 28, 42}

// smbiosUUID as option 97 sends it (type 0 + 16 bytes, first fields LE).
var uuid97 = append([]byte{0}, 0x30, 0x62, 0x61, 0x6c, 0, 0, 0, 0x40, 0x80, 0, 0, 0, 0, 0, 0, 1)

func gen(code uint8, v []byte) dhcpv4.Modifier {
	return dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(code), v)
}

func clientID(mac net.HardwareAddr) []byte { return append([]byte{1}, mac...) }

// iPXE BIOS ROM (qemu NIC ROM).
func ipxeBIOS(mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		gen(60, []byte("PXEClient:Arch:00000:UNDI:002001")), gen(93, []byte{0, 0}), gen(94, []byte{1, 2, 1}),
		gen(77, []byte("iPXE")), gen(175, []byte{0xb1, 5, 1, 0x1a, 0xf4, 0x10, 0x00, 0x13, 1, 1, 0x18, 1, 1}),
		gen(61, clientID(mac)), gen(97, uuid97), gen(55, prlIPXE),
	}
}

// EDK2 (OVMF) PXEv4: no option 61, broadcast flag.
func edk2PXE(mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		gen(60, []byte("PXEClient:Arch:00007:UNDI:003000")), gen(93, []byte{0, 7}), gen(94, []byte{1, 3, 0}),
		gen(97, uuid97), gen(55, prlEDK2), gen(57, []byte{0x05, 0xc0}), dhcpv4.WithBroadcast(true),
	}
}

// iPXE snponly.efi, RFC 3004 user class this time (both forms are accepted).
func ipxeEFI(mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		gen(60, []byte("PXEClient:Arch:00007:UNDI:003010")), gen(93, []byte{0, 7}), gen(94, []byte{1, 3, 10}),
		gen(77, []byte("\x04iPXE")), gen(175, []byte{0xb1, 5, 1, 0x1a, 0xf4, 0x10, 0x00, 0x24, 1, 1}),
		gen(61, clientID(mac)), gen(55, prlIPXE),
	}
}

// EDK2 UEFI HTTP boot (IPv4).
func edk2HTTP(mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		gen(60, []byte("HTTPClient:Arch:00016:UNDI:003000")), gen(93, []byte{0, 16}), gen(94, []byte{1, 3, 0}),
		gen(55, []byte{1, 3, 6, 15, 28, 43, 60, 67}), dhcpv4.WithBroadcast(true),
	}
}

// castiron's ramdisk agent (udhcpc-like).
func agent(mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{gen(60, []byte(AgentVendorClass)), gen(61, clientID(mac)), gen(55, prlUdhcpc)}
}

// A plain DHCP client (busybox udhcpc, dhclient): no vendor class.
func plain(mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{gen(61, clientID(mac)), gen(55, prlUdhcpc)}
}

func mustMAC(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

// packet builds a client packet and sends it through the wire format, as
// the server sees it.
func packet(tb testing.TB, typ dhcpv4.MessageType, mac net.HardwareAddr, p profile, extra ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	tb.Helper()
	mods := []dhcpv4.Modifier{dhcpv4.WithHwAddr(mac), dhcpv4.WithMessageType(typ), dhcpv4.WithTransactionID(dhcpv4.TransactionID{1, 2, 3, 4})}
	if p != nil {
		mods = append(mods, p(mac)...)
	}
	mods = append(mods, extra...)
	d, err := dhcpv4.New(mods...)
	if err != nil {
		tb.Fatal(err)
	}
	d.OpCode = dhcpv4.OpcodeBootRequest
	out, err := dhcpv4.FromBytes(d.ToBytes())
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func requested(ip net.IP) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip)) }
func serverID(ip net.IP) dhcpv4.Modifier  { return dhcpv4.WithOption(dhcpv4.OptServerIdentifier(ip)) }

// dora runs DISCOVER/OFFER/REQUEST/ACK through Reply and returns both replies.
func dora(tb testing.TB, s *Server, mac net.HardwareAddr, p profile, extra ...dhcpv4.Modifier) (offer, ack *dhcpv4.DHCPv4) {
	tb.Helper()
	ctx := context.Background()
	offer, err := s.Reply(ctx, packet(tb, dhcpv4.MessageTypeDiscover, mac, p, extra...))
	if err != nil || offer == nil {
		tb.Fatalf("DISCOVER from %s: %v, %v", mac, offer, err)
	}
	req := packet(tb, dhcpv4.MessageTypeRequest, mac, p, append(extra, requested(offer.YourIPAddr), serverID(offer.ServerIdentifier()))...)
	ack, err = s.Reply(ctx, req)
	if err != nil || ack == nil {
		tb.Fatalf("REQUEST from %s: %v, %v", mac, ack, err)
	}
	if ack.MessageType() != dhcpv4.MessageTypeAck {
		tb.Fatalf("REQUEST from %s: got %s", mac, ack.MessageType())
	}
	return offer, ack
}

func within(d, want time.Duration) bool { return d > want-2*time.Second && d <= want }
