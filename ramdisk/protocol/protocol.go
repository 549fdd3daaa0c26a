// Package protocol holds the wire types that castiron and its ramdisk agent
// share: the hardware inventory in Ironic's format, the lookup and heartbeat
// bodies of Ironic's ramdisk API, and castiron's pull extension (the answer
// to a heartbeat tells the agent what to do next). It has no dependencies so
// that the agent program stays small. See ramdisk/PROTOCOL.md.
package protocol

// Kernel command-line parameters the agent reads. The names are
// ironic-python-agent's, so a stock IPA ramdisk booted by castiron's iPXE
// script finds the API too.
const (
	// ParamAPIURL is the base URL of the API, e.g. http://10.0.0.1:6385.
	ParamAPIURL = "ipa-api-url"
	// ParamInspectionURL is the full continue_inspection URL.
	ParamInspectionURL = "ipa-inspection-callback-url"
	// ParamBootIF is pxelinux/iPXE's "01-aa-bb-cc-dd-ee-ff" of the booting NIC.
	ParamBootIF = "BOOTIF"
	// ParamNodeUUID, when set, lets lookup skip the MAC search.
	ParamNodeUUID = "ipa-node-uuid"
	// ParamDebug keeps the agent's console verbose.
	ParamDebug = "ipa-debug"
	// ParamBootMethod is "vmedia" when the ramdisk was booted from a
	// virtual media ISO (Ironic's boot_method).
	ParamBootMethod = "boot_method"
	// ParamCollectLLDP ("1") makes the agent listen for the switch's LLDP
	// frames on every NIC and report them in the inventory (IPA's name).
	ParamCollectLLDP = "ipa-collect-lldp"
	// ParamLLDPTimeout bounds that listening, in seconds (IPA's name;
	// default 30).
	ParamLLDPTimeout = "ipa-lldp-timeout"
)

// NetworkDataFile is where a virtual media ISO puts the node's
// network_data (OpenStack network_data.json) in the ramdisk's root, through
// a second initrd; when present the agent configures its network from it
// instead of DHCP.
const NetworkDataFile = "etc/castiron/network_data.json"

// Inventory is ironic-python-agent's hardware inventory, as posted to
// /v1/continue_inspection under "inventory" and served by
// GET /v1/nodes/{id}/inventory.
type Inventory struct {
	Interfaces   []Interface  `json:"interfaces"`
	CPU          CPU          `json:"cpu"`
	Disks        []Disk       `json:"disks"`
	Memory       Memory       `json:"memory"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Boot         Boot         `json:"boot"`
	Hostname     string       `json:"hostname"`
	BMCAddress   *string      `json:"bmc_address"`
	BMCV6Address *string      `json:"bmc_v6address"`
	BMCMAC       *string      `json:"bmc_mac,omitempty"`
	// RedfishHostInterface is castiron's: the firmware's SMBIOS type 42
	// Redfish host interface, when it publishes one.
	RedfishHostInterface *RedfishHostInterface `json:"redfish_host_interface,omitempty"`
}

// RedfishHostInterface is an SMBIOS type 42 (DSP0270) network host
// interface with its "Redfish over IP" protocol record: how the host
// reaches the BMC's Redfish service from inside (a USB or PCI NIC to the
// BMC), which is not the BMC's address on the management network.
type RedfishHostInterface struct {
	DeviceType      string `json:"device_type"` // usb, pci, usb-v2, pci-v2, other
	ServiceUUID     string `json:"service_uuid,omitempty"`
	ServiceAddress  string `json:"service_address,omitempty"`
	ServicePort     int    `json:"service_port,omitempty"`
	ServiceHostname string `json:"service_hostname,omitempty"`
	ServiceVLAN     int    `json:"service_vlan,omitempty"`
	HostAddress     string `json:"host_address,omitempty"`
	// HostAssignment: static, dhcp, auto-configure or host-selected.
	HostAssignment string `json:"host_assignment,omitempty"`
}

// Interface is one NIC.
type Interface struct {
	Name        string  `json:"name"`
	MACAddress  string  `json:"mac_address"`
	IPV4Address *string `json:"ipv4_address"`
	IPV6Address *string `json:"ipv6_address"`
	HasCarrier  bool    `json:"has_carrier"`
	LLDP        any     `json:"lldp"`
	Vendor      *string `json:"vendor"`  // PCI vendor id, e.g. "0x1af4"
	Product     *string `json:"product"` // PCI device id
	ClientID    *string `json:"client_id"`
	BIOSDevName *string `json:"biosdevname"`
	SpeedMbps   *int    `json:"speed_mbps,omitempty"`
}

// CPU is the processor summary.
type CPU struct {
	ModelName    string   `json:"model_name"`
	Frequency    string   `json:"frequency"`
	Count        int      `json:"count"`
	Architecture string   `json:"architecture"` // x86_64, aarch64
	Flags        []string `json:"flags"`
	SocketCount  int      `json:"socket_count,omitempty"`
}

// Memory sizes: Total in bytes (what the kernel sees), PhysicalMB the
// installed memory in MiB (memory blocks / DMI), which Ironic uses as
// properties.memory_mb.
type Memory struct {
	Total      int64 `json:"total"`
	PhysicalMB int64 `json:"physical_mb"`
}

// Disk is one block device.
type Disk struct {
	Name               string  `json:"name"` // /dev/vda
	Model              string  `json:"model"`
	Size               int64   `json:"size"` // bytes
	Rotational         bool    `json:"rotational"`
	WWN                *string `json:"wwn"`
	Serial             *string `json:"serial"`
	Vendor             *string `json:"vendor"`
	WWNWithExtension   *string `json:"wwn_with_extension"`
	WWNVendorExtension *string `json:"wwn_vendor_extension"`
	HCTL               *string `json:"hctl"`
	ByPath             *string `json:"by_path"`
	LogicalSectors     int     `json:"logical_sectors,omitempty"`
	PhysicalSectors    int     `json:"physical_sectors,omitempty"`
}

// SystemVendor comes from /sys/class/dmi/id.
type SystemVendor struct {
	ProductName  string   `json:"product_name"`
	SerialNumber string   `json:"serial_number"`
	Manufacturer string   `json:"manufacturer"`
	Firmware     Firmware `json:"firmware"`
	// SystemUUID is castiron's: the SMBIOS system UUID (product_uuid).
	SystemUUID string `json:"system_uuid,omitempty"`
}

// Firmware is the BIOS/UEFI firmware identity.
type Firmware struct {
	Vendor    string `json:"vendor"`
	Version   string `json:"version"`
	BuildDate string `json:"build_date"`
}

// Boot is how the ramdisk was booted.
type Boot struct {
	CurrentBootMode string `json:"current_boot_mode"` // bios or uefi
	PXEInterface    string `json:"pxe_interface"`     // MAC of the booting NIC
}

// InspectionData is the body of POST /v1/continue_inspection: the inventory
// plus plugin data at the top level (IPA's layout). Error, when set, is a
// failure the agent hit while collecting; the node then fails inspection.
type InspectionData struct {
	Inventory     Inventory `json:"inventory"`
	BootInterface string    `json:"boot_interface,omitempty"` // "01-aa-bb-.." or a MAC
	RootDisk      *Disk     `json:"root_disk,omitempty"`
	Error         string    `json:"error,omitempty"`
}

// LookupResponse is GET /v1/lookup's answer (Ironic's shape).
type LookupResponse struct {
	Node   LookupNode   `json:"node"`
	Config LookupConfig `json:"config"`
}

// LookupNode is the part of the node a ramdisk may see.
type LookupNode struct {
	UUID               string         `json:"uuid"`
	Properties         map[string]any `json:"properties"`
	InstanceInfo       map[string]any `json:"instance_info"`
	DriverInternalInfo map[string]any `json:"driver_internal_info"`
}

// LookupConfig is the agent configuration returned with a lookup, with
// every key Ironic's ramdisk.config sends (an agent missing one falls back
// to its own default).
type LookupConfig struct {
	Metrics                     MetricsConfig   `json:"metrics"`
	MetricsStatsd               StatsdConfig    `json:"metrics_statsd"`
	HeartbeatTimeout            int             `json:"heartbeat_timeout"`
	AgentContainers             ContainerConfig `json:"agent_containers"`
	AgentToken                  string          `json:"agent_token"`
	AgentTokenRequired          bool            `json:"agent_token_required"`
	AgentMD5ChecksumEnable      bool            `json:"agent_md5_checksum_enable"`
	DisableDeepImageInspection  bool            `json:"disable_deep_image_inspection"`
	PermittedImageFormats       []string        `json:"permitted_image_formats"`
	AgentSkipBMCDetect          bool            `json:"agent_skip_bmc_detect"`
	EnableBIOSBootloaderInstall bool            `json:"enable_bios_bootloader_install"`
	TLSMinVersion               string          `json:"tls_min_version"`
	TLSCipherSuites             *string         `json:"tls_cipher_suites"`
}

// MetricsConfig is lookup's "metrics": where the agent sends its metrics.
type MetricsConfig struct {
	Backend            string  `json:"backend"`
	PrependHost        bool    `json:"prepend_host"`
	PrependUUID        bool    `json:"prepend_uuid"`
	PrependHostReverse bool    `json:"prepend_host_reverse"`
	GlobalPrefix       *string `json:"global_prefix"`
}

// StatsdConfig is lookup's "metrics_statsd".
type StatsdConfig struct {
	Host string `json:"statsd_host"`
	Port int    `json:"statsd_port"`
}

// ContainerConfig is lookup's "agent_containers": container steps.
type ContainerConfig struct {
	AllowArbitrary     bool     `json:"allow_arbitrary_containers"`
	Allowed            []string `json:"allowed_containers"`
	ContainerStepsFile string   `json:"container_steps_file"`
	Runner             string   `json:"runner"`
	PullOptions        []string `json:"pull_options"`
	RunOptions         []string `json:"run_options"`
}

// Heartbeat is the body of POST /v1/heartbeat/{node}. The first fields are
// Ironic's; Step is castiron's extension carrying the result and progress of
// the step the agent is running (a stock agent leaves it out).
type Heartbeat struct {
	CallbackURL        string      `json:"callback_url"`
	AgentToken         string      `json:"agent_token,omitempty"`
	AgentVersion       string      `json:"agent_version,omitempty"`
	AgentVerifyCA      *string     `json:"agent_verify_ca,omitempty"`
	AgentStatus        string      `json:"agent_status,omitempty"`
	AgentStatusMessage string      `json:"agent_status_message,omitempty"`
	Step               *StepReport `json:"castiron_step,omitempty"`
}

// Step states in a StepReport.
const (
	StepRunning   = "running"
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
)

// StepReport is what the agent says about the step it was given.
type StepReport struct {
	ID       string         `json:"id"`
	Status   string         `json:"status"` // running, succeeded, failed
	Progress *Progress      `json:"progress,omitempty"`
	Result   map[string]any `json:"result,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// Progress of a long step: Done of Total in Unit ("bytes", "disks").
type Progress struct {
	Done    int64   `json:"done"`
	Total   int64   `json:"total"`
	Unit    string  `json:"unit"`
	Percent float64 `json:"percent"`
	// Message is a short human line ("writing /dev/vda: 312 MiB of 1 GiB").
	Message string `json:"message,omitempty"`
}

// Commands in an Instruction.
const (
	// CmdWait: nothing to do now; heartbeat again after HeartbeatInterval.
	CmdWait = "wait"
	// CmdRunStep: run Step, reporting it in the following heartbeats.
	CmdRunStep = "run_step"
	// CmdAbort: stop the running step at once (it is interruptible), then
	// power off.
	CmdAbort = "abort"
	// CmdPowerOff: sync and power the machine off.
	CmdPowerOff = "power_off"
	// CmdReboot: sync and reboot (the BMC has set the next boot device).
	CmdReboot = "reboot"
)

// Instruction is castiron's answer body to a heartbeat (202 Accepted, as in
// Ironic; Ironic's own answer has no body).
type Instruction struct {
	Command string `json:"command"`
	Step    *Step  `json:"step,omitempty"`
	// HeartbeatInterval in seconds until the next heartbeat.
	HeartbeatInterval float64 `json:"heartbeat_interval"`
	// Reason is a human line for the console ("inspection aborted").
	Reason string `json:"reason,omitempty"`
}

// Step is one unit of work for the agent. Interface and Name follow Ironic's
// clean/deploy steps ("deploy", "erase_devices_metadata").
type Step struct {
	ID        string         `json:"id"`
	Interface string         `json:"interface"`
	Name      string         `json:"step"`
	Args      map[string]any `json:"args"`
	Abortable bool           `json:"abortable"`
}

// Agent step names castiron's agent implements.
const (
	StepEraseDevicesMetadata = "erase_devices_metadata"
	StepEraseDevices         = "erase_devices"
	StepWriteImage           = "write_image"
	// StepBMCUser creates or resets an IPMI user in-band (ArgUsername)
	// with a new random password, enabled with administrator privilege on
	// the BMC's LAN channel. castiron asks for it only on a node it has
	// just discovered. The result carries the password (ResultPassword):
	// castiron keeps it in driver_info only, and neither side logs it.
	StepBMCUser = "castiron_bmc_user"
)

// Software RAID steps (interface "raid", Ironic's agent raid interface):
// create_configuration and apply_configuration build the md arrays of
// ArgTargetRAIDConfig and return it as the raid_config to store;
// delete_configuration stops every md array and erases its members'
// superblocks.
const (
	StepRAIDInterface   = "raid"
	StepRAIDCreate      = "create_configuration"
	StepRAIDApply       = "apply_configuration"
	StepRAIDDelete      = "delete_configuration"
	ArgTargetRAIDConfig = "target_raid_config" // the (filtered) configuration to build
	ArgDeleteExisting   = "delete_existing"    // create/apply: delete the arrays first
	ArgNodeUUID         = "node_uuid"          // named in validation errors
)

// Arguments of StepWriteImage.
const (
	ArgImageURL       = "image_url"
	ArgImageChecksum  = "image_checksum"
	ArgImageHashAlgo  = "image_os_hash_algo" // sha256 or sha512
	ArgImageFormat    = "image_disk_format"  // raw, qcow2, gzip, zstd; "" = detect
	ArgRootDevice     = "root_device"        // Ironic root device hints
	ArgConfigDrive    = "configdrive"        // gzip+base64 ISO 9660 image, or a URL
	ArgEraseFullPass  = "full"               // erase_devices: overwrite all bytes
	ArgUsername       = "username"           // castiron_bmc_user
	ResultPassword    = "password"           // castiron_bmc_user result (secret)
	ResultUserID      = "user_id"            // castiron_bmc_user result
	ResultChannel     = "channel"            // castiron_bmc_user result: the LAN channel
	ResultTargetDisk  = "target_disk"        // write_image result: device written
	ResultBytesOnDisk = "bytes_written"
)

// AgentArgs are the kernel arguments every boot of castiron's ramdisk
// carries, whatever boots it (iPXE script, GRUB, virtual media ISO): the
// consoles (the last console= becomes /dev/console, where the agent logs:
// the serial port of arch, which a BMC's SOL shows), RamdiskKernelArgs,
// the API URL, the node when known, and the inspection callback exactly
// when the boot is for inspection (the agent inspects when that parameter
// is present).
func AgentArgs(apiURL, nodeUUID, arch string, inspect bool) []string {
	args := []string{"console=tty0", "console=" + SerialConsole(arch)}
	args = append(args, RamdiskKernelArgs...)
	args = append(args, ParamAPIURL+"="+apiURL)
	if nodeUUID != "" {
		args = append(args, ParamNodeUUID+"="+nodeUUID)
	}
	if inspect {
		args = append(args, ParamInspectionURL+"="+apiURL+"/v1/continue_inspection")
	}
	return args
}

// RamdiskKernelArgs make the ramdisk's kernel skip what a ramdisk that runs
// one trusted program does not need; measured on a qemu TCG VM in
// ramdisk/BOOT-SPEED.md (with the flags tried and left out). Arguments
// appended after them (extra kernel arguments of the boot) win:
// "loglevel=7" shows every kernel message again.
var RamdiskKernelArgs = []string{
	// Only kernel errors reach the consoles (all messages stay in the
	// kernel log; the agent's own lines are not kernel messages). Debian's
	// kernel writes ~25 KB at boot, 2.2 s at 115200 baud on a real serial
	// port or a BMC's serial-over-LAN, during which the printing CPU waits.
	"quiet",
	// No self-test of each crypto algorithm as it registers: half of the
	// kernel's boot work before /init (0.88 of 1.76 s of guest instructions
	// under qemu TCG); the agent does its cryptography in Go.
	"cryptomgr.notests",
}

// SerialConsole is the kernel's serial console for arch (a cpu_arch such as
// "aarch64"; "" is x86_64): the PL011 of arm64 servers (and qemu's virt
// machine), the 16550 of x86.
func SerialConsole(arch string) string {
	if arch == "aarch64" {
		return "ttyAMA0,115200"
	}
	return "ttyS0,115200"
}
