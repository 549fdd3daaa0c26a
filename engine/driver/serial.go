package driver

import (
	"context"
	"io"
)

// SerialConsole is implemented by drivers that can reach a node's serial
// port through its BMC: IPMI Serial-over-LAN (the console interfaces
// ipmitool-socat and ipmitool-shellinabox), or the BMC's SSH console
// (redfish-ssh).
type SerialConsole interface {
	// ValidateSerial checks driver_info for the console without touching
	// the BMC (fault.Invalid, Ironic's wording) and answers the node's
	// fixed console port (ipmi_terminal_port), 0 when it has none.
	ValidateSerial(n Node) (port int, err error)
	// OpenSerial activates the node's serial console: an error means the
	// BMC is unreachable or refused (no SOL, payload disabled, no rights).
	OpenSerial(ctx context.Context, n Node) (SerialLink, error)
}

// SerialLink is one activated serial console session with a BMC.
type SerialLink interface {
	// Run copies in to the node's serial port and what the node prints to
	// out, until ctx ends (nil), in ends (nil) or the session fails.
	Run(ctx context.Context, in io.Reader, out io.Writer) error
	// Close deactivates the console and ends the BMC session; it bounds
	// its own wait.
	Close(ctx context.Context) error
}

// InternalInfoUpdater is a SerialLink that learned something the conductor
// keeps in the node's driver_internal_info (the BMC's SSH host key, trusted
// on first use).
type InternalInfoUpdater interface {
	InternalInfoUpdates() map[string]any
}
