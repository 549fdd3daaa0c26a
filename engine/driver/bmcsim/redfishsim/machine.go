package redfishsim

import "context"

// Machine is the computer behind the BMC. The Server keeps the Redfish
// state; a Machine only carries it out. Every call is made with the
// Server's lock released, so a slow VM never blocks reads of other
// resources.
type Machine interface {
	// Running reports whether the machine is powered on.
	Running() bool
	// PowerOn starts the machine; boot is called for the boot settings at
	// this start and at every restart the guest asks for itself.
	PowerOn(ctx context.Context, boot func() Boot) error
	// PowerOff stops it: at once (force) or by an ACPI power button press
	// (the guest may take its time, or ignore it).
	PowerOff(ctx context.Context, force bool) error
	// Restart is a hard reset that reads the boot settings again.
	Restart(ctx context.Context, boot func() Boot) error
	// NMI injects a non-maskable interrupt.
	NMI(ctx context.Context) error
	// SetMedia puts the local image file path into the machine's drive of
	// the kind ("cd" or "usb"); "" ejects it. It takes effect at once when
	// the machine runs, else at its next start.
	SetMedia(ctx context.Context, kind, path string) error
}

// Boot is what the machine boots from at one start.
type Boot struct {
	// Target is the Redfish BootSourceOverrideTarget in force for this
	// boot ("None": the machine's own order: disk, then network).
	Target string
	// Mode is "UEFI" or "Legacy".
	Mode string
	// HTTPBootURI is the URI of a UefiHttp boot.
	HTTPBootURI string
	// HTTPBootFile is, for a UefiHttp boot with an HTTPBootURI, the image
	// the firmware fetched from it (Machine mode; "" when the fetch
	// failed). UEFI HTTP boot of an ISO boots it from a RAM disk; a
	// Machine boots the file as its first device for that boot.
	HTTPBootFile string
	// SecureBoot: UEFI Secure Boot is on for this boot (SecureBootEnable
	// in UEFI mode); a Machine boots firmware that enforces it.
	SecureBoot bool
}
