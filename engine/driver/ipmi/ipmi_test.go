package ipmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/fault"
)

func testNode(di map[string]any) driver.Node {
	return driver.Node{UUID: "6c616230-0000-4000-8000-000000000001", DriverInfo: di}
}

// noLeaks fails the test if it leaves goroutines behind: every session's
// keep-alive goroutine and UDP socket must be gone once an operation returns.
// Call it first, so its cleanup runs after the simulators are stopped.
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		// go-ipmi's UDP reader may outlive a cancelled exchange by up to
		// its read timeout (1s).
		for end := time.Now().Add(3 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ipmitoolPower is "ipmitool chassis power status" reduced to Ironic's states.
func ipmitoolPower(t *testing.T, s *ipmisim.Sim) string {
	out := s.Ipmitool(t, "chassis", "power", "status")
	switch strings.TrimSpace(out) {
	case "Chassis Power is on":
		return driver.PowerOn
	case "Chassis Power is off":
		return driver.PowerOff
	}
	t.Fatalf("ipmitool power status: %q", out)
	return ""
}

func TestPowerRoundTrip(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 30*time.Second)

	check := func(want string) {
		t.Helper()
		got, err := d.PowerState(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("driver power state %q, want %q", got, want)
		}
		if got := ipmitoolPower(t, s); got != want {
			t.Fatalf("ipmitool power state %q, want %q", got, want)
		}
	}
	set := func(target string) time.Duration {
		t.Helper()
		start := time.Now()
		if err := d.SetPowerState(ctx, n, target, 10*time.Second); err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		return time.Since(start)
	}

	if err := d.Verify(ctx, n); err != nil {
		t.Fatal(err)
	}
	check(driver.PowerOff)
	t.Logf("power on: %v", set(driver.PowerOn))
	check(driver.PowerOn)
	t.Logf("power on again (no-op): %v", set(driver.PowerOn))
	t.Logf("power off: %v", set(driver.PowerOff))
	check(driver.PowerOff)

	set(driver.PowerOn)
	s.SetFile(t, "events", "")
	t.Logf("rebooting: %v", set(driver.Rebooting))
	check(driver.PowerOn)
	if ev := s.File(t, "events"); ev != "set power 0\nset power 1" {
		t.Fatalf("rebooting: want off then on, BMC saw %q", ev)
	}

	s.SetFile(t, "events", "")
	took := set(driver.SoftPowerOff)
	t.Logf("soft power off (simulated OS takes 300ms): %v", took)
	check(driver.PowerOff)
	if ev := s.File(t, "events"); ev != "set shutdown 1\nsoftoff done" {
		t.Fatalf("soft power off: BMC saw %q", ev)
	}
	if took < 300*time.Millisecond {
		t.Fatalf("soft power off returned after %v, before the node was off", took)
	}

	set(driver.PowerOn)
	s.SetFile(t, "events", "")
	t.Logf("soft rebooting: %v", set(driver.SoftRebooting))
	check(driver.PowerOn)
	if ev := s.File(t, "events"); ev != "set shutdown 1\nsoftoff done\nset power 1" {
		t.Fatalf("soft rebooting: BMC saw %q", ev)
	}

	// Rebooting a node that is off only powers it on (Ironic's reboot).
	set(driver.PowerOff)
	s.SetFile(t, "events", "")
	set(driver.Rebooting)
	if ev := s.File(t, "events"); ev != "set power 1" {
		t.Fatalf("rebooting from off: BMC saw %q", ev)
	}

	err := d.SetPowerState(ctx, n, "sideways", time.Second)
	if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "invalid power state sideways") {
		t.Fatalf("bad target: %v", err)
	}
}

func TestSoftPowerOffTimeout(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 30*time.Second)
	if err := d.SetPowerState(ctx, n, driver.PowerOn, time.Second); err != nil {
		t.Fatal(err)
	}
	s.SetFile(t, "softoff_ignore", "1") // the OS ignores the ACPI power button

	// The wait is long enough for several status reads even when ipmi_sim
	// is starved of CPU; the error names the last state read, or, when every
	// read in the window failed (a loaded machine), the last read's failure.
	const wait = 2 * time.Second
	start := time.Now()
	err := d.SetPowerState(ctx, n, driver.SoftPowerOff, wait)
	took := time.Since(start)
	if !errors.Is(err, ErrPowerTimeout) {
		t.Fatalf("want power timeout, got %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `(still "power on")`) && !strings.Contains(msg, "last read failed") {
		t.Fatalf("power timeout names neither the state read nor the failed read: %v", err)
	}
	// Bounds, not timings: it waited for the whole window and did not hang.
	if took < wait || took > wait+15*time.Second {
		t.Fatalf("timed out after %v, want the %v window", took, wait)
	}
	t.Logf("%v after %v", err, took)

	// A cancelled context ends the wait at once and says so.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	err = d.SetPowerState(cctx, n, driver.SoftPowerOff, 10*time.Second)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Fatalf("cancelled wait: %v after %v", err, time.Since(start))
	}
}

func TestBootDevice(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 30*time.Second)

	for _, tt := range []struct {
		device     string
		persistent bool
		bootMode   string
		simValue   string // what ipmi_sim hands its chassis_control program
		ipmitool   string // "ipmitool chassis bootparam get 5" selector line
	}{
		{driver.BootPXE, true, "bios", "pxe", "Force PXE"},
		{driver.BootDisk, false, "bios", "default", "Force Boot from default Hard-Drive"},
		{driver.BootPXE, false, "uefi", "pxe", "Force PXE"},
		{driver.BootCDROM, true, "uefi", "cdrom", "Force Boot from CD/DVD"},
		{driver.BootBIOS, false, "", "bios", "Force Boot into BIOS Setup"},
	} {
		n := testNode(s.DriverInfo())
		n.BootMode = tt.bootMode
		if err := d.SetBootDevice(ctx, n, tt.device, tt.persistent); err != nil {
			t.Fatalf("%s: %v", tt.device, err)
		}
		if got := s.File(t, "boot"); got != tt.simValue {
			t.Errorf("%s: BMC got %q, want %q", tt.device, got, tt.simValue)
		}
		out := s.Ipmitool(t, "chassis", "bootparam", "get", "5")
		if !strings.Contains(out, "Boot Device Selector : "+tt.ipmitool+"\n") {
			t.Errorf("%s: ipmitool bootparam get 5:\n%s", tt.device, out)
		}
		got, err := d.BootDevice(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		// ipmi_sim keeps only the selector: it always reads back one-time.
		if got.BootDevice != tt.device || got.Persistent == nil || *got.Persistent {
			t.Errorf("BootDevice = %q persistent %v, want %q false", got.BootDevice, got.Persistent, tt.device)
		}
	}

	// ipmi_sim has no "safe" (hard drive, safe mode) and says so; the error
	// names the device and carries the BMC's completion code.
	err := d.SetBootDevice(ctx, testNode(s.DriverInfo()), driver.BootSafe, false)
	if err == nil || fault.KindOf(err) != fault.Internal || !strings.Contains(err.Error(), "set boot device safe") ||
		!strings.Contains(err.Error(), "0xff") {
		t.Fatalf("safe on ipmi_sim: %v", err)
	}
	err = d.SetBootDevice(ctx, testNode(s.DriverInfo()), "floppy", false)
	if !fault.Is(err, fault.Invalid) || err.Error() != "Invalid boot device floppy specified." {
		t.Fatalf("bad device: %v", err)
	}
}

// TestBootFlagsOnTheWire checks the persistent and EFI bits the BMC really
// receives: ipmi_sim drops them before its chassis_control program and reads
// back none, so the test relays IPMI 1.5 (signed, not encrypted) and reads
// the request bytes.
func TestBootFlagsOnTheWire(t *testing.T) {
	s := ipmisim.StartSim(t)
	r := startRelay(t, s.Port)
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	di := s.DriverInfo()
	di["ipmi_port"] = r.port
	di["ipmi_protocol_version"] = "1.5"

	cases := []struct {
		device     string
		persistent bool
		bootMode   string
		want       []byte // Ironic: raw 0x00 0x08 0x05 <these> for UEFI
	}{
		{driver.BootPXE, true, "uefi", []byte{0xe0, 0x04, 0, 0, 0}},
		{driver.BootPXE, false, "uefi", []byte{0xa0, 0x04, 0, 0, 0}},
		{driver.BootPXE, true, "bios", []byte{0xc0, 0x04, 0, 0, 0}},
		{driver.BootDisk, false, "bios", []byte{0x80, 0x08, 0, 0, 0}},
	}
	for _, c := range cases {
		n := testNode(di)
		n.BootMode = c.bootMode
		if err := d.SetBootDevice(ctx, n, c.device, c.persistent); err != nil {
			t.Fatal(err)
		}
	}
	got := r.bootFlagRequests()
	if len(got) != len(cases) {
		t.Fatalf("saw %d boot flag requests, want %d", len(got), len(cases))
	}
	for i, c := range cases {
		if !bytes.Equal(got[i], c.want) {
			t.Errorf("%s persistent=%t %s: sent % x, want % x", c.device, c.persistent, c.bootMode, got[i], c.want)
		}
	}
}

func TestForceBootDevice(t *testing.T) {
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	di := s.DriverInfo()
	di["ipmi_force_boot_device"] = true
	n := testNode(di)
	n.InternalInfo = map[string]any{"persistent_boot_device": "pxe"}

	got, err := d.BootDevice(ctx, n)
	if err != nil || got.BootDevice != driver.BootPXE || got.Persistent == nil || !*got.Persistent {
		t.Fatalf("BootDevice = %+v, %v; want pxe from driver_internal_info", got, err)
	}
	if err := d.SetPowerState(ctx, n, driver.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := s.File(t, "events"); ev != "set boot pxe\nset power 1" {
		t.Fatalf("power on with ipmi_force_boot_device: BMC saw %q", ev)
	}
}

func TestWrongCredentials(t *testing.T) {
	noLeaks(t)
	s := ipmisim.StartSim(t)
	ctx := ctxT(t, 30*time.Second)
	for _, tt := range []struct {
		name string
		kv   []any
		cfg  Config
	}{
		{"wrong password, probe", []any{"ipmi_password", "wrong"}, Config{}},
		{"wrong password, suite 3", []any{"ipmi_password", "wrong", "ipmi_cipher_suite", 3}, Config{}},
		{"unknown user", []any{"ipmi_username", "nobody"}, Config{}},
		// ipmi_sim, like many BMCs, does not answer IPMI 1.5 with a wrong
		// password: it can only look like a timeout, so keep it short.
		{"wrong password, IPMI 1.5", []any{"ipmi_password", "wrong", "ipmi_protocol_version", "1.5"},
			Config{Timeout: 100 * time.Millisecond, Retries: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			di := s.DriverInfo()
			for i := 0; i < len(tt.kv); i += 2 {
				di[tt.kv[i].(string)] = tt.kv[i+1]
			}
			d := newTestDriver(t, tt.cfg)
			start := time.Now()
			_, err := d.PowerState(ctx, testNode(di))
			took := time.Since(start)
			if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "authentication failed") {
				t.Fatalf("want authentication failure, got %v", err)
			}
			if fault.KindOf(err) != fault.Internal {
				t.Errorf("a refused login is a BMC failure, not bad input: kind %v", fault.KindOf(err))
			}
			t.Logf("%v: %v", took, err)
			if took > time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	noLeaks(t)
	d := newTestDriver(t, Config{})

	// Nothing listens: the kernel answers ICMP port unreachable at once.
	port, err := ipmisim.FreeUDPPort()
	if err != nil {
		t.Fatal(err)
	}
	n := testNode(map[string]any{"ipmi_address": "127.0.0.1", "ipmi_port": port, "ipmi_username": "admin", "ipmi_password": "x"})
	start := time.Now()
	_, err = d.PowerState(ctxT(t, 5*time.Second), n)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || time.Since(start) > time.Second {
		t.Fatalf("closed port: %v after %v", err, time.Since(start))
	}
	t.Logf("closed port: %v after %v", err, time.Since(start))

	// Something listens and never answers (a BMC that is down or firewalled):
	// the context deadline ends it.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := silent.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	n.DriverInfo["ipmi_port"] = silent.LocalAddr().(*net.UDPAddr).Port
	const deadline = 700 * time.Millisecond
	start = time.Now()
	_, err = d.PowerState(ctxT(t, deadline), n)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || took > deadline+300*time.Millisecond {
		t.Fatalf("silent BMC: %v after %v, want deadline exceeded after ~%v", err, took, deadline)
	}
	t.Logf("silent BMC: %v after %v", err, took)
}

func TestCipherSuiteFallback(t *testing.T) {
	s := ipmisim.StartSim(t)
	// Every read sets a session up: that is what is tested here.
	d := newTestDriver(t, Config{SessionPerOperation: true})
	n := testNode(s.DriverInfo())
	ctx := ctxT(t, 30*time.Second)
	key := suiteKey{uuid: n.UUID, address: "127.0.0.1", port: s.Port}

	start := time.Now()
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	cold := time.Since(start)
	if suite, ok := d.suites.get(key); !ok || suite != 3 {
		t.Fatalf("remembered suite %d %v, want 3", suite, ok)
	}
	start = time.Now()
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	warm := time.Since(start)
	t.Logf("cold power status (17 refused, 3 works): %v; warm (suite 3 remembered): %v", cold, warm)
	if cold > time.Second {
		t.Errorf("cold power status took %v", cold)
	}

	// A remembered suite the BMC stops taking is forgotten and probed again.
	d.suites.set(key, 17)
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	if suite, _ := d.suites.get(key); suite != 3 {
		t.Fatalf("after a stale entry: remembered %d, want 3", suite)
	}

	// An explicit suite is honoured: 17 fails on ipmi_sim, 3 works.
	di := s.DriverInfo()
	di["ipmi_cipher_suite"] = 17
	_, err := d.PowerState(ctx, testNode(di))
	if err == nil || !strings.Contains(err.Error(), "cipher suite id (17)") || errors.Is(err, ErrAuthentication) {
		t.Fatalf("explicit suite 17 on ipmi_sim: %v", err)
	}
	di["ipmi_cipher_suite"] = "3"
	if _, err := d.PowerState(ctx, testNode(di)); err != nil {
		t.Fatal(err)
	}
}

func TestIPMI15(t *testing.T) {
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	di := s.DriverInfo()
	di["ipmi_protocol_version"] = "1.5"
	n := testNode(di)
	ctx := ctxT(t, 30*time.Second)
	if err := d.SetPowerState(ctx, n, driver.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := ipmitoolPower(t, s); got != driver.PowerOn {
		t.Fatalf("ipmitool says %q", got)
	}
	if st, err := d.PowerState(ctx, n); err != nil || st != driver.PowerOn {
		t.Fatalf("PowerState = %q, %v", st, err)
	}
}

func TestPrivilegeLevel(t *testing.T) {
	s := ipmisim.StartSim(t)
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	di := s.DriverInfo()
	di["ipmi_priv_level"] = "USER"
	n := testNode(di)
	// USER may read the chassis status but not control it.
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	err := d.SetPowerState(ctx, n, driver.PowerOn, time.Second)
	if err == nil || !strings.Contains(err.Error(), "insufficient privilege level") {
		t.Fatalf("power on as USER: %v", err)
	}
}

// TestConcurrentNodes drives several BMCs at once through one Driver.
func TestConcurrentNodes(t *testing.T) {
	noLeaks(t)
	const nodes = 4
	d := newTestDriver(t, Config{})
	ctx := ctxT(t, 60*time.Second)
	sims := make([]*ipmisim.Sim, nodes)
	for i := range sims {
		sims[i] = ipmisim.StartSim(t)
	}
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for i, s := range sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := driver.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), DriverInfo: s.DriverInfo()}
			for _, step := range []string{driver.PowerOn, driver.Rebooting, driver.PowerOff} {
				if err := d.SetPowerState(ctx, n, step, 5*time.Second); err != nil {
					errs <- fmt.Errorf("node %d %s: %w", i, step, err)
					return
				}
			}
			if err := d.SetBootDevice(ctx, n, driver.BootPXE, true); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, s := range sims {
		if p, b := s.File(t, "power"), s.File(t, "boot"); p != "0" || b != "pxe" {
			t.Errorf("node %d: power %s boot %s", i, p, b)
		}
	}
}

// BenchmarkPowerStateWarm is one power status with the cipher suite known:
// session setup, Get Chassis Status, Close Session. ipmi_sim's chassis
// status forks a shell for its chassis_control program, which is most of it.
func BenchmarkPowerStateWarm(b *testing.B) {
	s := ipmisim.StartSim(b)
	d := New(Config{Logger: slog.New(slog.DiscardHandler)})
	n := testNode(s.DriverInfo())
	ctx := context.Background()
	if _, err := d.PowerState(ctx, n); err != nil { // learn the suite
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.PowerState(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionCold is the session alone on a BMC the driver has not
// seen: suite 17 refused by ipmi_sim, then suite 3.
func BenchmarkSessionCold(b *testing.B) {
	s := ipmisim.StartSim(b)
	inf, err := parseInfo(testNode(s.DriverInfo()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		d := New(Config{Logger: slog.New(slog.DiscardHandler)})
		if err := d.session(ctx, inf, deviceID(ctx)); err != nil {
			b.Fatal(err)
		}
	}
}

func deviceID(ctx context.Context) func(s *conn) error {
	return func(s *conn) error {
		c, err := s.client(ctx)
		if err != nil {
			return err
		}
		_, err = c.GetDeviceID(ctx)
		return err
	}
}

// BenchmarkSessionWarm is the session alone (Get Device ID needs no
// chassis_control fork): what the driver itself costs per operation.
func BenchmarkSessionWarm(b *testing.B) {
	s := ipmisim.StartSim(b)
	d := New(Config{Logger: slog.New(slog.DiscardHandler)})
	inf, err := parseInfo(testNode(s.DriverInfo()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := d.session(ctx, inf, deviceID(ctx)); err != nil { // learn the suite
		b.Fatal(err)
	}
	for b.Loop() {
		if err := d.session(ctx, inf, deviceID(ctx)); err != nil {
			b.Fatal(err)
		}
	}
}
