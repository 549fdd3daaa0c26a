package ipmisim_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/ipmi"

	"github.com/bougou/go-ipmi/pkg/types"
)

func start(t *testing.T, cfg ipmisim.Config) *ipmisim.Fleet {
	t.Helper()
	f, err := ipmisim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func node(b *ipmisim.BMC, suite int) driver.Node {
	di := map[string]any{
		"ipmi_address": b.Host(), "ipmi_port": b.Port(),
		"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword,
	}
	if suite >= 0 {
		di["ipmi_cipher_suite"] = suite
	}
	return driver.Node{UUID: "6c616230-0000-4000-8000-0000000000" + strconv.Itoa(10+suite), DriverInfo: di}
}

// newDriver is castiron's ipmi driver; the sessions it keeps are closed
// when the test ends.
func newDriver(t *testing.T, cfg ipmi.Config) *ipmi.Driver {
	d := ipmi.New(cfg)
	t.Cleanup(func() { d.CloseSessions(context.Background()) })
	return d
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The castiron ipmi driver, cipher suites 3 and 17 and probed, against one
// simulated BMC: power verbs, boot device with persistence and UEFI.
func TestCastironDriver(t *testing.T) {
	f := start(t, ipmisim.Config{N: 1})
	b := f.BMCs[0]
	d := newDriver(t, ipmi.Config{})
	ctx := ctxT(t, 30*time.Second)
	for _, suite := range []int{3, 17, -1} {
		n := node(b, suite)
		if err := d.Verify(ctx, n); err != nil {
			t.Fatalf("suite %d: verify: %v", suite, err)
		}
		for _, step := range []struct {
			target string
			on     bool
		}{{driver.PowerOn, true}, {driver.PowerOff, false}, {driver.Rebooting, true}, {driver.SoftPowerOff, false}, {driver.SoftRebooting, true}} {
			if err := d.SetPowerState(ctx, n, step.target, 5*time.Second); err != nil {
				t.Fatalf("suite %d: %s: %v", suite, step.target, err)
			}
			if b.PoweredOn() != step.on {
				t.Fatalf("suite %d: after %s the BMC's power is %v", suite, step.target, b.PoweredOn())
			}
			ps, err := d.PowerState(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: driver.PowerOn, false: driver.PowerOff}[step.on]; ps != want {
				t.Fatalf("suite %d: power state %q after %s, want %q", suite, ps, step.target, want)
			}
		}
		n.BootMode = "uefi"
		if err := d.SetBootDevice(ctx, n, driver.BootPXE, true); err != nil {
			t.Fatal(err)
		}
		fl := b.BootFlags()
		if fl == nil || !fl.BootFlagsValid || !fl.Persist || fl.BIOSBootType != types.BIOSBootTypeEFI {
			t.Fatalf("suite %d: boot flags %+v, want valid, persistent, EFI", suite, fl)
		}
		bd, err := d.BootDevice(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if bd.BootDevice != driver.BootPXE || bd.Persistent == nil || !*bd.Persistent {
			t.Fatalf("suite %d: boot device %+v", suite, bd)
		}
		n.BootMode = "bios"
		if err := d.SetBootDevice(ctx, n, driver.BootDisk, false); err != nil {
			t.Fatal(err)
		}
		if fl := b.BootFlags(); fl.Persist || fl.BIOSBootType == types.BIOSBootTypeEFI {
			t.Fatalf("suite %d: one-time legacy boot flags %+v", suite, fl)
		}
	}
	// Wrong password: the driver's authentication error, not a timeout.
	n := node(b, 17)
	n.DriverInfo["ipmi_password"] = "wrong"
	if err := d.Verify(ctx, n); !errors.Is(err, ipmi.ErrAuthentication) {
		t.Fatalf("wrong password: %v, want ErrAuthentication", err)
	}
}

// ipmitool (Debian) with -C 3 and -C 17 against BMCs on their own loopback
// addresses: every command the simulator claims to serve.
func TestIpmitool(t *testing.T) {
	if _, err := exec.LookPath("ipmitool"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("ipmitool missing (apt-get install ipmitool)")
		}
		t.Skip("ipmitool missing (apt-get install ipmitool)")
	}
	f := start(t, ipmisim.Config{N: 2, Distinct: true, Base: []byte{127, 21, 0, 1}, Port: 6623})
	for i, suite := range []string{"3", "17"} {
		b := f.BMCs[i]
		tool := func(args ...string) string {
			t.Helper()
			full := append([]string{"-I", "lanplus", "-C", suite, "-H", b.Host(), "-p", strconv.Itoa(b.Port()),
				"-U", ipmisim.DefaultUser, "-P", ipmisim.DefaultPassword, "-N", "1", "-R", "2"}, args...)
			out, err := exec.CommandContext(ctxT(t, 20*time.Second), "ipmitool", full...).CombinedOutput()
			if err != nil {
				t.Fatalf("ipmitool -C %s %s: %v\n%s", suite, strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		expect := func(out, want string) {
			t.Helper()
			if !strings.Contains(out, want) {
				t.Fatalf("ipmitool -C %s: %q does not contain %q", suite, out, want)
			}
		}
		expect(tool("mc", "info"), "IPMI Version              : 2.0")
		expect(tool("channel", "getciphers", "ipmi", "1"), "17")
		expect(tool("chassis", "power", "status"), "Chassis Power is off")
		expect(tool("chassis", "power", "on"), "Up/On")
		if !b.PoweredOn() {
			t.Fatalf("-C %s: power on did not reach the chassis", suite)
		}
		expect(tool("chassis", "status"), "System Power         : on")
		expect(tool("chassis", "power", "cycle"), "Cycle")
		expect(tool("chassis", "power", "reset"), "Reset")
		expect(tool("chassis", "power", "soft"), "Soft")
		expect(tool("chassis", "power", "status"), "Chassis Power is off")
		tool("chassis", "power", "on")
		expect(tool("chassis", "power", "off"), "Down/Off")
		if b.PoweredOn() {
			t.Fatalf("-C %s: power off did not reach the chassis", suite)
		}
		expect(tool("chassis", "bootdev", "pxe", "options=persistent,efiboot"), "Set Boot Device to pxe")
		if fl := b.BootFlags(); fl == nil || !fl.Persist || fl.BIOSBootType != types.BIOSBootTypeEFI || !fl.BootFlagsValid {
			t.Fatalf("-C %s: boot flags %+v", suite, fl)
		}
		out := tool("chassis", "bootparam", "get", "5")
		expect(out, "Options apply to all future boots")
		expect(out, "BIOS EFI boot")
		expect(out, "Force PXE")
		// Set Session Privilege Level: ipmitool sends it at every session
		// start; -L OPERATOR asks for less than the maximum.
		expect(tool("-L", "OPERATOR", "chassis", "power", "status"), "Chassis Power is off")
		expect(tool("session", "info", "active"), "session handle")
	}
}

// Latency and loss: every answer waits 20-50 ms; with packets dropped the
// driver's re-sends still get through, a dead BMC times out, a revived one
// answers.
func TestLatencyAndLoss(t *testing.T) {
	f := start(t, ipmisim.Config{N: 1, LatencyMin: 20 * time.Millisecond, LatencyMax: 50 * time.Millisecond})
	b := f.BMCs[0]
	d := newDriver(t, ipmi.Config{Timeout: 300 * time.Millisecond})
	ctx := ctxT(t, 30*time.Second)
	n := node(b, 17)
	t0 := time.Now()
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	// A read is a whole session: at least 6 exchanges of >= 20 ms each.
	if el := time.Since(t0); el < 120*time.Millisecond {
		t.Fatalf("power read took %v with 20-50 ms per answer", el)
	}
	st := b.Stats()
	if st.Received < 6 || st.Answered != st.Received || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}

	b.SetDead(true)
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := d.PowerState(dctx, n); err == nil {
		t.Fatal("a dead BMC answered")
	}
	if b.Stats().Dropped == 0 {
		t.Fatal("nothing dropped by a dead BMC")
	}
	b.SetDead(false)
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("revived BMC: %v", err)
	}

	lossy := start(t, ipmisim.Config{N: 1, DropRate: 0.2})
	ln := node(lossy.BMCs[0], 3)
	// A session per read: 70 packets, so some are lost.
	pd := newDriver(t, ipmi.Config{Timeout: 300 * time.Millisecond, SessionPerOperation: true})
	for i := 0; i < 10; i++ {
		if _, err := pd.PowerState(ctx, ln); err != nil {
			t.Fatalf("20%% loss, read %d: %v", i, err)
		}
	}
	if lossy.BMCs[0].Stats().Dropped == 0 {
		t.Fatal("20% loss dropped nothing in 10 sessions")
	}
}

// Many BMCs, each on its own 127.x.y.z address.
func TestFleetAddresses(t *testing.T) {
	f := start(t, ipmisim.Config{N: 300, Distinct: true, Base: []byte{127, 22, 0, 250}, Port: 6623})
	seen := map[string]bool{}
	for _, b := range f.BMCs {
		if seen[b.Host()] || b.Port() != 6623 || strings.HasSuffix(b.Host(), ".0") || strings.HasSuffix(b.Host(), ".255") {
			t.Fatalf("bad address %v", b.Addr)
		}
		seen[b.Host()] = true
	}
	if last := f.BMCs[299].Host(); last != "127.22.2.41" {
		t.Fatalf("BMC 299 at %s", last)
	}
	d := newDriver(t, ipmi.Config{})
	ctx := ctxT(t, 30*time.Second)
	for _, i := range []int{0, 5, 299} {
		f.BMCs[i].SetPower(true)
		if ps, err := d.PowerState(ctx, node(f.BMCs[i], 17)); err != nil || ps != driver.PowerOn {
			t.Fatalf("BMC %d: %q %v", i, ps, err)
		}
	}
}
