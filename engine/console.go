package engine

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"castiron/engine/console"
	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// Serial console interfaces. ipmitool-socat and ipmitool-shellinabox have
// Ironic's names and are castiron's own IPMI Serial-over-LAN in Go
// (engine/console): ipmitool-socat offers the raw stream on a TCP port,
// ipmitool-shellinabox points at the web UI's console tab (which attaches
// with AttachConsole). redfish-ssh is castiron's (Ironic has no Redfish
// serial console): the BMC's SSH serial console, found through Redfish,
// served as ipmitool-socat's is (TCP port, web console tab).
const (
	ConsoleSocat       = "ipmitool-socat"
	ConsoleShellinabox = "ipmitool-shellinabox"
	ConsoleRedfishSSH  = "redfish-ssh"
)

// allocatedPortKey is where Ironic keeps the console port it took from
// [console]port_range (driver_internal_info); a restart reuses it, so a
// console's URL survives the restart.
const allocatedPortKey = "allocated_ipmi_terminal_port"

// consoleStartTimeout bounds activating SOL on enable.
const consoleStartTimeout = time.Minute

func serialConsole(iface string) bool {
	return iface == ConsoleSocat || iface == ConsoleShellinabox || iface == ConsoleRedfishSSH
}

// ConsoleInfo is GET /v1/nodes/{id}/states/console: whether the console is
// enabled and, when it is, the console interface's connection information
// (the fake console's is {} as Ironic's FakeConsole.get_console). As in
// Ironic, a disabled console answers (false, nil) before the interface is
// validated, so a no-console node answers too. The shellinabox URL is a
// path of the web UI ("/#/node/<uuid>?tab=console"): the API prefixes its
// own base URL.
func (c *Conductor) ConsoleInfo(ctx context.Context, ident string) (bool, map[string]any, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return false, nil, err
	}
	if !n.ConsoleEnabled {
		return false, nil, nil
	}
	iface := InterfaceOf(n, "console")
	if iface == "no-console" {
		return false, nil, unsupported(n, "console")
	}
	if !serialConsole(iface) {
		return true, map[string]any{}, nil
	}
	sc, err := c.serialOf(n)
	if err != nil {
		return false, nil, err
	}
	fixed, err := c.validateSerial(n, sc)
	if err != nil {
		return false, nil, err
	}
	if iface == ConsoleShellinabox {
		return true, map[string]any{"type": "shellinabox", "url": "/#/node/" + n.UUID + "?tab=console"}, nil
	}
	port, ok := c.consoles.Port(n.UUID)
	if !ok {
		// Running on another conductor, or being restored: the port it has.
		port = fixed
		if port == 0 {
			port, _ = jsonInt(n.DriverInternalInfo[allocatedPortKey])
		}
	}
	return true, map[string]any{"type": "socat", "url": "tcp://" + net.JoinHostPort(c.consoleHost(), strconv.Itoa(port))}, nil
}

// consoleHost is the host console URLs name (Ironic's socat_address).
func (c *Conductor) consoleHost() string {
	if c.cfg.ConsoleHost != "" {
		return c.cfg.ConsoleHost
	}
	return "127.0.0.1"
}

// SetConsole is PUT /v1/nodes/{id}/states/console: start or stop the node's
// console. Asking for the current mode changes nothing (and needs no
// exclusive lock), as in Ironic. The fake console starts and stops at once,
// so console_enabled is set before the API answers 202; a serial console
// is validated now and started in the background (as Ironic's
// _set_console_mode): console_enabled is set once SOL is active, and a BMC
// that refuses leaves console_enabled false and last_error set.
func (c *Conductor) SetConsole(ctx context.Context, ident string, enabled bool) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	iface := InterfaceOf(n, "console")
	if iface == "no-console" {
		return unsupported(n, "console")
	}
	var sc driver.SerialConsole
	if serialConsole(iface) {
		if sc, err = c.serialOf(n); err != nil {
			return err
		}
		if _, err := c.validateSerial(n, sc); err != nil {
			return err
		}
	}
	if n.ConsoleEnabled == enabled {
		c.log.InfoContext(ctx, "no console action was triggered", "node", n.UUID, "verb", "console", "enabled", enabled)
		return nil
	}
	updated, err := c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		n.LastError = nil
		if sc == nil {
			n.ConsoleEnabled = enabled
			c.log.InfoContext(ctx, "console set", "node", n.UUID, "state", n.ProvisionState, "verb", "console", "enabled", enabled)
			return nil, nil
		}
		n.Reservation = strp(c.cfg.Hostname)
		return nil, nil
	})
	if err != nil || sc == nil {
		return err
	}
	c.spawn(ctx, func(ctx context.Context) { c.setSerialConsole(ctx, updated, sc, enabled) })
	return nil
}

// setSerialConsole starts or stops n's serial console and records the
// outcome, releasing the reservation SetConsole took.
func (c *Conductor) setSerialConsole(ctx context.Context, n *storage.Node, sc driver.SerialConsole, enabled bool) {
	var port int
	var opErr error
	if enabled {
		port, opErr = c.startConsole(ctx, n, sc)
	} else {
		c.consoles.Stop(n.UUID)
	}
	if ctx.Err() != nil {
		return // shutdown: recovery releases the node, console_enabled unchanged
	}
	_, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		cur.Reservation = nil
		if opErr != nil {
			op := "enabling"
			if !enabled {
				op = "disabling"
			}
			msg := fmt.Sprintf("Error %s the console on node %s. Reason: %v", op, cur.UUID, opErr)
			cur.LastError = &msg
			return c.consoleEvent(ctx, cur, "ERROR", msg), nil
		}
		cur.ConsoleEnabled = enabled
		cur.LastError = nil
		ensureMaps(cur)
		if enabled && port != 0 {
			cur.DriverInternalInfo[allocatedPortKey] = port
		} else if !enabled {
			delete(cur.DriverInternalInfo, allocatedPortKey)
		}
		return nil, nil
	})
	log := c.log.With("node", n.UUID, "verb", "console", "enabled", enabled)
	switch {
	case err != nil:
		log.ErrorContext(ctx, "could not record the console change", "err", err)
		if enabled && opErr == nil {
			c.consoles.Stop(n.UUID) // e.g. the node was deleted meanwhile
		}
	case opErr != nil:
		log.WarnContext(ctx, "console change failed", "err", opErr)
	default:
		log.InfoContext(ctx, "console set", "port", port)
	}
}

// startConsole runs n's console on its fixed port (ipmi_terminal_port), or
// on the port it had before a restart, or on a free one of the range.
func (c *Conductor) startConsole(ctx context.Context, n *storage.Node, sc driver.SerialConsole) (int, error) {
	fixed, err := sc.ValidateSerial(driverNode(n))
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, consoleStartTimeout)
	defer cancel()
	uuid := n.UUID
	open := func(ctx context.Context) (driver.SerialLink, error) {
		// Read afresh on every (re)connect: new credentials apply.
		cur, err := c.store.GetNode(ctx, uuid)
		if err != nil {
			return nil, err
		}
		link, err := sc.OpenSerial(ctx, driverNode(cur))
		if u, ok := link.(driver.InternalInfoUpdater); ok && err == nil {
			c.recordInternalInfo(ctx, uuid, u.InternalInfoUpdates())
		}
		return link, err
	}
	start := func(p console.Ports) (int, error) {
		return c.consoles.Start(ctx, uuid, c.cfg.ConsoleListen, p, open)
	}
	if fixed > 0 {
		return start(console.Ports{Min: fixed, Max: fixed})
	}
	r := c.cfg.ConsolePorts
	if prev, ok := jsonInt(n.DriverInternalInfo[allocatedPortKey]); ok && prev >= r.Min && prev <= r.Max && prev > 0 {
		p, err := start(console.Ports{Min: prev, Max: prev})
		if err == nil || !fault.Is(err, fault.Conflict) {
			return p, err
		}
	}
	return start(r)
}

// serialOf is the node's driver's serial console, or Ironic's unsupported
// error when its hardware type has none.
func (c *Conductor) serialOf(n *storage.Node) (driver.SerialConsole, error) {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return nil, err
	}
	if sc, ok := hw.Consoles[InterfaceOf(n, "console")]; ok && sc != nil {
		return sc, nil
	}
	if hw.Serial != nil && InterfaceOf(n, "console") != ConsoleRedfishSSH {
		return hw.Serial, nil
	}
	sc, ok := managementFeature[driver.SerialConsole](n, hw)
	if !ok {
		return nil, unsupported(n, "console")
	}
	return sc, nil
}

// validateSerial is Ironic's IPMIConsole.validate: driver_info fit for SOL,
// and a port to serve on (ipmi_terminal_port or the configured range).
func (c *Conductor) validateSerial(n *storage.Node, sc driver.SerialConsole) (int, error) {
	fixed, err := sc.ValidateSerial(driverNode(n))
	if err != nil {
		return 0, err
	}
	if fixed == 0 && (c.cfg.ConsolePorts.Min <= 0 || c.cfg.ConsolePorts.Max < c.cfg.ConsolePorts.Min) {
		return 0, fault.New(fault.Invalid, "Either missing 'ipmi_terminal_port' parameter in node's driver_info or [console]port_range is not configured (castiron serve --console-port-range)")
	}
	return fixed, nil
}

func (c *Conductor) consoleEvent(ctx context.Context, n *storage.Node, severity, msg string) *storage.Event {
	return &storage.Event{
		NodeUUID: n.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
		EventType: "console", Severity: severity, Event: msg,
		User: actorOf(ctx), Verb: "console",
		FromState: n.ProvisionState, ToState: n.ProvisionState,
	}
}

// AttachConsole joins node's running serial console (node: uuid or name):
// scrollback is what the machine printed recently (bounded), reads on
// stream give what it prints from now on, writes type into it (a
// fault.Forbidden error when write is false); Close detaches this viewer
// only. Reads end with io.EOF when the console is disabled or the node
// deleted. A console that is not enabled answers fault.Invalid.
func (c *Conductor) AttachConsole(ctx context.Context, node string, write bool) ([]byte, io.ReadWriteCloser, error) {
	n, err := c.store.GetNode(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	if !n.ConsoleEnabled {
		return nil, nil, fault.New(fault.Invalid, "Console access is not enabled on node %s", n.UUID)
	}
	if !serialConsole(InterfaceOf(n, "console")) {
		return nil, nil, fault.New(fault.Invalid, "The console of node %s (console interface %s) has no serial stream to attach to.", n.UUID, InterfaceOf(n, "console"))
	}
	sb, stream, err := c.consoles.Attach(n.UUID, write)
	if err != nil {
		if err == console.ErrNotRunning {
			return nil, nil, fault.New(fault.Conflict, "The console of node %s is not running on conductor %s (it is starting, or another conductor serves it).", n.UUID, c.cfg.Hostname)
		}
		return nil, nil, err
	}
	return sb, stream, nil
}

// stopConsoleIfGone stops n's console session after a change that ends it:
// the node deleted, or its driver or console interface changed.
func (c *Conductor) stopConsoleIfGone(before, after *storage.Node) {
	if after == nil || after.Driver != before.Driver || InterfaceOf(after, "console") != InterfaceOf(before, "console") || !after.ConsoleEnabled {
		c.consoles.Stop(before.UUID)
	}
}

// syncConsoles makes the running consoles match the nodes: on start (as
// Ironic's _start_consoles) and then periodically (as its take-over of a
// dead conductor's nodes), the enabled serial consoles of the nodes this
// conductor owns are started, on the port they had; a console that cannot
// start is recorded disabled, with last_error. Sessions of nodes that moved
// to another conductor, or were disabled behind its back, are stopped.
// Reserved nodes are left alone: a task of theirs is changing the console.
func (c *Conductor) syncConsoles(ctx context.Context) error {
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{
		ConductorGroups: []string{c.cfg.ConductorGroup},
		IncludeChildren: true,
		Columns: []string{"uuid", "driver", "conductor_group", "console_enabled", "console_interface",
			"management_interface", "reservation"},
	})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, brief := range nodes {
		if !brief.ConsoleEnabled || !serialConsole(InterfaceOf(brief, "console")) {
			continue
		}
		if brief.Reservation != nil || !c.Owns(brief) {
			want[brief.UUID] = brief.Reservation != nil // keep a reserved node's session
			continue
		}
		want[brief.UUID] = true
		if _, running := c.consoles.Port(brief.UUID); running {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		c.restoreConsole(ctx, brief.UUID)
	}
	for _, uuid := range c.consoles.Running() {
		if !want[uuid] {
			c.log.InfoContext(ctx, "console no longer this conductor's, stopped", "node", uuid)
			c.consoles.Stop(uuid)
		}
	}
	return nil
}

// restoreConsole starts one enabled console found not running.
func (c *Conductor) restoreConsole(ctx context.Context, uuid string) {
	n, err := c.store.GetNode(ctx, uuid)
	if err != nil || n.Reservation != nil || !n.ConsoleEnabled {
		return // deleted or being changed meanwhile
	}
	sc, err := c.serialOf(n)
	if err == nil {
		var port int
		if port, err = c.startConsole(ctx, n, sc); err == nil {
			if prev, _ := jsonInt(n.DriverInternalInfo[allocatedPortKey]); prev != port {
				c.recordRestoredPort(ctx, n.UUID, port)
			}
			c.log.InfoContext(ctx, "console restored", "node", n.UUID, "port", port)
			return
		}
	}
	if ctx.Err() != nil || fault.Is(err, fault.Conflict) && strings.Contains(err.Error(), "already running") {
		return
	}
	msg := fmt.Sprintf("Failed to start console of node %s while starting the conductor, so changing the console_enabled status to False, error: %v", n.UUID, err)
	c.log.ErrorContext(ctx, msg, "node", n.UUID)
	_, uerr := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		if cur.Reservation != nil || !cur.ConsoleEnabled {
			return nil, nil // someone else is changing it
		}
		cur.ConsoleEnabled = false
		cur.LastError = &msg
		return c.consoleEvent(ctx, cur, "ERROR", msg), nil
	})
	if uerr != nil {
		c.log.ErrorContext(ctx, "could not record the console restore failure", "node", n.UUID, "err", uerr)
	}
}

// recordInternalInfo keeps what a console link learned (the BMC's SSH host
// key at the first connection) in the node's driver_internal_info.
func (c *Conductor) recordInternalInfo(ctx context.Context, uuid string, kv map[string]any) {
	if len(kv) == 0 {
		return
	}
	_, err := c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
		ensureMaps(cur)
		for k, v := range kv {
			cur.DriverInternalInfo[k] = v
		}
		return nil, nil
	})
	if err != nil {
		c.log.WarnContext(ctx, "console: record driver_internal_info", "node", uuid, "err", err)
	}
}

func (c *Conductor) recordRestoredPort(ctx context.Context, uuid string, port int) {
	_, err := c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
		ensureMaps(cur)
		cur.DriverInternalInfo[allocatedPortKey] = port
		return nil, nil
	})
	if err != nil {
		c.log.WarnContext(ctx, "console restore: record port", "node", uuid, "err", err)
	}
}

// jsonInt reads a JSON number (float64 after decoding) or an int.
func jsonInt(v any) (int, bool) {
	switch t := v.(type) {
	case int:
		return t, true
	case int64:
		return int(t), true
	case float64:
		return int(t), t == float64(int(t))
	}
	return 0, false
}

// stopsConsole records, in an update that changes the node's driver or
// console interface, that its serial console ends (stopConsoleIfGone stops
// the session once the update is stored): the new interface has no session
// to show.
func stopsConsole(before, n *storage.Node) {
	if !before.ConsoleEnabled || !serialConsole(InterfaceOf(before, "console")) {
		return
	}
	if n.Driver != before.Driver || InterfaceOf(n, "console") != InterfaceOf(before, "console") {
		n.ConsoleEnabled = false
		delete(n.DriverInternalInfo, allocatedPortKey)
	}
}
