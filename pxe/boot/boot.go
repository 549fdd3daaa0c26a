// Package boot holds what the network-boot servers (DHCP, TFTP, HTTP boot)
// share: the question they ask engine before answering a machine (Gate) and
// the boot timeline they write to (Recorder). pxe never changes node state.
package boot

import (
	"context"
	"net"
	"time"
)

// Decision is engine's answer for one MAC address.
type Decision struct {
	// NodeUUID is the node the MAC belongs to; empty for an unknown MAC
	// that is allowed because an inspection of a node without ports (or
	// discovery) is running.
	NodeUUID string
	// Purpose is why the node boots: inspect, clean, deploy, rescue, service.
	Purpose string
}

// Gate decides whom castiron network-boots. A machine it refuses gets no
// answer at all, so castiron never takes over a machine it was not asked to
// boot.
type Gate interface {
	Allow(ctx context.Context, mac net.HardwareAddr) (Decision, bool)
}

// Timeline event kinds, in the order a boot produces them.
const (
	DHCPDiscover  = "dhcp_discover"
	DHCPOffer     = "dhcp_offer"
	DHCPRequest   = "dhcp_request"
	DHCPAck       = "dhcp_ack"
	DHCPNak       = "dhcp_nak"
	DHCPIgnored   = "dhcp_ignored" // not allowed by the gate; detail says why
	DHCPExhausted = "dhcp_pool_exhausted"
	TFTPServed    = "tftp_served"
	TFTPRefused   = "tftp_refused"
	HTTPScript    = "http_ipxe_script"
	HTTPKernel    = "http_kernel"
	HTTPInitramfs = "http_initramfs"
	AgentLookup   = "agent_lookup"
	AgentInspect  = "agent_inventory"
	AgentBeat     = "agent_heartbeat"
)

// Event is one step of a machine's network boot.
type Event struct {
	At       time.Time
	MAC      string // lower-case aa:bb:cc:dd:ee:ff; may be empty for agent events
	NodeUUID string // empty when unknown
	Kind     string
	Detail   string // e.g. "offered 10.0.0.5 arch=0 ipxe=true file=http://..."
}

// Recorder stores timeline events. Record must be cheap and never block the
// packet path for long; implementations batch or drop under pressure.
type Recorder interface {
	Record(ctx context.Context, ev Event)
}

// Discard is a Recorder that keeps nothing (tests, benchmarks).
type Discard struct{}

// Record implements Recorder.
func (Discard) Record(context.Context, Event) {}
