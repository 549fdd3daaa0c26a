package driver

import "context"

// Firmware component names, as Ironic's redfish firmware interface names
// them (ironic.drivers.modules.redfish.utils): the BIOS, the BMC, and one
// "nic:<serial or adapter id>" per network adapter.
const (
	FirmwareBIOS      = "bios"
	FirmwareBMC       = "bmc"
	FirmwareNICPrefix = "nic:"
)

// FirmwareComponent is one piece of firmware a BMC reports.
type FirmwareComponent struct {
	Component    string // FirmwareBIOS, FirmwareBMC or FirmwareNICPrefix+id
	Version      string
	Vendor       string // "" when the BMC does not say
	Model        string
	SerialNumber string
}

// FirmwareImage is one update handed to a BMC: the component it is for and
// the URL the BMC fetches it from (castiron serves it, checksum verified).
// Image, when set, opens the same bytes for a BMC that takes a pushed
// image instead of fetching one (no SimpleUpdate).
type FirmwareImage struct {
	Component string
	URL       string
	Image     func() (ReadSeekCloser, int64, error)
}

// TaskState is what a BMC task (firmware update, RAID volume) reports.
type TaskState struct {
	Done    bool
	Failed  bool   // Done with TaskState Exception/Killed/Cancelled or Critical status
	Percent int    // -1 when the BMC does not say
	Message string // the BMC's messages, joined
	// ResetRequired: the update is staged and applies at the next reset of
	// the system (a BIOS update, or a message Base.ResetRequired).
	ResetRequired bool
}

// Firmware reads and updates a node's firmware through its BMC (Ironic's
// firmware interface).
type Firmware interface {
	// FirmwareComponents lists the components the BMC reports.
	FirmwareComponents(ctx context.Context, n Node) ([]FirmwareComponent, error)
	// StartFirmwareUpdate hands one image to the BMC and returns the
	// handle of the task that applies it (a task monitor URI). A BMC
	// without an UpdateService is a fault.Invalid error naming it.
	StartFirmwareUpdate(ctx context.Context, n Node, img FirmwareImage) (string, error)
	// FirmwareTask reads the state of a task StartFirmwareUpdate started.
	FirmwareTask(ctx context.Context, n Node, task string) (TaskState, error)
}
