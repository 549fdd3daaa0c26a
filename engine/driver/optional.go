package driver

import "context"

// Optional management features. A Management implementation may also
// implement any of these; the engine checks with a type assertion and answers
// Ironic's UnsupportedDriverExtension when it does not, as Ironic's base
// ManagementInterface does for a method a driver leaves out.

// NMIInjector injects a non-maskable interrupt (API 1.29,
// PUT /v1/nodes/{id}/management/inject_nmi; ipmitool "power diag").
type NMIInjector interface {
	InjectNMI(ctx context.Context, n Node) error
}

// BootModeSetter sets the boot mode used on the next boot (API 1.76,
// PUT /v1/nodes/{id}/states/boot_mode). mode is "uefi" or "bios".
type BootModeSetter interface {
	SetBootMode(ctx context.Context, n Node, mode string) error
}

// SecureBootSetter turns UEFI secure boot on or off (API 1.76,
// PUT /v1/nodes/{id}/states/secure_boot).
type SecureBootSetter interface {
	SetSecureBoot(ctx context.Context, n Node, on bool) error
}

// HTTPBooter boots the node from a URL by UEFI HTTP boot: the boot
// override to BootUEFIHTTP with the URL the firmware fetches (Redfish
// UefiHttp + HttpBootUri), as Ironic's redfish-https boot interface does.
// The override is used up by the next boot unless persistent.
type HTTPBooter interface {
	SetHTTPBoot(ctx context.Context, n Node, url string, persistent bool) error
}

// Indicator states, as Ironic spells them (ironic.common.indicator_states).
const (
	IndicatorOff      = "off"
	IndicatorOn       = "on"
	IndicatorBlinking = "blinking"
	IndicatorUnknown  = "unknown"
)

// Indicator is one indicator (LED) of a hardware component ("system",
// "chassis", "disk", "power", "nic").
type Indicator struct {
	Component string
	Name      string
	ReadOnly  bool
	States    []string
}

// IndicatorReader lists a node's indicators and reads their state (API
// 1.63, GET /v1/nodes/{id}/management/indicators[/{name}@{component}]).
type IndicatorReader interface {
	// SupportedIndicators lists the indicators in a stable order.
	SupportedIndicators(ctx context.Context, n Node) ([]Indicator, error)
	// IndicatorState reads one; an unknown component or indicator is a
	// fault.Invalid error.
	IndicatorState(ctx context.Context, n Node, component, name string) (string, error)
}

// IndicatorSetter sets an indicator's state (API 1.63, PUT
// /v1/nodes/{id}/management/indicators/{name}@{component}).
type IndicatorSetter interface {
	SetIndicatorState(ctx context.Context, n Node, component, name, state string) error
}

// Hardware health as a BMC reports it (Redfish Status.Health; Ironic's
// health_states), node.health from API 1.109.
const (
	HealthOK       = "OK"
	HealthWarning  = "Warning"
	HealthCritical = "Critical"
)

// HealthReader reads a node's overall hardware health (Ironic's
// get_node_health), read during power sync: HealthOK, HealthWarning,
// HealthCritical, or "" when the BMC does not say.
type HealthReader interface {
	Health(ctx context.Context, n Node) (string, error)
}

// PowerHealthReader reads the power state and the health in one BMC
// exchange (IPMI's chassis status and Redfish's System hold both), so that
// power sync reads each BMC once a pass, not twice.
type PowerHealthReader interface {
	PowerStateHealth(ctx context.Context, n Node) (power, health string, err error)
}

// Secure boot key resets (Ironic's redfish management steps
// reset_secure_boot_keys_to_default and clear_secure_boot_keys).
const (
	SecureBootKeysDefault = "ResetAllKeysToDefault"
	SecureBootKeysDelete  = "DeleteAllKeys"
)

// SecureBootKeyResetter resets the UEFI secure boot key databases: to the
// manufacturer's defaults (SecureBootKeysDefault) or empty
// (SecureBootKeysDelete).
type SecureBootKeyResetter interface {
	ResetSecureBootKeys(ctx context.Context, n Node, how string) error
}

// BMCJobQueueClearer clears the BMC's queue of configuration jobs
// (iDRAC's Lifecycle Controller jobs: Ironic's idrac-redfish
// clear_job_queue step).
type BMCJobQueueClearer interface {
	ClearBMCJobQueue(ctx context.Context, n Node) error
}

// BMCResetter resets the BMC itself (not the host) and returns once it
// answers again (Ironic's idrac-redfish reset_idrac step).
type BMCResetter interface {
	ResetBMC(ctx context.Context, n Node) error
}
