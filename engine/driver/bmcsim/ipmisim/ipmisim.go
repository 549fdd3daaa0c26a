// Package ipmisim serves a fleet of simulated IPMI 2.0 BMCs on UDP loopback,
// for tests and benchmarks (bench/fleet). Each BMC is state-only: power is a
// field, boot flags are stored and read back; nothing boots unless a
// simulated machine hooks the power changes (OnPower, bmcsim/rack).
//
// The protocol is not hand-written: every BMC is github.com/bougou/go-ipmi's
// reference server (pkg/server over pkg/bmc and pkg/handlers: RMCP+ with
// Get Channel Authentication Capabilities, Open Session, RAKP 1-4 with cipher
// suites 3 and 17, session inactivity, Close Session, Get Device ID, Chassis
// Status/Control, Set/Get System Boot Options, Get Channel Cipher Suites, Set
// Session Privilege Level, ...). The same library is already the client side
// of the ipmi driver. What this package adds is the fleet: one address per
// BMC, a state-only chassis, per-answer latency and dropped packets, and
// counters.
//
// Nothing in the castiron binary imports it.
package ipmisim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/hal"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/types"
)

// Default credentials of every simulated BMC.
const (
	DefaultUser     = "admin"
	DefaultPassword = "password"
)

// Config describes a fleet. The zero value is one BMC on 127.0.0.1 with an
// OS-chosen port, no latency and no loss.
type Config struct {
	// N is the number of BMCs (default 1).
	N int
	// Distinct gives every BMC its own loopback address, 127.B.x.y from
	// Base (default 127.20.0.1) upward, all on Port (default 623): Linux
	// routes all of 127/8 to lo, and Ironic spaces commands per BMC address,
	// so a fair fleet has one address per BMC. Without it every BMC listens
	// on 127.0.0.1 with its own port (Port+i, or OS-chosen when Port is 0).
	Distinct bool
	Base     net.IP
	Port     int
	// User and Password are the administrator credentials (defaults above).
	User, Password string
	// LatencyMin/LatencyMax: every answer leaves after a uniform random
	// delay in [min, max] (real BMCs answer in 20-50 ms).
	LatencyMin, LatencyMax time.Duration
	// DropRate is the probability that an incoming packet is lost (0-1).
	DropRate float64
	// CipherSuites the BMCs accept (default 3 and 17).
	CipherSuites []types.CipherSuiteID
	// PoweredOn is every BMC's initial power state.
	PoweredOn bool
	// Serial gives every BMC a serial port reachable over IPMI
	// Serial-over-LAN (BMC.Serial: the simulated machine prints into it
	// and reads what the remote console types).
	Serial bool
}

// Fleet is a running set of BMCs. Close stops them all.
type Fleet struct {
	BMCs []*BMC

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// BMC is one simulated BMC.
type BMC struct {
	Addr *net.UDPAddr

	chassis *chassis
	serial  *SerialPort
	conn    *lossyConn
	srv     *server.Server
	bmc     *bmc.BMC
}

// Serial is the machine's serial port (nil without Config.Serial).
func (b *BMC) Serial() *SerialPort { return b.serial }

// Host is the BMC's IP address as a string (driver_info ipmi_address).
func (b *BMC) Host() string { return b.Addr.IP.String() }

// Port is the BMC's UDP port (driver_info ipmi_port).
func (b *BMC) Port() int { return b.Addr.Port }

// PoweredOn reports the chassis power.
func (b *BMC) PoweredOn() bool { return b.chassis.on() }

// SetPower changes the power behind the conductor's back (an operator at
// the front panel), for power sync tests.
func (b *BMC) SetPower(on bool) { _ = b.chassis.SetPower(context.Background(), on) }

// BootFlags returns the stored boot flags (nil before any Set System Boot
// Options parameter 5).
func (b *BMC) BootFlags() *types.BootOptionParam_BootFlags { return b.chassis.bootFlags() }

// SetDead makes the BMC drop every packet (true) or answer again (false).
func (b *BMC) SetDead(dead bool) { b.conn.dieAfter.Store(0); b.conn.dead.Store(dead) }

// DieAfter makes the BMC answer n more packets, then drop every one until
// SetDead(false): a BMC that vanishes in the middle of an operation.
func (b *BMC) DieAfter(n int) { b.conn.dieAfter.Store(int64(n) + 1) }

// SetDropRate changes the probability that an incoming packet is lost
// (0-1; values outside are clamped).
func (b *BMC) SetDropRate(p float64) { b.conn.drop.Store(math.Float64bits(min(max(p, 0), 1))) }

// SetSlow delays every answer by d more than the configured latency (0:
// back to it): a BMC slower than its client's timeout.
func (b *BMC) SetSlow(d time.Duration) { b.conn.slow.Store(int64(d)) }

// LateAnswer makes the BMC's n-th answer from now (1: the next) go out d
// later than the others: a client that timed out and sent its request
// again meanwhile gets two answers to it, the late one first.
func (b *BMC) LateAnswer(n int, d time.Duration) {
	b.conn.lateBy.Store(int64(d))
	b.conn.lateAt.Store(int64(n))
}

// PowerEvent is a power change the BMC carried out on its machine.
type PowerEvent int

// Power events passed to an OnPower hook.
const (
	PowerOff     PowerEvent = iota // off (hard, soft, or the machine itself)
	PowerOn                        // on from off
	PowerRestart                   // power cycle or hard reset of a running machine
)

// OnPower makes fn run after every power change of the chassis (Chassis
// Control, SetPower), outside the BMC's locks: the simulated machine behind
// the BMC (bmcsim/rack) boots or stops on it. Set it before the BMC is used.
func (b *BMC) OnPower(fn func(PowerEvent)) {
	b.chassis.mu.Lock()
	b.chassis.hook = fn
	b.chassis.mu.Unlock()
}

// TakeBootFlags is what firmware does at a boot: it reads the boot flags
// and clears a one-time override (valid but not persistent), as the IPMI
// boot flag valid bit clearing does. nil: no override.
func (b *BMC) TakeBootFlags() *types.BootOptionParam_BootFlags {
	c := b.chassis
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flags == nil || !c.flags.BootFlagsValid {
		return nil
	}
	cp := *c.flags
	if !c.flags.Persist {
		c.flags.BootFlagsValid = false
	}
	return &cp
}

// SetUser creates the user name (or resets its password when it exists)
// with administrator privilege on LAN channel 1, as an in-band Set User
// Name/Password/Access sequence would, and returns its user ID.
func (b *BMC) SetUser(name, password string) (uint8, error) {
	id := uint8(0)
	if u, err := b.bmc.Users.GetByName(name); err == nil {
		id = u.ID
	} else {
		for i := uint8(3); i <= b.bmc.Users.MaxUserCount(); i++ {
			if _, err := b.bmc.Users.Get(i); err != nil {
				id = i
				break
			}
		}
	}
	if id == 0 {
		return 0, fmt.Errorf("ipmisim: no free user slot for %q", name)
	}
	err := b.bmc.Users.Upsert(id, func(u *bmc.User) error {
		u.Name = name
		u.SetPassword([]byte(password))
		u.Enabled = true
		u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: bmc.PrivilegeLevelAdministrator, Enabled: true}
		return nil
	})
	return id, err
}

// Stats counts packets: received (including dropped), dropped, answered.
type Stats struct {
	Received, Dropped, Answered uint64
	// Controls counts Chassis Control commands that reached the chassis.
	Controls uint64
	// Reads counts power reads (Get Chassis Status).
	Reads uint64
	// MaxInFlight is the most requests the BMC held at once (received,
	// not yet answered): how many callers talked to it concurrently.
	MaxInFlight int64
}

// Stats returns this BMC's counters.
func (b *BMC) Stats() Stats {
	return Stats{
		Received:    b.conn.received.Load(),
		Dropped:     b.conn.dropped.Load(),
		Answered:    b.conn.answered.Load(),
		Controls:    b.chassis.controls.Load(),
		Reads:       b.chassis.reads.Load(),
		MaxInFlight: b.conn.maxInFlight.Load(),
	}
}

// Stats sums the counters of every BMC.
func (f *Fleet) Stats() Stats {
	var s Stats
	for _, b := range f.BMCs {
		x := b.Stats()
		s.Received += x.Received
		s.Dropped += x.Dropped
		s.Answered += x.Answered
		s.Controls += x.Controls
		s.Reads += x.Reads
		s.MaxInFlight = max(s.MaxInFlight, x.MaxInFlight)
	}
	return s
}

// Start binds every BMC's socket and serves them until Close (or ctx ends).
// It fails, leaving nothing running, when an address cannot be bound.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.N <= 0 {
		cfg.N = 1
	}
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	if cfg.Password == "" {
		cfg.Password = DefaultPassword
	}
	if cfg.LatencyMax < cfg.LatencyMin {
		cfg.LatencyMax = cfg.LatencyMin
	}
	if cfg.DropRate < 0 || cfg.DropRate > 1 {
		return nil, fmt.Errorf("ipmisim: drop rate %v outside [0, 1]", cfg.DropRate)
	}
	if cfg.Distinct {
		if cfg.Base == nil {
			cfg.Base = net.IPv4(127, 20, 0, 1)
		}
		if cfg.Port == 0 {
			cfg.Port = 623
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	f := &Fleet{cancel: cancel}
	for i := 0; i < cfg.N; i++ {
		addr, err := bmcAddr(cfg, i)
		if err != nil {
			f.Close()
			return nil, err
		}
		b, err := newBMC(cfg, addr, i)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.BMCs = append(f.BMCs, b)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_ = b.srv.Serve(runCtx)
		}()
	}
	return f, nil
}

// Close stops every BMC and waits for their servers to return.
func (f *Fleet) Close() {
	f.cancel()
	for _, b := range f.BMCs {
		_ = b.srv.Close()
		if b.serial != nil {
			b.serial.close()
		}
	}
	f.wg.Wait()
}

// bmcAddr is BMC i's address: Base+i over the low 24 bits of 127/8 (the
// network and broadcast-looking .0 and .255 host bytes are skipped), or
// 127.0.0.1 with its own port.
func bmcAddr(cfg Config, i int) (*net.UDPAddr, error) {
	if !cfg.Distinct {
		port := 0
		if cfg.Port != 0 {
			port = cfg.Port + i
		}
		return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, nil
	}
	b := cfg.Base.To4()
	if b == nil || b[0] != 127 {
		return nil, fmt.Errorf("ipmisim: base %v is not in 127/8", cfg.Base)
	}
	if b[3] == 0 || b[3] == 0xff {
		return nil, fmt.Errorf("ipmisim: base %v must end in 1-254", cfg.Base)
	}
	// Host bytes 1-254 of each /24, counted from Base.
	k := int(b[3]) - 1 + i
	net24 := (int(b[1])<<8 | int(b[2])) + k/254
	v := net24<<8 | (k%254 + 1)
	if net24 > 0xffff {
		return nil, fmt.Errorf("ipmisim: BMC %d does not fit in 127/8 from %v", i, cfg.Base)
	}
	return &net.UDPAddr{IP: net.IPv4(127, byte(v>>16), byte(v>>8), byte(v)), Port: cfg.Port}, nil
}

func newBMC(cfg Config, addr *net.UDPAddr, i int) (*BMC, error) {
	uc, err := net.ListenUDP("udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("ipmisim: BMC %d: %w", i, err)
	}
	ch := &chassis{power: cfg.PoweredOn}
	info := bmc.DeviceInfo{
		DeviceID: 0x20, DeviceRevision: 1, FirmwareMajor: 1, FirmwareMinor: 0x10,
		IPMIVersion:             0x02, // BCD, minor in the high nibble: 2.0 ManufacturerID: 0x000157, ProductID: 0x0001,
		AdditionalDeviceSupport: 0x80, // chassis device
	}
	var guid [16]byte
	copy(guid[:], fmt.Sprintf("ipmisim-%08d", i))
	opts := []bmc.Option{bmc.WithV15Disabled()}
	if len(cfg.CipherSuites) > 0 {
		opts = append(opts, bmc.WithCipherSuites(cfg.CipherSuites))
	}
	h := simHAL{ch: ch}
	if cfg.Serial {
		h.serial = newSerialPort()
	}
	b := bmc.New(info, guid, h, opts...)
	u, err := b.Users.Add(2, cfg.User)
	if err != nil {
		_ = uc.Close()
		return nil, err
	}
	// Add hands back the stored user; it is not shared yet.
	u.SetPassword([]byte(cfg.Password))
	u.Enabled = true
	u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: bmc.PrivilegeLevelAdministrator, Enabled: true}
	lc := &lossyConn{UDPConn: uc, min: cfg.LatencyMin, max: cfg.LatencyMax}
	lc.drop.Store(math.Float64bits(cfg.DropRate))
	return &BMC{
		Addr:    uc.LocalAddr().(*net.UDPAddr),
		chassis: ch,
		serial:  h.serial,
		conn:    lc,
		srv:     server.NewServer(b, lc),
		bmc:     b,
	}, nil
}

// lossyConn is the BMC's socket with a real BMC's manners: every answer is
// late by a random delay, some requests are lost.
type lossyConn struct {
	*net.UDPConn
	min, max time.Duration
	drop     atomic.Uint64 // math.Float64bits of the drop rate
	dead     atomic.Bool
	dieAfter atomic.Int64 // packets left + 1 before dead (0: off)
	slow     atomic.Int64 // extra delay of every answer (time.Duration)
	lateAt   atomic.Int64 // answers left + 1 before the late one (0: off)
	lateBy   atomic.Int64 // its extra delay (time.Duration)

	received, dropped, answered atomic.Uint64
	inFlight, maxInFlight       atomic.Int64
	closed                      atomic.Bool
}

func (c *lossyConn) ReadFrom(buf []byte) (int, net.Addr, error) {
	for {
		n, addr, err := c.UDPConn.ReadFrom(buf)
		if err != nil {
			return n, addr, err
		}
		c.received.Add(1)
		if c.dieAfter.Load() > 0 && c.dieAfter.Add(-1) == 0 {
			c.dead.Store(true)
		}
		if drop := math.Float64frombits(c.drop.Load()); c.dead.Load() || (drop > 0 && rand.Float64() < drop) {
			c.dropped.Add(1)
			continue
		}
		v := c.inFlight.Add(1)
		for m := c.maxInFlight.Load(); v > m && !c.maxInFlight.CompareAndSwap(m, v); m = c.maxInFlight.Load() {
		}
		return n, addr, nil
	}
}

// WriteTo sends data after the configured delay without blocking the
// handler (which may hold the session's lock).
func (c *lossyConn) WriteTo(data []byte, addr net.Addr) (int, error) {
	d := c.min + time.Duration(c.slow.Load())
	if c.max > c.min {
		d += rand.N(c.max - c.min + 1)
	}
	if c.lateAt.Load() > 0 && c.lateAt.Add(-1) == 0 {
		d += time.Duration(c.lateBy.Load())
	}
	c.answered.Add(1)
	if d <= 0 {
		c.inFlight.Add(-1)
		return c.UDPConn.WriteTo(data, addr)
	}
	pkt := append([]byte(nil), data...)
	time.AfterFunc(d, func() {
		c.inFlight.Add(-1)
		if !c.closed.Load() {
			_, _ = c.UDPConn.WriteTo(pkt, addr)
		}
	})
	return len(data), nil
}

func (c *lossyConn) Close() error {
	c.closed.Store(true)
	return c.UDPConn.Close()
}

// simHAL exposes the chassis and, with Config.Serial, the serial console:
// the simulated machine has no sensors or storage (their commands answer
// "not supported").
type simHAL struct {
	ch     *chassis
	serial *SerialPort
}

func (h simHAL) Chassis() hal.ChassisHAL { return h.ch }
func (simHAL) Sensors() hal.SensorHAL    { return nil }
func (simHAL) Storage() hal.StorageHAL   { return nil }
func (simHAL) Network() hal.NetworkHAL   { return nil }
func (simHAL) GPIO() hal.GPIOHAL         { return nil }
func (simHAL) I2C() hal.I2CHAL           { return nil }
func (h simHAL) Console() hal.ConsoleHAL {
	if h.serial == nil {
		return nil // a typed nil would read as a console
	}
	return h.serial
}
func (simHAL) Close() error { return nil }

var _ hal.HAL = simHAL{}

// chassis is a machine reduced to its power and boot flags. Power cycle and
// hard reset leave a powered-on machine on (it restarts at once) and do
// nothing to one that is off; soft off (the OS shuts down) is immediate.
type chassis struct {
	mu       sync.Mutex
	power    bool
	flags    *types.BootOptionParam_BootFlags
	ack      types.BootOptionParam_BootInfoAcknowledge
	controls atomic.Uint64
	reads    atomic.Uint64
	hook     func(PowerEvent) // OnPower; called without mu held
}

// notify runs the OnPower hook, if any, with mu released.
func (c *chassis) notify(ev PowerEvent) {
	c.mu.Lock()
	hook := c.hook
	c.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
}

func (c *chassis) on() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.power
}

func (c *chassis) bootFlags() *types.BootOptionParam_BootFlags {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flags == nil {
		return nil
	}
	cp := *c.flags
	return &cp
}

func (c *chassis) PowerState(context.Context) (bool, error) {
	c.reads.Add(1)
	return c.on(), nil
}

func (c *chassis) SetPower(_ context.Context, on bool) error {
	c.controls.Add(1)
	c.mu.Lock()
	was := c.power
	c.power = on
	c.mu.Unlock()
	switch {
	case on && !was:
		c.notify(PowerOn)
	case !on && was:
		c.notify(PowerOff)
	}
	return nil
}

func (c *chassis) PowerCycle(context.Context) error { c.restart(); return nil }
func (c *chassis) ColdReset(context.Context) error  { c.restart(); return nil }

// restart is a power cycle or hard reset: a running machine starts again.
func (c *chassis) restart() {
	c.controls.Add(1)
	if c.on() {
		c.notify(PowerRestart)
	}
}

// WarmReset is what go-ipmi's handler calls for Chassis Control 05h, "soft
// shutdown" (ACPI): the OS powers the machine off.
func (c *chassis) WarmReset(ctx context.Context) error {
	c.mu.Lock()
	c.controls.Add(1)
	was := c.power
	c.power = false
	c.mu.Unlock()
	if was {
		c.notify(PowerOff)
	}
	return nil
}

func (c *chassis) Identify(context.Context, uint8) error        { return nil }
func (c *chassis) IntrusionState(context.Context) (bool, error) { return false, nil }

func (c *chassis) SetBootFlags(_ context.Context, f *types.BootOptionParam_BootFlags) error {
	if f == nil {
		return hal.ErrNotSupported
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := *f
	c.flags = &cp
	return nil
}

// GetBootFlags answers "no override" until flags are set, as a real BMC
// does, rather than "parameter not supported".
func (c *chassis) GetBootFlags(context.Context) (*types.BootOptionParam_BootFlags, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flags == nil {
		return &types.BootOptionParam_BootFlags{}, nil
	}
	cp := *c.flags
	return &cp, nil
}

func (c *chassis) SetBootInfoAcknowledge(_ context.Context, a *types.BootOptionParam_BootInfoAcknowledge) error {
	if a == nil {
		return hal.ErrNotSupported
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ack = *a
	return nil
}

func (c *chassis) GetBootInfoAcknowledge(context.Context) (*types.BootOptionParam_BootInfoAcknowledge, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.ack
	return &a, nil
}
