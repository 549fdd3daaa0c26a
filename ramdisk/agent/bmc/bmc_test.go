package bmc

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// fakeBMC plays a BMC's system interface: channel media, LAN parameters
// per channel and a user table.
type fakeBMC struct {
	media  map[uint8]uint8
	params map[[3]uint8][]byte // channel, param, set
	users  []string            // index = user id; [0] unused
	pw     map[uint8]string
	access map[[2]uint8]uint8 // channel, id -> privilege
	on     map[uint8]bool
}

var errCC = errors.New("completion code 0xcc")

func newFake() *fakeBMC {
	return &fakeBMC{media: map[uint8]uint8{}, params: map[[3]uint8][]byte{}, users: make([]string, 11),
		pw: map[uint8]string{}, access: map[[2]uint8]uint8{}, on: map[uint8]bool{}}
}

func (f *fakeBMC) ChannelMedium(_ context.Context, ch uint8) (uint8, error) {
	m, ok := f.media[ch]
	if !ok {
		return 0, errCC
	}
	return m, nil
}
func (f *fakeBMC) LanParam(_ context.Context, ch, p, set uint8) ([]byte, error) {
	b, ok := f.params[[3]uint8{ch, p, set}]
	if !ok {
		return nil, errCC
	}
	return b, nil
}
func (f *fakeBMC) MaxUsers(context.Context, uint8) (uint8, error) {
	return uint8(len(f.users) - 1), nil
}
func (f *fakeBMC) UserName(_ context.Context, id uint8) (string, error) {
	return f.users[id], nil
}
func (f *fakeBMC) SetUserName(_ context.Context, id uint8, n string) error {
	f.users[id] = n
	return nil
}
func (f *fakeBMC) SetPassword(_ context.Context, id uint8, pw string) error {
	f.pw[id] = pw
	return nil
}
func (f *fakeBMC) EnableUser(_ context.Context, id uint8) error { f.on[id] = true; return nil }
func (f *fakeBMC) SetAccess(_ context.Context, ch, id, priv uint8) error {
	f.access[[2]uint8{ch, id}] = priv
	return nil
}

func (f *fakeBMC) lan(ch uint8, ip string, mac string) {
	f.media[ch] = mediumLAN
	a := netip.MustParseAddr(ip).As4()
	f.params[[3]uint8{ch, paramIP, 0}] = a[:]
	hw, _ := net.ParseMAC(mac)
	f.params[[3]uint8{ch, paramMAC, 0}] = hw
}

func (f *fakeBMC) v6(ch uint8, enables byte, static, dynamic []string) {
	f.params[[3]uint8{ch, paramIPv6Enables, 0}] = []byte{enables}
	f.params[[3]uint8{ch, paramIPv6Status, 0}] = []byte{byte(len(static)), byte(len(dynamic)), 0}
	entry := func(set int, src byte, a string) []byte {
		b := []byte{byte(set), src}
		ip := netip.MustParseAddr(a).As16()
		b = append(b, ip[:]...)
		return append(b, 64, 0)
	}
	for i, a := range static {
		f.params[[3]uint8{ch, paramIPv6Static, uint8(i)}] = entry(i, 0x80, a)
	}
	for i, a := range dynamic {
		f.params[[3]uint8{ch, paramIPv6Dynamic, uint8(i)}] = entry(i, 0x02, a)
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// Read follows ironic-python-agent: the first LAN channel with an address,
// 0.0.0.0 / ::/0 when none has one, the MAC of a channel with an address.
func TestRead(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name          string
		setup         func(f *fakeBMC)
		addr, v6, mac string
		channel       uint8
	}{
		{"one channel", func(f *fakeBMC) { f.lan(1, "10.205.9.2", "02:00:00:00:00:09") }, "10.205.9.2", "::/0", "02:00:00:00:00:09", 1},
		{"serial channel skipped", func(f *fakeBMC) {
			f.media[1] = 0x05 // asynch serial
			f.lan(3, "10.0.0.7", "02:00:00:00:00:07")
		}, "10.0.0.7", "::/0", "02:00:00:00:00:07", 3},
		{"unconfigured first channel", func(f *fakeBMC) {
			f.lan(1, "0.0.0.0", "02:00:00:00:00:01")
			f.lan(2, "192.168.1.20", "02:00:00:00:00:02")
		}, "192.168.1.20", "::/0", "02:00:00:00:00:02", 1},
		{"no address anywhere", func(f *fakeBMC) { f.lan(1, "0.0.0.0", "00:00:00:00:00:00") }, "0.0.0.0", "::/0", "<nil>", 1},
		{"zero mac", func(f *fakeBMC) { f.lan(1, "10.1.1.1", "00:00:00:00:00:00") }, "10.1.1.1", "::/0", "<nil>", 1},
		{"no LAN channel", func(f *fakeBMC) {}, "0.0.0.0", "::/0", "<nil>", 0},
		{"ipv6 dynamic", func(f *fakeBMC) {
			f.lan(1, "0.0.0.0", "02:00:00:00:00:06")
			f.v6(1, 2, []string{"fd00::9"}, []string{"fd00::1:9"})
		}, "0.0.0.0", "fd00::1:9", "02:00:00:00:00:06", 1},
		{"ipv6 static only", func(f *fakeBMC) {
			f.lan(1, "10.0.0.1", "02:00:00:00:00:06")
			f.v6(1, 1, []string{"fd00::9"}, nil)
		}, "10.0.0.1", "fd00::9", "02:00:00:00:00:06", 1},
		{"ipv6 disabled", func(f *fakeBMC) {
			f.lan(1, "10.0.0.1", "02:00:00:00:00:06")
			f.v6(1, 0, []string{"fd00::9"}, nil)
		}, "10.0.0.1", "::/0", "02:00:00:00:00:06", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			c.setup(f)
			info := Read(ctx, f)
			if str(info.Address) != c.addr || str(info.V6Address) != c.v6 || str(info.MAC) != c.mac || info.Channel != c.channel {
				t.Errorf("got %s, want address=%s v6=%s mac=%s channel=%d", info, c.addr, c.v6, c.mac, c.channel)
			}
		})
	}
}

func TestEnsureUser(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	f.users[2] = "admin"
	creds, err := EnsureUser(ctx, f, 1, "castiron")
	if err != nil {
		t.Fatal(err)
	}
	if creds.UserID != 3 || f.users[3] != "castiron" || len(creds.Password) != 16 || f.pw[3] != creds.Password ||
		f.access[[2]uint8{1, 3}] != PrivAdmin || !f.on[3] {
		t.Fatalf("creds %+v, bmc %+v", creds, f)
	}
	// Again: the same slot, a new password.
	again, err := EnsureUser(ctx, f, 1, "castiron")
	if err != nil || again.UserID != 3 || again.Password == creds.Password || f.pw[3] != again.Password {
		t.Fatalf("reset: %+v %v", again, err)
	}
	for i := range f.users[1:] {
		if f.users[i+1] == "" {
			f.users[i+1] = "taken"
		}
	}
	if _, err := EnsureUser(ctx, f, 1, "other"); err == nil {
		t.Error("no free slot: no error")
	}
	if _, err := EnsureUser(ctx, f, 0, "x"); err == nil {
		t.Error("no LAN channel: no error")
	}
	if _, err := EnsureUser(ctx, f, 1, "a-name-longer-than-16"); err == nil {
		t.Error("long name: no error")
	}
}
