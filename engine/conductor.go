// Package engine is castiron's conductor: it owns every node state change.
// httpapi, pxe and ramdisk call its methods; it runs the provision state
// machine (states.go), the background tasks, timeouts, restart recovery and
// periodic jobs, through the drivers of each node's hardware type.
package engine

import (
	"castiron/engine/console"
	"context"
	"log/slog"
	"sync"
	"time"

	"castiron/engine/inspectrules"
	"castiron/storage"
)

// Config tunes the conductor. Zero values take the defaults.
type Config struct {
	Hostname       string
	ConductorGroup string
	// APIURL is how other conductors reach this one's API (verbs on the
	// nodes it owns are forwarded there).
	APIURL string
	// HashPartitionExponent is Ironic's hash_partition_exponent: each
	// conductor has 2^exponent points on the hash ring. Ironic's default,
	// 5, leaves three conductors owning 22-38 % of the nodes each; 8 keeps
	// them within 10 % of even. Every conductor must use the same value.
	HashPartitionExponent int
	// CallbackTimeout bounds every *wait state (inspect wait, clean wait,
	// wait call-back, rescue wait, service wait); Ironic's default is 1800 s.
	CallbackTimeout time.Duration
	// HeartbeatInterval is how often the conductor row is refreshed; a
	// conductor is alive while its last heartbeat is younger than HeartbeatTimeout.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// PowerSyncInterval is how often power states are read back from BMCs
	// (Ironic's [conductor]sync_power_state_interval, 60 s).
	PowerSyncInterval time.Duration
	// PowerSyncWorkers bounds the BMC reads of a power sync pass in flight
	// at once (default 100; Ironic: sync_power_state_workers 8 green
	// threads). PowerSyncPerBMC bounds them per BMC address (host:port,
	// default 1): nodes behind one BMC are read one after the other.
	PowerSyncWorkers int
	PowerSyncPerBMC  int
	// PowerSyncTimeout bounds one node's read, so a dead or slow BMC holds
	// one worker that long and delays no other BMC (default 15 s).
	PowerSyncTimeout time.Duration
	// PowerSyncMaxRetries is Ironic's power_state_sync_max_retries (3):
	// a node whose BMC fails more reads in a row than this goes to
	// maintenance with fault "power failure" and power state None.
	PowerSyncMaxRetries int
	// PowerFailureRecoveryInterval is how often nodes in maintenance for
	// a power failure are read again, and taken out of maintenance when
	// their BMC answers (Ironic's power_failure_recovery_interval, 300 s).
	PowerFailureRecoveryInterval time.Duration
	// TimeoutCheckInterval is how often wait-state deadlines are checked.
	TimeoutCheckInterval time.Duration
	// OrphanCheckInterval is how often reservations whose reserving write
	// failed ambiguously (the database server went away during its COMMIT)
	// are re-read and, when no task of this conductor holds them, released
	// (orphans.go; default 1 s). Nothing is read while there are none.
	OrphanCheckInterval time.Duration
	// PowerTimeout bounds one power operation when the request names none.
	PowerTimeout time.Duration
	// Serial consoles (console.go): ConsoleHost is the host their URLs
	// name (Ironic's socat_address; default 127.0.0.1), ConsoleListen the
	// address their TCP ports bind ("" every address), ConsolePorts the
	// range ports are taken from (Ironic's port_range; zero: none, only
	// ipmi_terminal_port), Console the sessions' tuning.
	ConsoleHost, ConsoleListen string
	ConsolePorts               console.Ports
	Console                    console.Config
	// ConsoleSyncInterval is how often enabled consoles of nodes this
	// conductor took over are started, and those it lost stopped
	// (default 10 s).
	ConsoleSyncInterval time.Duration
	// VerbSettle is how long a provision verb's answer waits for its task
	// to record its outcome (provision.go: settle); negative: not at all.
	VerbSettle time.Duration
	// AutomatedClean is the global switch; a node's automated_clean overrides it.
	AutomatedClean bool
	// Discovery lets unknown MACs network-boot the ramdisk at any time (not
	// only while a node without ports is being inspected) and makes a node
	// of inspection data that matches none (discovery.go).
	Discovery bool
	// DiscoveryDriver is the hardware type of discovered nodes ("ipmi").
	DiscoveryDriver string
	// DiscoveryManage moves every discovered node on to manage, also
	// without BMC credentials.
	DiscoveryManage bool
	// DiscoveryBMCUser, when set, asks the ramdisk of a machine being
	// discovered to create this IPMI user in-band.
	DiscoveryBMCUser string
	// DiscoveryMaxEnroll caps the nodes waiting in enroll for discovery
	// to add another (negative: no cap); DiscoveryRate caps new nodes per
	// minute.
	DiscoveryMaxEnroll int
	DiscoveryRate      float64
	// InspectOverwrite lets inspection replace properties the operator set
	// (a node's driver_info inspect_overwrite overrides it).
	InspectOverwrite bool
	// InspectionKernelArgs are more kernel arguments of the ramdisk when it
	// boots to inspect from an ISO (virtual media, UEFI HTTP boot); the
	// network boot's come from pxe/netboot's config (the same flag).
	InspectionKernelArgs []string
	// CleanFullErase adds a full overwrite of every disk to automated cleaning.
	CleanFullErase bool
	// ImageBaseURL is where nodes fetch images castiron hosts (image_source
	// given as a bare name).
	ImageBaseURL string
	// VMedia configures the redfish-virtual-media boot interface (the
	// ramdisk ISO); nil leaves it unable to boot anything.
	VMedia *VMediaConfig
	// Firmware is where firmware.update stages the images it verified for
	// the BMC to fetch (firmware.go); nil hands BMCs the operator's URLs.
	Firmware *FirmwareConfig
	// AgentHeartbeatInterval is what the agent is told between heartbeats.
	AgentHeartbeatInterval time.Duration
	// AgentPowerOffWait is how long the agent gets to power off by itself.
	AgentPowerOffWait time.Duration
	// StepPollInterval is the pause between two calls of an asynchronous
	// conductor step (a BMC job, settings applied after a reboot);
	// StepTimeout bounds the whole wait (steps.go). Defaults 10 s and 30 min
	// (Ironic's [redfish]firmware_update_status_interval and the
	// clean/deploy callback timeout).
	StepPollInterval time.Duration
	StepTimeout      time.Duration
	// BuiltInRules are the inspection rules of the rules file, applied
	// after the stored ones of equal priority.
	BuiltInRules []*inspectrules.Rule
	// RulesMaskSecrets is Ironic's [inspection_rules]mask_secrets: always
	// (default), never or sensitive.
	RulesMaskSecrets string
	Logger           *slog.Logger
	// Observer, when set, is told of transitions, verb durations, BMC and
	// agent calls (metrics).
	Observer Observer
}

func (c *Config) setDefaults() {
	if c.CallbackTimeout == 0 {
		c.CallbackTimeout = 1800 * time.Second
	}
	if c.ConsoleSyncInterval <= 0 {
		c.ConsoleSyncInterval = 10 * time.Second
	}
	// A dead conductor's nodes move to the others once its last heartbeat
	// is HeartbeatTimeout old: 15 s by default (Ironic: 10 s and 60 s).
	if c.HashPartitionExponent == 0 {
		c.HashPartitionExponent = 8
	}
	if c.StepPollInterval <= 0 {
		c.StepPollInterval = 10 * time.Second
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 30 * time.Minute
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 15 * time.Second
	}
	if c.PowerSyncInterval == 0 {
		c.PowerSyncInterval = 60 * time.Second
	}
	if c.PowerSyncWorkers <= 0 {
		c.PowerSyncWorkers = DefaultPowerSyncWorkers
	}
	if c.PowerSyncPerBMC <= 0 {
		c.PowerSyncPerBMC = 1
	}
	if c.PowerSyncTimeout <= 0 {
		c.PowerSyncTimeout = 15 * time.Second
	}
	if c.PowerSyncMaxRetries == 0 {
		c.PowerSyncMaxRetries = 3
	}
	if c.PowerFailureRecoveryInterval == 0 {
		c.PowerFailureRecoveryInterval = 300 * time.Second
	}
	if c.TimeoutCheckInterval == 0 {
		c.TimeoutCheckInterval = 10 * time.Second
	}
	if c.OrphanCheckInterval <= 0 {
		c.OrphanCheckInterval = time.Second
	}
	if c.PowerTimeout == 0 {
		c.PowerTimeout = 60 * time.Second
	}
	if c.VerbSettle == 0 {
		c.VerbSettle = 10 * time.Millisecond
	}
	if c.AgentHeartbeatInterval == 0 {
		c.AgentHeartbeatInterval = 2 * time.Second
	}
	if c.AgentPowerOffWait == 0 {
		c.AgentPowerOffWait = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DiscoveryDriver == "" {
		c.DiscoveryDriver = "ipmi"
	}
	if c.DiscoveryMaxEnroll == 0 {
		c.DiscoveryMaxEnroll = DefaultDiscoveryMaxEnroll
	}
	if c.DiscoveryRate <= 0 {
		c.DiscoveryRate = DefaultDiscoveryRate
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
}

// Conductor runs node operations. Create with New, then Start; Stop ends
// every goroutine it started.
type Conductor struct {
	cfg   Config
	store storage.Store
	hw    *Registry
	log   *slog.Logger
	now   func() time.Time

	runCtx   context.Context // parent of every background task; cancelled by Stop
	cancel   context.CancelFunc
	tasks    sync.WaitGroup
	aborts   abortFlags
	gate     bootGate
	owners   owners
	disc     discovery
	started  bool
	beat     heartbeatStatus
	tookOver tookOver
	obs      Observer
	verbs    verbClock
	psync    powerSync
	holds    holds
	consoles *console.Manager
}

// heartbeatStatus is the outcome of the conductor's own heartbeats, for
// readiness checks.
type heartbeatStatus struct {
	mu   sync.Mutex
	last time.Time // last successful heartbeat (registration counts)
	err  error     // the last heartbeat's error, nil after a success
}

func (h *heartbeatStatus) record(at time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.last = at
	}
	h.err = err
}

// HeartbeatState is what Heartbeat reports.
type HeartbeatState struct {
	Last    time.Time     // last heartbeat recorded in the store; zero before Start
	Err     error         // the latest attempt's error, nil after a success
	Timeout time.Duration // age after which other conductors take this one for dead
}

// Heartbeat reports this conductor's own heartbeats.
func (c *Conductor) Heartbeat() HeartbeatState {
	c.beat.mu.Lock()
	defer c.beat.mu.Unlock()
	return HeartbeatState{Last: c.beat.last, Err: c.beat.err, Timeout: c.cfg.HeartbeatTimeout}
}

// New makes a conductor over store with the given hardware types.
func New(store storage.Store, hw *Registry, cfg Config) *Conductor {
	cfg.setDefaults()
	if _, off := cfg.Observer.(noObserver); !off {
		hw = hw.metered(cfg.Observer)
	}
	c := &Conductor{
		cfg:    cfg,
		hw:     hw,
		obs:    cfg.Observer,
		verbs:  verbClock{started: map[string]verbStart{}},
		log:    cfg.Logger.With("conductor", cfg.Hostname),
		now:    func() time.Time { return time.Now().UTC() },
		aborts: abortFlags{m: map[string]bool{}},
	}
	if cfg.Console.Logger == nil {
		cfg.Console.Logger = c.log
	}
	c.consoles = console.New(cfg.Console)
	c.store = gateStore{Store: store, gate: &c.gate, c: c}
	return c
}

// Hostname is this conductor's name.
func (c *Conductor) Hostname() string { return c.cfg.Hostname }

// Group is this conductor's conductor_group.
func (c *Conductor) Group() string { return c.cfg.ConductorGroup }

// Hardware returns the hardware type registry.
func (c *Conductor) Hardware() *Registry { return c.hw }

// Store returns the store, for read paths (httpapi reads directly; every
// write goes through Conductor methods).
func (c *Conductor) Store() storage.Store { return c.store }

// Start registers the conductor, recovers nodes left behind by a crash and
// starts the periodic jobs. The jobs run until Stop.
func (c *Conductor) Start(ctx context.Context) error {
	c.runCtx, c.cancel = context.WithCancel(context.Background())
	if err := c.store.RegisterConductor(ctx, c.selfRow()); err != nil {
		return err
	}
	c.beat.record(c.now(), nil)
	if err := c.refreshRings(ctx); err != nil {
		return err
	}
	if err := c.recover(ctx); err != nil {
		return err
	}
	c.started = true
	if err := c.ResumeAllocations(ctx); err != nil {
		return err
	}
	c.every(c.cfg.HeartbeatInterval, "heartbeat", func(ctx context.Context) error {
		now := c.now()
		err := c.store.TouchConductor(ctx, c.cfg.Hostname, now)
		c.beat.record(now, err)
		return err
	})
	c.every(c.ringRefresh(), "hash-ring", c.refreshRings)
	c.every(c.cfg.TimeoutCheckInterval, "wait-timeouts", c.checkTimeouts)
	c.every(c.cfg.HeartbeatInterval, "takeover", c.takeOverDead)
	c.every(c.cfg.PowerSyncInterval, "power-sync", c.syncPowerStates)
	c.every(c.cfg.PowerFailureRecoveryInterval, "power-failure-recovery", c.recoverPowerFailures)
	c.every(c.cfg.OrphanCheckInterval, "orphaned-reservations", c.releaseOrphans)
	c.spawn(ctx, func(ctx context.Context) {
		if err := c.syncConsoles(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "console restore failed", "err", err)
		}
	})
	c.every(c.cfg.ConsoleSyncInterval, "consoles", c.syncConsoles)
	return nil
}

// Stop cancels running tasks and periodic jobs, waits for them, and marks the
// conductor offline. Tasks interrupted here are recovered on next Start.
func (c *Conductor) Stop(ctx context.Context) error {
	if !c.started {
		return nil
	}
	c.cancel()
	c.consoles.Close()
	done := make(chan struct{})
	go func() { c.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.closeBMCSessions(ctx)
	c.started = false
	return c.store.UnregisterConductor(ctx, c.cfg.Hostname)
}

// every runs fn each interval until Stop; errors are logged, not fatal.
func (c *Conductor) every(interval time.Duration, name string, fn func(context.Context) error) {
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.runCtx.Done():
				return
			case <-t.C:
				if err := fn(c.runCtx); err != nil && c.runCtx.Err() == nil {
					c.log.WarnContext(c.runCtx, "periodic job failed", "job", name, "err", err)
				}
			}
		}
	}()
}

// spawn runs fn as a background task owned by the conductor: it ends with
// Stop, not with the request that started it, but keeps that request's
// values (its request id for the log lines the task writes).
func (c *Conductor) spawn(from context.Context, fn func(ctx context.Context)) {
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		// Its writes wait out a database restart: see storage.RetryOutages.
		ctx, cancel := context.WithCancel(storage.RetryOutages(context.WithoutCancel(from)))
		defer cancel()
		stop := context.AfterFunc(c.runCtx, cancel)
		defer stop()
		fn(ctx)
	}()
}

// Alive reports whether a conductor row counts as alive now.
func (c *Conductor) Alive(cd *storage.Conductor) bool {
	if !cd.Online {
		return false
	}
	last := cd.CreatedAt
	if cd.UpdatedAt != nil {
		last = *cd.UpdatedAt
	}
	return c.now().Sub(last) < c.cfg.HeartbeatTimeout
}

// ConductorFor names the conductor that manages n, as Ironic's hash ring
// of its conductor group and driver maps it (owner.go); nil when no alive
// conductor serves them.
func (c *Conductor) ConductorFor(n *storage.Node) *string {
	if h := c.ownerOf(n); h != "" {
		return &h
	}
	return nil
}

// GroupsServedBy returns the conductor groups hostname serves, for the
// ?conductor= filter; empty when it is unknown or dead. The nodes of those
// groups are hostname's when ConductorFor says so.
func (c *Conductor) GroupsServedBy(ctx context.Context, hostname string) ([]string, error) {
	cd, err := c.store.GetConductor(ctx, hostname)
	if err != nil {
		return []string{}, nil
	}
	if !c.Alive(cd) {
		return []string{}, nil
	}
	return []string{cd.ConductorGroup}, nil
}

// abortFlags marks running tasks an operator asked to abort.
type abortFlags struct {
	mu sync.Mutex
	m  map[string]bool
}

func (a *abortFlags) set(uuid string) {
	a.mu.Lock()
	a.m[uuid] = true
	a.mu.Unlock()
}

func (a *abortFlags) take(uuid string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.m[uuid]
	delete(a.m, uuid)
	return v
}
