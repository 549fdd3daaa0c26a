package driver

import "context"

// Virtual media devices, as Ironic names them (boot_devices.VMEDIA_DEVICES).
// A Redfish slot whose MediaTypes hold "CD" or "DVD" is a MediaCDROM,
// "USBStick" a MediaDisk, "Floppy" a MediaFloppy.
const (
	MediaCDROM  = "cdrom"
	MediaDisk   = "disk"
	MediaFloppy = "floppy"
)

// MediaSlot is one virtual media device of a BMC as it reads now.
type MediaSlot struct {
	// ID is the BMC's own id of the slot ("Cd", "CD1", "2"); Path its
	// resource path (it hangs under the System on some BMCs, under the
	// Manager on most: Path tells which).
	ID   string `json:"id"`
	Path string `json:"path"`
	// Device is Ironic's name for the slot (MediaCDROM, MediaDisk,
	// MediaFloppy) or "" when its media types match none of them.
	Device string `json:"device"`
	// MediaTypes are the BMC's words ("CD", "DVD", "USBStick", "Floppy").
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	// Image is the URL the BMC has attached ("" when empty).
	Image string `json:"image"`
}

// VirtualMedia is an optional Management feature: attaching an image the
// BMC fetches itself (HTTP/HTTPS URL) as a virtual device of the node. The
// redfish driver implements it; the engine checks with a type assertion
// (managementFeature) as for the other optional features.
//
// Booting from it is the Management interface's job:
// SetBootDevice(ctx, n, BootCDROM, persistent) sets the Redfish boot
// override to "Cd" once (persistent=false) or continuously. Callers must
// not rely on "once" being honoured: some BMCs (sushy-tools among them)
// accept BootSourceOverrideEnabled "Once" and read it back as "Continuous",
// so after the boot it wanted a caller sets the boot device back (or ejects
// the media) itself. Insert and eject take effect at the next power on on
// most BMCs; insert before setting the boot device (some BMCs refuse a Cd
// override with no media).
type VirtualMedia interface {
	// InsertMedia attaches url to the node's first virtual device of kind
	// device (MediaCDROM also takes a DVD slot, as Ironic does), ejecting
	// what that device held first. It fails with fault.Invalid when the
	// node has no such device or the BMC refuses the URL (its words kept).
	InsertMedia(ctx context.Context, n Node, device, url string) error
	// EjectMedia detaches what every device of kind device holds ("": every
	// device). Ejecting an empty device is not an error.
	EjectMedia(ctx context.Context, n Node, device string) error
	// MediaState lists the node's virtual media devices and what they hold.
	MediaState(ctx context.Context, n Node) ([]MediaSlot, error)
}
