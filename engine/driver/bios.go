package driver

import "context"

// BIOSSetting is one firmware (BIOS) setting as Ironic's bios_settings
// table keeps it: the current value (a string, as Ironic stores it) and
// what the BMC's attribute registry says of it. Registry fields are nil
// when the BMC has no registry entry for the setting (API 1.74 shows null).
type BIOSSetting struct {
	Name            string
	Value           *string
	AttributeType   *string // "Enumeration", "String", "Integer", "Boolean", "Password"
	AllowableValues []string
	LowerBound      *int64
	UpperBound      *int64
	MinLength       *int64
	MaxLength       *int64
	ReadOnly        *bool
	ResetRequired   *bool
	Unique          *bool
}

// BIOSApply says how a settings write was taken by the BMC.
type BIOSApply struct {
	// Written is false when every setting already had its value (current
	// and pending): nothing to apply, no reboot (Ironic skips both).
	Written bool
	// ApplyTime is the @Redfish.SettingsApplyTime sent ("OnReset"), or ""
	// when the BMC applies pending settings at its next reset by default.
	ApplyTime string
	// Job is the BMC's configuration job for the write (iDRAC's job queue),
	// "" when the BMC made none; the engine waits for it after the reboot.
	Job string
}

// BIOSJob is the state of a BMC configuration job.
type BIOSJob struct {
	Done    bool
	Failed  bool
	Percent int
	Message string
}

// BIOS is a bios interface (Ironic's BIOSInterface): settings read with
// their registry, written to the BMC's pending settings (applied at the
// next reset), and a factory reset, also applied at the next reset.
type BIOS interface {
	// Validate checks driver_info without touching the BMC.
	Validate(n Node) error
	// BIOSSettings reads the current settings with their registry
	// (cache_bios_settings). A BMC without a Bios resource is a
	// fault.Invalid error (Ironic's UnsupportedDriverExtension).
	BIOSSettings(ctx context.Context, n Node) ([]BIOSSetting, error)
	// BIOSAttributes reads the current and the pending (staged) values
	// as the BMC types them, for the check after the reboot.
	BIOSAttributes(ctx context.Context, n Node) (current, pending map[string]any, err error)
	// ApplyBIOSSettings stages settings (name -> typed value) in the BMC's
	// pending settings; they take effect at the next reset.
	ApplyBIOSSettings(ctx context.Context, n Node, settings map[string]any) (BIOSApply, error)
	// FactoryResetBIOS asks for the factory defaults at the next reset.
	FactoryResetBIOS(ctx context.Context, n Node) (BIOSApply, error)
	// BIOSJob reads a configuration job ApplyBIOSSettings or
	// FactoryResetBIOS reported.
	BIOSJob(ctx context.Context, n Node, id string) (BIOSJob, error)
}
