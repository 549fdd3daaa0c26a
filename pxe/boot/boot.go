// Package boot holds what the network-boot servers (DHCP, TFTP, HTTP boot)
// share: the question they ask engine before answering a machine (Gate) and
// the boot timeline they write to (Recorder). pxe never changes node state.
package boot

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
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
	// CPUArch is the node's cpu_arch ("x86_64", "aarch64"); empty when
	// unknown.
	CPUArch string
	// Instance, for purpose "instance", is the user's ramdisk or ISO a
	// node deployed with the ramdisk deploy interface boots.
	Instance *Instance
}

// Instance is a ramdisk instance's network boot: an ISO (iPXE sanboot),
// or a kernel and ramdisk with their command line; URLs iPXE fetches.
type Instance struct {
	ISO, Kernel, Ramdisk string
	Args                 []string
}

// Gate decides whom castiron network-boots. A machine it refuses gets no
// answer at all, so castiron never takes over a machine it was not asked to
// boot.
type Gate interface {
	Allow(ctx context.Context, mac net.HardwareAddr) (Decision, bool)
}

// NodeGate decides whether a node's boot media (its virtual media ISO) is
// served now: only while the node is in a state that boots the ramdisk.
type NodeGate interface {
	AllowNode(ctx context.Context, nodeUUID string) bool
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
	HTTPLoader    = "http_loader"     // an iPXE binary for UEFI HTTP boot
	HTTPISO       = "http_vmedia_iso" // a BMC fetching a node's virtual media ISO
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
	// Took is castiron's own time for the request this event answers:
	// from the packet or request arriving to the answer being ready
	// (for a file, to its first byte; the rest of a transfer is paced by
	// the client). Zero when not measured. Kept in the timeline as
	// " took=<seconds>s" at the end of Detail (TookDetail).
	Took time.Duration
}

// TookKey marks castiron's own time in a stored event's detail.
const TookKey = " took="

// TookDetail is the detail an event is stored with: Detail, plus its Took
// in seconds (microsecond resolution) when measured.
func (e Event) TookDetail() string {
	if e.Took <= 0 {
		return e.Detail
	}
	return e.Detail + TookKey + strconv.FormatFloat(e.Took.Seconds(), 'f', 6, 64) + "s"
}

// ParseTook is the took= a stored detail carries (TookDetail), if any.
func ParseTook(detail string) (time.Duration, bool) {
	i := strings.LastIndex(detail, TookKey)
	if i < 0 {
		return 0, false
	}
	v, _, _ := strings.Cut(detail[i+len(TookKey):], " ")
	d, err := time.ParseDuration(v)
	return d, err == nil
}

type receivedKey struct{}

// WithReceived notes in ctx when the packet or request being answered
// arrived, so the event recorded for its answer can carry Took.
func WithReceived(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, receivedKey{}, at)
}

// SinceReceived is the time since the request in ctx arrived
// (WithReceived); 0 when not noted.
func SinceReceived(ctx context.Context) time.Duration {
	if at, ok := ctx.Value(receivedKey{}).(time.Time); ok {
		return time.Since(at)
	}
	return 0
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

// Meter counts what the boot servers do, for metrics. Calls are inline on
// the packet and transfer paths: implementations must be cheap and safe for
// concurrent use.
type Meter interface {
	// DHCPPacket is one DHCP packet received and castiron's answer to it
	// (offer, ack, nak, none, error); msgType is "malformed" for a packet
	// that did not parse, "stale" for one dropped unread because it waited
	// too long in the receive queue.
	DHCPPacket(msgType, answer string)
	// Transfer is one boot file sent (server "tftp" or "http"; result ok,
	// incomplete, refused, or error when castiron could not read it) and the
	// bytes that went out.
	Transfer(server, file string, bytes int64, result string)
}

// NoMeter counts nothing.
type NoMeter struct{}

// DHCPPacket implements Meter.
func (NoMeter) DHCPPacket(string, string) {}

// Transfer implements Meter.
func (NoMeter) Transfer(string, string, int64, string) {}

// Tally is a Meter that adds everything up, for tests: Count and Bytes
// by "server file result" (transfers) or "dhcp type answer" (packets).
type Tally struct {
	mu    sync.Mutex
	count map[string]int
	bytes map[string]int64
}

// DHCPPacket implements Meter.
func (t *Tally) DHCPPacket(msgType, answer string) { t.add("dhcp "+msgType+" "+answer, 0) }

// Transfer implements Meter.
func (t *Tally) Transfer(server, file string, bytes int64, result string) {
	t.add(server+" "+file+" "+result, bytes)
}

func (t *Tally) add(key string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count == nil {
		t.count, t.bytes = map[string]int{}, map[string]int64{}
	}
	t.count[key]++
	t.bytes[key] += n
}

// Count is how often key was reported.
func (t *Tally) Count(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[key]
}

// Bytes is the bytes reported under key.
func (t *Tally) Bytes(key string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes[key]
}
