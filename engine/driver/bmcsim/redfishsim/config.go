// Package redfishsim is castiron's own Redfish BMC emulator: one Server is
// one BMC (a service root, a session service, one ComputerSystem with its
// Manager and Chassis, BIOS settings with an attribute registry, storage
// controllers with drives and volumes, an update service with firmware
// inventory and tasks). Power, boot override and virtual media either stay
// fields (state-only mode, Machine nil) or drive a qemu VM through QMP
// (QEMU). It serves the e2e tests, the fleet benchmark and the demo rack;
// nothing in the castiron binary imports it.
//
// Provenance: the resource shapes follow the DMTF Redfish schemas and public
// mockups (DSP2043 public-rackmount1: ServiceRoot, ComputerSystem, Bios,
// SecureBoot, Storage/Drive/Volume, VirtualMedia, UpdateService,
// SoftwareInventory, TaskService/Task, AttributeRegistry) and the vendor
// differences recorded in engine/driver/redfish/redfishfake/shapes (Dell
// iDRAC 9, HPE iLO 5, from their public API guides). The JSON is written
// here from those shapes; no third-party code or file is copied.
package redfishsim

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Flavour selects the vendor differences a Server shows.
type Flavour string

const (
	// Generic is the DMTF public-rackmount1 mockup: Systems/437XR1138R2,
	// Managers/BMC, Chassis/1U, virtual media CD1 and Floppy1 under the
	// Manager, every reset type.
	Generic Flavour = "generic"
	// IDRAC is a Dell iDRAC 9: System.Embedded.1, iDRAC.Embedded.1,
	// virtual media CD and RemovableDisk under the Manager, no
	// GracefulRestart, Dell BIOS attribute names, RAID.Integrated.1-1;
	// volume create/delete answer 202 with a task (Dell's jobs).
	IDRAC Flavour = "idrac"
	// ILO is an HPE iLO 5: Systems/1/, Managers/1/, every @odata.id with a
	// trailing slash, an absolute session Location, virtual media 1
	// (floppy/USB) and 2 (CD) under the Manager, Bios/settings (lower
	// case), HPE BIOS attribute names.
	ILO Flavour = "ilo"
)

// Config is one BMC. Zero values take the flavour's defaults.
type Config struct {
	Flavour  Flavour // [Generic]
	User     string  // ["admin"]
	Password string  // ["password"]
	// NoSessionService answers POST …/Sessions 404 and leaves the session
	// service out of the service root (sushy-tools): basic auth only.
	NoSessionService bool
	// NoBasicAuth refuses HTTP basic auth: sessions only.
	NoBasicAuth bool
	// SessionTimeout ends a session unused for that long [30m].
	SessionTimeout time.Duration
	// VirtualMedia is where the slots live: "manager" (DMTF, iDRAC, iLO),
	// "system" (sushy-tools) or "both" [manager].
	VirtualMedia string
	// OnceReadsContinuous stores BootSourceOverrideEnabled Once as
	// Continuous (sushy-tools' libvirt backend).
	OnceReadsContinuous bool

	SystemID  string // [per flavour]
	ManagerID string
	ChassisID string
	UUID      string   // [per flavour]
	MACs      []string // the system's NICs [per flavour]
	MemoryGiB float64  // [per flavour]
	CPUs      int      // sockets [2]
	Threads   int      // per socket [per flavour]
	BootMode  string   // "UEFI" or "Legacy" [per flavour]
	Drives    []DriveConfig

	// Machine drives a real VM (QEMU); nil keeps power, boot and media as
	// fields (state-only).
	Machine Machine
	// MediaDir is where InsertMedia downloads images for the Machine
	// ["": a temporary directory when Machine is set; state-only mode does
	// not download].
	MediaDir string
	// HTTPClient fetches virtual media and firmware images
	// [a client with a 5 minute timeout].
	HTTPClient *http.Client

	// NoUpdateService leaves the UpdateService out (service root link
	// absent, its paths 404): a BMC that cannot update firmware.
	NoUpdateService bool
	// NoStorage leaves the Storage collection out of the System (its
	// paths 404): a BMC without a RAID controller.
	NoStorage bool
	// RAIDTypes replaces the controller's SupportedRAIDTypes [per flavour];
	// a level left out is refused at volume creation (400).
	RAIDTypes []string
	// MultipartOnly leaves SimpleUpdate out of the UpdateService: firmware
	// goes through MultipartHttpPushUri only.
	MultipartOnly bool

	// SSHConsoleManagerOnly advertises the SSH serial console (ServeSSH)
	// only in the Manager's deprecated SerialConsole and NetworkProtocol,
	// not in the ComputerSystem's SerialConsole (v1_13): a BMC whose
	// Redfish predates it (iDRAC 9, iLO 5 firmware of their time).
	SSHConsoleManagerOnly bool
	// SSHPassword is the SSH console's password ["": Password]: a BMC
	// whose SSH service has accounts of its own.
	SSHPassword string
	// SSHNoExec refuses SSH exec requests (a BMC CLI that takes commands
	// only typed on its shell).
	SSHNoExec bool

	// TaskDelay is how long firmware update and volume tasks run [2s].
	TaskDelay time.Duration
	// Latency is added to every answer.
	Latency time.Duration
	// BMCResetTime is how long the BMC is gone after a reset of its own
	// (Manager.Reset, iDRAC's iDRACReset): connections are closed
	// unanswered and every session is forgotten [2s].
	BMCResetTime time.Duration
	// ControlAPI serves the emulator's own control API under
	// ControlPrefix (state, faults, sessions, health) for tests that run
	// the BMC in another process.
	ControlAPI bool

	Logger *slog.Logger
	// Now is the clock (tests) [time.Now].
	Now func() time.Time
}

// DriveConfig is one physical disk behind the RAID controller.
type DriveConfig struct {
	ID            string
	CapacityBytes int64
	MediaType     string // "SSD" or "HDD"
	Protocol      string // "SAS", "SATA", "NVMe"
	SerialNumber  string
	Model         string
}

// Rooted is the service root path.
const Rooted = "/redfish/v1"

func (c *Config) defaults() error {
	if c.Flavour == "" {
		c.Flavour = Generic
	}
	d, ok := flavours[c.Flavour]
	if !ok {
		return fmt.Errorf("redfishsim: flavour %q: want generic, idrac or ilo", c.Flavour)
	}
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&c.User, "admin")
	set(&c.Password, "password")
	set(&c.VirtualMedia, "manager")
	set(&c.SystemID, d.system)
	set(&c.ManagerID, d.manager)
	set(&c.ChassisID, d.chassis)
	set(&c.UUID, d.uuid)
	set(&c.BootMode, d.bootMode)
	switch c.VirtualMedia {
	case "manager", "system", "both":
	default:
		return fmt.Errorf("redfishsim: VirtualMedia %q: want manager, system or both", c.VirtualMedia)
	}
	if c.BootMode != "UEFI" && c.BootMode != "Legacy" {
		return fmt.Errorf("redfishsim: BootMode %q: want UEFI or Legacy", c.BootMode)
	}
	if len(c.MACs) == 0 {
		c.MACs = d.macs
	}
	if c.MemoryGiB == 0 {
		c.MemoryGiB = d.memGiB
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	if c.Threads == 0 {
		c.Threads = d.threads
	}
	if len(c.Drives) == 0 {
		for i := range 4 {
			c.Drives = append(c.Drives, DriveConfig{
				ID: fmt.Sprintf(d.driveID, i), CapacityBytes: 479559942144, MediaType: "SSD", Protocol: "SAS",
				SerialNumber: fmt.Sprintf("SIM%05d", 1000+i), Model: d.driveModel,
			})
		}
	}
	for i := range c.Drives {
		if c.Drives[i].ID == "" || c.Drives[i].CapacityBytes <= 0 {
			return fmt.Errorf("redfishsim: drive %d needs an ID and a positive CapacityBytes", i)
		}
		set(&c.Drives[i].MediaType, "SSD")
		set(&c.Drives[i].Protocol, "SAS")
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 30 * time.Minute
	}
	if c.TaskDelay == 0 {
		c.TaskDelay = 2 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{Proxy: nil}}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BMCResetTime == 0 {
		c.BMCResetTime = 2 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// flavourDefaults are the names and facts of each flavour (from the
// recorded shapes in engine/driver/redfish/redfishfake/shapes).
type flavourDefaults struct {
	system, manager, chassis, uuid string
	vendor, product, manufacturer  string
	model, bootMode                string
	macs                           []string
	memGiB                         float64
	threads                        int
	resetTypes                     []string
	bootTargets                    []string
	storageID, storageName         string
	driveID, driveModel            string
	raidTypes                      []string
	biosSettings                   string // path under the Bios resource
	slots                          []slotDef
	volumeTask                     bool // volume create/delete answer 202 + a task (iDRAC jobs)
	firmware                       []Component
}

type slotDef struct {
	id    string
	types []string
}

var allResets = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn", "PushPowerButton", "PowerCycle"}

var flavours = map[Flavour]flavourDefaults{
	Generic: {
		system: "437XR1138R2", manager: "BMC", chassis: "1U", uuid: "38947555-7742-3448-3784-823347823834",
		vendor: "Contoso", product: "Redfish Mockup Server", manufacturer: "Contoso", model: "3500RX",
		bootMode: "UEFI", macs: []string{"12:44:6a:3b:04:11", "aa:bb:cc:dd:ee:00"}, memGiB: 96, threads: 16,
		resetTypes:  allResets,
		bootTargets: []string{"None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup", "Utilities", "Diags", "UefiShell", "UefiTarget", "UefiHttp"},
		storageID:   "1", storageName: "Local Storage Controller", driveID: "Disk%d", driveModel: "Contoso 480GB SSD",
		raidTypes:    []string{"RAID0", "RAID1", "RAID5", "RAID6", "RAID10"},
		biosSettings: "Settings",
		slots:        []slotDef{{"CD1", []string{"CD", "DVD"}}, {"Floppy1", []string{"Floppy", "USBStick"}}},
		firmware: []Component{
			{ID: "BIOS", Name: "Contoso BIOS Firmware", Version: "P79 v1.45", Updateable: true, ResetRequired: true},
			{ID: "BMC", Name: "Contoso BMC Firmware", Version: "1.45.455b66-rev4", Updateable: true},
			{ID: "NIC1", Name: "Contoso 25GbE NIC Firmware", Version: "20.8.4", Updateable: true, adapter: "NIC.Slot.1"},
		},
	},
	IDRAC: {
		system: "System.Embedded.1", manager: "iDRAC.Embedded.1", chassis: "System.Embedded.1",
		uuid: "4c4c4544-0047-4b10-8057-b8c04f4a5832", vendor: "Dell", product: "Integrated Dell Remote Access Controller",
		manufacturer: "Dell Inc.", model: "PowerEdge R640", bootMode: "UEFI",
		macs: []string{"e4:43:4b:12:34:56", "e4:43:4b:12:34:58"}, memGiB: 191.99, threads: 24,
		resetTypes:  []string{"On", "ForceOff", "ForceRestart", "GracefulShutdown", "PushPowerButton", "Nmi", "PowerCycle"},
		bootTargets: []string{"None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup", "Utilities", "UefiTarget", "SDCard", "UefiHttp"},
		storageID:   "RAID.Integrated.1-1", storageName: "PERC H740P Mini", driveID: "Disk.Bay.%d:Enclosure.Internal.0-1:RAID.Integrated.1-1",
		driveModel: "MZ7KH480HAHQ0D3", raidTypes: []string{"RAID0", "RAID1", "RAID5", "RAID6", "RAID10", "RAID50", "RAID60"},
		biosSettings: "Settings",
		slots:        []slotDef{{"RemovableDisk", []string{"USBStick"}}, {"CD", []string{"CD", "DVD"}}},
		volumeTask:   true,
		firmware: []Component{
			{ID: "Installed-159-2.17.1", Name: "BIOS", Version: "2.17.1", Updateable: true, ResetRequired: true},
			{ID: "Installed-25227-6.10.30.00", Name: "Integrated Dell Remote Access Controller", Version: "6.10.30.00", Updateable: true},
			{ID: "Installed-0-22.31.6", Name: "Broadcom Adv. Dual 25Gb Ethernet", Version: "22.31.6", Updateable: true, adapter: "NIC.Integrated.1"},
		},
	},
	ILO: {
		system: "1", manager: "1", chassis: "1", uuid: "30373237-3132-584D-5139-323130414243",
		vendor: "HPE", product: "ProLiant DL360 Gen10", manufacturer: "HPE", model: "ProLiant DL360 Gen10",
		bootMode: "Legacy", macs: []string{"94:40:c9:aa:bb:01"}, memGiB: 32, threads: 8,
		resetTypes:  []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi", "PushPowerButton", "GracefulRestart"},
		bootTargets: []string{"None", "Cd", "Hdd", "Usb", "SDCard", "Utilities", "Diags", "BiosSetup", "Pxe", "UefiShell", "UefiHttp", "UefiTarget"},
		storageID:   "DE040000", storageName: "HPE Smart Array P408i-a SR Gen10", driveID: "%d",
		driveModel: "VK000480GWSRR", raidTypes: []string{"RAID0", "RAID1", "RAID5", "RAID6", "RAID10", "RAID50", "RAID60"},
		biosSettings: "settings",
		slots:        []slotDef{{"1", []string{"Floppy", "USBStick"}}, {"2", []string{"CD", "DVD"}}},
		firmware: []Component{
			{ID: "1", Name: "iLO 5", Version: "2.72 Sep 04 2022", Updateable: true},
			{ID: "2", Name: "System ROM", Version: "U32 v2.72 (09/29/2022)", Updateable: true, ResetRequired: true},
			{ID: "3", Name: "HPE Ethernet 1Gb 4-port 331i Adapter - NIC", Version: "20.21.41", Updateable: true, adapter: "DC080000"},
		},
	},
}
