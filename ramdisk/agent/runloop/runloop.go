// Package runloop is the agent's pull loop: post the inventory to the
// inspection callback or look the node up, then heartbeat, and do what each
// heartbeat's answer says (wait, run a step, abort, power off, reboot).
// Nothing listens inside the ramdisk; every instruction arrives as the
// answer to a heartbeat.
package runloop

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"castiron/ramdisk/agent/apiclient"
	"castiron/ramdisk/protocol"
)

// StepRunner runs one step (steps.Run in the agent). It must return soon
// after ctx is cancelled.
type StepRunner func(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error)

// Machine powers the machine off or reboots it. On real hardware neither
// returns; a nil return (tests, an agent run under an OS) ends Run.
type Machine interface {
	PowerOff() error
	Reboot() error
}

// Defaults of the Config durations.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultMinHeartbeat      = 500 * time.Millisecond
	DefaultTokenRetry        = 30 * time.Second
	DefaultStopTimeout       = time.Minute
	// refusalLimit: after this many heartbeats refused in a row (401, 403,
	// 404, 409: the node left the wait state, the token is gone) the agent
	// gives up and powers off.
	refusalLimit = 3
	// withheldToken is what lookup returns when the token was already
	// given to another agent instance.
	withheldToken = "******"
)

// Config is what Run needs; API, Inventory, Steps and Machine are required.
type Config struct {
	// API talks to castiron. Its BaseURL (ipa-api-url) may be empty when
	// only InspectionURL is known: the agent then powers off after
	// posting the inventory.
	API *apiclient.Client
	// InspectionURL (ipa-inspection-callback-url), when set, receives the
	// inventory before anything else.
	InspectionURL string
	// NodeUUID (ipa-node-uuid) narrows the lookup.
	NodeUUID string
	// BootIF is the kernel's BOOTIF ("01-aa-bb-cc-dd-ee-ff"), sent as the
	// inspection data's boot_interface.
	BootIF string

	Inventory *protocol.Inventory
	// InventoryError, when set, is posted as the inspection error: the
	// node then fails inspection instead of recording a partial inventory.
	InventoryError error

	Steps        StepRunner
	Machine      Machine
	Log          *slog.Logger
	AgentVersion string // "castiron-agent/1.2.3"

	// Backoff paces retries of failed requests.
	Backoff apiclient.Backoff
	// Sleep waits between retries; nil uses apiclient.Sleep. Tests record.
	Sleep func(ctx context.Context, d time.Duration) error
	// HeartbeatInterval is used until the server names one, and when its
	// answer has none (stock Ironic's empty 202).
	HeartbeatInterval time.Duration
	// MinHeartbeat is the floor of the server's heartbeat_interval.
	MinHeartbeat time.Duration
	// TokenRetry is how often lookup is retried while the agent token is
	// withheld ("******").
	TokenRetry time.Duration
	// StopTimeout bounds the wait for a cancelled step to return.
	StopTimeout time.Duration
}

// ErrNoAPI: neither ipa-api-url nor ipa-inspection-callback-url was given.
var ErrNoAPI = errors.New("no API URL and no inspection callback URL on the kernel command line")

// Run drives the node until the server says power off or reboot (then it
// calls Machine and returns its error) or ctx ends (then it returns
// ctx.Err() after stopping a running step). It never gives up on transient
// failures: castiron times out a silent node and powers it off by its BMC.
func Run(ctx context.Context, cfg Config) error {
	l := newLoop(cfg)
	var (
		node  = cfg.NodeUUID
		token string
		known bool // token is known
	)
	if cfg.InspectionURL != "" {
		res, err := l.inspect(ctx)
		if err != nil {
			return l.handleFatal(err)
		}
		if res.NodeUUID != "" {
			node = res.NodeUUID
		}
		if res.Lookup != nil && res.Lookup.Config.AgentToken != withheldToken {
			token, known = res.Lookup.Config.AgentToken, true
		}
		l.log.Info("inventory posted", "node", node)
		if cfg.API.BaseURL == "" {
			return l.finish(nil, protocol.CmdPowerOff, "inspection done and no ipa-api-url to heartbeat to")
		}
	} else if cfg.API.BaseURL == "" {
		return ErrNoAPI
	}
	if !known {
		lr, err := l.lookup(ctx, node)
		if err != nil {
			return err
		}
		node, token = lr.Node.UUID, lr.Config.AgentToken
	}
	return l.heartbeat(ctx, node, token)
}

type loop struct {
	cfg Config
	log *slog.Logger
}

func newLoop(cfg Config) *loop {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = apiclient.Sleep
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.MinHeartbeat <= 0 {
		cfg.MinHeartbeat = DefaultMinHeartbeat
	}
	if cfg.TokenRetry <= 0 {
		cfg.TokenRetry = DefaultTokenRetry
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	return &loop{cfg: cfg, log: cfg.Log}
}

// refusedError: the server refused us for good; the agent powers off.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return e.reason }

func (l *loop) handleFatal(err error) error {
	var refused *refusedError
	if errors.As(err, &refused) {
		return l.finish(nil, protocol.CmdPowerOff, refused.reason)
	}
	return err
}

// inspectNotWaitingRetries is how many times a 404/409 from the inspection
// callback is retried before the agent takes it as final. The conductor
// records "inspect wait" once the BMC's power-on returns, so a ramdisk that
// boots faster than that call (simulated machines; a BMC slow to answer)
// posts while the node is still "inspecting"; with the default backoff
// (0.5 s doubling, jittered) the retries span 8-15 s, after which a node
// that really stopped waiting (aborted, timed out) is taken as such.
const inspectNotWaitingRetries = 5

// inspect posts the inventory until it is accepted. 404/409 mean the node
// is not waiting for inspection (not yet, or no more: aborted, timed out):
// retried a few times, then the callback is taken as late and the agent
// powers off; any other 4xx means the data was rejected, which retrying
// does not change.
func (l *loop) inspect(ctx context.Context) (*apiclient.InspectionResult, error) {
	data := protocol.InspectionData{Inventory: *l.cfg.Inventory, BootInterface: l.cfg.BootIF}
	if l.cfg.InventoryError != nil {
		data.Error = l.cfg.InventoryError.Error()
	}
	for attempt := 0; ; attempt++ {
		res, err := l.cfg.API.ContinueInspection(ctx, l.cfg.InspectionURL, data)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch code := apiclient.StatusCode(err); {
		case (code == 404 || code == 409) && attempt >= inspectNotWaitingRetries:
			return nil, &refusedError{"inspection refused (node not waiting for inspection): " + err.Error()}
		case code == 404 || code == 409:
			// Not waiting yet, perhaps: retried below.
		case !apiclient.Retryable(err):
			return nil, &refusedError{"inspection data rejected: " + err.Error()}
		}
		d := l.cfg.Backoff.Delay(attempt)
		l.log.Warn("inspection post failed, retrying", "err", err, "in", d.Round(time.Millisecond))
		if err := l.cfg.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// lookup finds the node and its agent token, retrying every failure: a 404
// usually means the node is not in a wait state yet.
func (l *loop) lookup(ctx context.Context, node string) (*protocol.LookupResponse, error) {
	macs := make([]string, 0, len(l.cfg.Inventory.Interfaces))
	for _, nic := range l.cfg.Inventory.Interfaces {
		if nic.MACAddress != "" {
			macs = append(macs, nic.MACAddress)
		}
	}
	for attempt := 0; ; attempt++ {
		lr, err := l.cfg.API.Lookup(ctx, macs, node)
		var wait time.Duration
		switch {
		case err == nil && lr.Config.AgentToken == withheldToken:
			// The token went to an earlier agent run; heartbeats without
			// it would be refused. castiron re-issues it once the node is
			// reset, so ask again now and then.
			l.log.Warn("agent token already issued, cannot heartbeat; retrying lookup", "node", lr.Node.UUID, "in", l.cfg.TokenRetry)
			wait, attempt = l.cfg.TokenRetry, -1
		case err == nil:
			l.log.Info("node found", "node", lr.Node.UUID)
			return lr, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			wait = l.cfg.Backoff.Delay(attempt)
			l.log.Warn("lookup failed, retrying", "err", err, "in", wait.Round(time.Millisecond))
		}
		if err := l.cfg.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// finish stops a running step, then powers off or reboots.
func (l *loop) finish(run *stepRun, command, reason string) error {
	if run != nil {
		l.stop(run)
	}
	if command == protocol.CmdReboot {
		l.log.Info("rebooting", "reason", reason)
		return l.cfg.Machine.Reboot()
	}
	l.log.Info("powering off", "reason", reason)
	return l.cfg.Machine.PowerOff()
}

// stop cancels a step and waits (bounded) for its goroutine to return.
func (l *loop) stop(run *stepRun) {
	run.cancel()
	select {
	case <-run.done:
	case <-time.After(l.cfg.StopTimeout):
		l.log.Error("step did not stop after cancel", "step", run.step.ID, "waited", l.cfg.StopTimeout)
	}
}
