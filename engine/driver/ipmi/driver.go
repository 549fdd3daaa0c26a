// Package ipmi is the "ipmi" power and management driver: it talks to BMCs
// natively over IPMI 2.0 RMCP+ ("lanplus") or IPMI 1.5 ("lan") with
// github.com/bougou/go-ipmi, without running ipmitool. driver_info keys,
// semantics and messages follow Ironic's ipmitool driver.
package ipmi

import (
	"context"
	"log/slog"
	"time"

	"castiron/engine/driver"
)

// Config tunes timing; the zero value gives the defaults noted per field.
type Config struct {
	// Timeout bounds one UDP request/reply exchange. Default 1s (ipmitool's
	// lanplus default).
	Timeout time.Duration
	// Retries is how often an exchange is re-sent after a timeout. Default 4
	// (ipmitool's); negative means none.
	Retries int
	// ProbeTimeout bounds each exchange while trying cipher suite 17 on a
	// BMC not seen before (one re-send). Default 300ms: a BMC that takes
	// suite 17 answers far quicker, one that does not must not stall the
	// fallback to suite 3.
	ProbeTimeout time.Duration
	// PowerTimeout is the wait for a power state when SetPowerState gets
	// timeout <= 0. Default 60s (Ironic's power_state_change_timeout).
	PowerTimeout time.Duration
	// SoftPowerOffTimeout replaces it for soft power off and the soft part of
	// soft rebooting. Default 600s (Ironic's soft_power_off_timeout).
	SoftPowerOffTimeout time.Duration
	// PollInterval is the first pause between power state reads; it doubles
	// up to MaxPollInterval. Defaults 50ms and 2s.
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// SessionPerOperation opens and closes a session for every power read
	// too. By default a power read leaves its session open for the next
	// read of the same BMC (keep.go): 1 round trip instead of 7.
	SessionPerOperation bool
	// Logger receives the few events worth keeping (cipher suite fallback,
	// boot timeout refused). Default slog.Default().
	Logger *slog.Logger
}

// Driver implements driver.Power and driver.Management. It is safe for
// concurrent use. Power changes and boot device calls open their own
// session; power reads reuse one kept per BMC (keep.go).
type Driver struct {
	cfg    Config
	log    *slog.Logger
	suites suiteCache
	keep   keptPool
}

var (
	_ driver.Power         = (*Driver)(nil)
	_ driver.Management    = (*Driver)(nil)
	_ driver.SessionKeeper = (*Driver)(nil)
	_ driver.BMCAddresser  = (*Driver)(nil)
)

// New returns a Driver with cfg's zero fields set to their defaults.
func New(cfg Config) *Driver {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Timeout, time.Second)
	def(&cfg.ProbeTimeout, 300*time.Millisecond)
	def(&cfg.PowerTimeout, 60*time.Second)
	def(&cfg.SoftPowerOffTimeout, 600*time.Second)
	def(&cfg.PollInterval, 50*time.Millisecond)
	def(&cfg.MaxPollInterval, 2*time.Second)
	switch {
	case cfg.Retries == 0:
		cfg.Retries = 4
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Driver{cfg: cfg, log: cfg.Logger}
}

// Validate checks driver_info without touching the BMC.
func (d *Driver) Validate(n driver.Node) error {
	_, err := parseInfo(n)
	return err
}

// Verify opens a session and reads the chassis status: it proves the
// address, credentials, privilege level and cipher suite.
func (d *Driver) Verify(ctx context.Context, n driver.Node) error {
	_, err := d.PowerState(ctx, n)
	return err
}

// SupportedPowerStates is Ironic's list for the ipmitool power interface.
func (d *Driver) SupportedPowerStates() []string {
	return []string{driver.PowerOn, driver.PowerOff, driver.Rebooting, driver.SoftRebooting, driver.SoftPowerOff}
}

// SupportedBootDevices is Ironic's list for the ipmitool management interface.
func (d *Driver) SupportedBootDevices() []string {
	return []string{driver.BootPXE, driver.BootDisk, driver.BootCDROM, driver.BootBIOS, driver.BootSafe}
}

// Properties documents the driver_info keys (GET /v1/drivers/ipmi/properties).
func Properties() []driver.Property {
	return []driver.Property{
		{Name: "ipmi_address", Description: "IP address or hostname of the node. Required."},
		{Name: "ipmi_username", Description: "username; default is NULL user. Optional."},
		{Name: "ipmi_password", Description: "password. Optional."},
		{Name: "ipmi_port", Description: "remote IPMI RMCP port. Optional."},
		{Name: "ipmi_priv_level", Description: "privilege level; default is ADMINISTRATOR. One of ADMINISTRATOR, CALLBACK, OPERATOR, USER. Optional."},
		{Name: "ipmi_protocol_version", Description: "the version of the IPMI protocol; default is \"2.0\". One of \"1.5\", \"2.0\". Optional."},
		{Name: "ipmi_cipher_suite", Description: "The number of a cipher suite to use. Only 3 (AES-128 with SHA1) or 17 (AES-128 with SHA256) should ever be used; 17 is preferred. When unset, 17 is tried first, then 3, and the one that works is remembered. Optional."},
		{Name: "ipmi_force_boot_device", Description: "Whether Ironic should specify the boot device to the BMC each time the server is turned on, eg. because the BMC is not capable of remembering the selected boot device across power cycles; default value is False. Optional."},
		{Name: "ipmi_disable_boot_timeout", Description: "By default the driver sends a command to disable the 60 second timeout for booting. Setting this option to False will NOT send that command on this node. Optional."},
		{Name: "ipmi_bridging", Description: "bridging_type; only \"no\" is supported. Optional."},
		{Name: "ipmi_hex_kg_key", Description: "Kg key for IPMIv2 authentication; not supported by this driver. Optional."},
		{Name: "ipmi_terminal_port", Description: "node's UDP port to connect to. Only required for console access."},
	}
}

// BMCAddress is ipmi_address:ipmi_port, "" when driver_info is invalid.
func (d *Driver) BMCAddress(n driver.Node) string {
	inf, err := parseInfo(n)
	if err != nil {
		return ""
	}
	return inf.target()
}
