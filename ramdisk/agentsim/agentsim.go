// Package agentsim is a simulated castiron ramdisk agent, for the simulated
// rack (engine/driver/bmcsim/rack), the fleet benchmark and `castiron demo`.
//
// It speaks castiron's agent protocol exactly as the real agent does,
// because it is the real agent's protocol code: the pull loop
// (ramdisk/agent/runloop: inspection callback or lookup by MACs, agent
// token, heartbeats, run_step/abort/power_off/reboot) over the real API
// client (ramdisk/agent/apiclient), with ramdisk/protocol's types. What is
// simulated is the machine under it: the inventory comes from Hardware (CPU,
// memory, disks, NICs with the machine's MACs, system vendor, boot mode)
// instead of sysfs, and the steps act on virtual disks (Disks): erase marks
// them erased, write_image really downloads the image over HTTP (with the
// real agent's resuming fetch), checks its checksum and discards the bytes.
package agentsim

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"castiron/ramdisk/agent/apiclient"
	"castiron/ramdisk/agent/runloop"
	"castiron/ramdisk/protocol"
)

// Version is the agent_version the simulated agent reports.
const Version = "castiron-agent/sim"

// Params are the kernel command-line parameters the real agent reads
// (what castiron's iPXE script or ISO put there).
type Params struct {
	APIURL        string // ipa-api-url
	InspectionURL string // ipa-inspection-callback-url: inspect first
	NodeUUID      string // ipa-node-uuid
	BootIF        string // BOOTIF, "01-aa-bb-cc-dd-ee-ff"
}

// ParseArgs reads the parameters from kernel arguments (key=value words);
// the last occurrence of a key wins, as in the real agent.
func ParseArgs(args []string) Params {
	var p Params
	for _, word := range args {
		key, value, _ := strings.Cut(word, "=")
		switch key {
		case protocol.ParamAPIURL:
			p.APIURL = value
		case protocol.ParamInspectionURL:
			p.InspectionURL = value
		case protocol.ParamNodeUUID:
			p.NodeUUID = value
		case protocol.ParamBootIF:
			p.BootIF = value
		}
	}
	return p
}

// BootMAC is the MAC of BootIF ("01-aa-bb-..." -> "aa:bb:..."), "" when
// BootIF is not one.
func (p Params) BootMAC() string {
	s := strings.TrimPrefix(p.BootIF, "01-")
	if len(s) != 17 {
		return ""
	}
	return strings.ToLower(strings.ReplaceAll(s, "-", ":"))
}

// Config is one run of the agent: one boot of the ramdisk.
type Config struct {
	Params
	Hardware *Hardware
	// Disks are the machine's virtual disks; they outlive the agent run
	// (an erased disk stays erased, a written image stays written).
	Disks *Disks
	// Machine powers the simulated machine off or reboots it when castiron
	// says so; Run returns after calling it.
	Machine runloop.Machine
	// Log gets the agent's lines (the machine's console); nil: none.
	Log *slog.Logger
	// HTTP is the client for the API and image downloads [own transports].
	HTTP *http.Client
	// EraseRate is how fast a full erase zeroes a virtual disk, bytes/s
	// [100 GiB/s: a 480 GB disk in about 5 s].
	EraseRate int64
	// BMCUser carries out castiron_bmc_user on the machine's BMC: create or
	// reset user name with a new password; nil fails that step.
	BMCUser func(ctx context.Context, name string) (BMCCredentials, error)
	// MinHeartbeat is the floor of castiron's heartbeat_interval
	// [runloop's default].
	MinHeartbeat time.Duration
}

// BMCCredentials are what castiron_bmc_user reports.
type BMCCredentials struct {
	Username, Password string
	UserID, Channel    int
}

// Run boots the agent and runs it until castiron says power off or reboot
// (then Machine is called and its error returned) or ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bootMAC := cfg.BootMAC()
	inv := cfg.Hardware.Inventory(bootMAC)
	api := apiclient.New(cfg.APIURL, Version)
	if cfg.HTTP != nil {
		api.HTTP = cfg.HTTP
	}
	log.Info("starting", "version", Version, "api", cfg.APIURL, "inspection", cfg.InspectionURL != "", "bootif", cfg.BootIF, "node", cfg.NodeUUID)
	log.Info("inventory collected", "cpus", inv.CPU.Count, "memory_mb", inv.Memory.PhysicalMB,
		"disks", len(inv.Disks), "nics", len(inv.Interfaces), "boot_mode", inv.Boot.CurrentBootMode)
	st := &stepper{cfg: cfg, log: log}
	return runloop.Run(ctx, runloop.Config{
		API:           api,
		InspectionURL: cfg.InspectionURL,
		NodeUUID:      cfg.NodeUUID,
		BootIF:        cfg.BootIF,
		Inventory:     inv,
		Steps:         st.run,
		Machine:       cfg.Machine,
		Log:           log,
		AgentVersion:  Version,
		MinHeartbeat:  cfg.MinHeartbeat,
	})
}
