// Package initramfs builds the ramdisk castiron PXE-boots: a newc cpio
// archive (gzip or zstd) whose /init is the static agent binary, plus the
// kernel modules the agent needs to see NICs and disks, resolved from the
// host kernel's modules.dep. Output is reproducible: the same inputs give the
// same bytes.
package initramfs

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Compression is how the cpio archive is compressed; the kernel detects it
// by magic number, so the output file name does not change.
type Compression string

const (
	Gzip Compression = "gzip"
	Zstd Compression = "zstd"
)

// ParseCompression accepts "gzip" or "zstd" ("" means gzip).
func ParseCompression(s string) (Compression, error) {
	switch Compression(s) {
	case "", Gzip:
		return Gzip, nil
	case Zstd:
		return Zstd, nil
	}
	return "", fmt.Errorf("%w: %q (want gzip or zstd)", ErrCompressionUnsupported, s)
}

// kernelConfigKey is the kernel option that must be =y for the kernel to
// unpack an initramfs compressed this way.
func (c Compression) kernelConfigKey() string {
	switch c {
	case Zstd:
		return "CONFIG_RD_ZSTD"
	default:
		return "CONFIG_RD_GZIP"
	}
}

// DefaultModules returns the drivers a bare-metal or virtual machine needs
// to show its NICs and disks to the agent. Dependencies come from
// modules.dep; names the kernel lacks are skipped, built-ins are left out.
func DefaultModules() []string {
	return []string{
		// virtual machines
		"virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi",
		// NICs: Intel 1/10/25/40/100G, Broadcom, Mellanox, Realtek
		"e1000", "e1000e", "igb", "igc", "ixgbe", "i40e", "ice", "tg3", "bnxt_en", "mlx5_core", "r8169",
		// disk controllers: SATA, NVMe, LSI/Broadcom SAS HBAs and RAID
		"ahci", "ata_piix", "sd_mod", "nvme", "mptsas", "mpt3sas", "megaraid_sas",
		// loop devices (image handling, tests)
		"loop",
		// VLANs of a static network configuration (virtual media boots)
		"8021q",
		// UEFI variables (boot mode details)
		"efivarfs",
		// the BMC's system interface (KCS/BT/SMIC, SSIF) and /dev/ipmi0, for
		// reading the BMC's address in-band
		"ipmi_si", "ipmi_ssif", "ipmi_devintf",
	}
}

// Options says what to build. Zero values mean the documented defaults.
type Options struct {
	// AgentPath is the static agent binary; it becomes /init (0755).
	AgentPath string
	// AgentVersion is recorded in /etc/castiron-ramdisk; default: the
	// -X main.version=... the agent was linked with, read from its build
	// info (absent when it was built with -trimpath: pass it then).
	AgentVersion string
	// KernelVersion selects /boot/vmlinuz-<ver> and /lib/modules/<ver>;
	// default: the newest version that has both.
	KernelVersion string
	// ModulesRoot holds <ver>/modules.dep; default /lib/modules.
	ModulesRoot string
	// BootDir holds vmlinuz-<ver> and config-<ver>; default /boot.
	BootDir string
	// Modules to include with their dependencies; default DefaultModules().
	Modules []string
	// Compression of the archive; default Gzip.
	Compression Compression
	// OutDir receives vmlinuz and initramfs (created if missing).
	OutDir string
	// Extra files: archive path (e.g. "/etc/ssl/certs/ca.pem") -> host file.
	// Contents are copied (symlinks followed); the permission bits are kept.
	Extra map[string]string
	// BuildTime is recorded in /etc/castiron-ramdisk; default now. Every
	// file's mtime is 0 regardless, so fixing BuildTime (SOURCE_DATE_EPOCH)
	// makes the output byte-for-byte reproducible.
	BuildTime time.Time
	// Log receives progress; default: discarded.
	Log *slog.Logger
}

// Result says what was built.
type Result struct {
	KernelVersion string
	KernelPath    string // OutDir/vmlinuz
	InitramfsPath string // OutDir/initramfs
	KernelSize    int64
	Size          int64 // of the compressed initramfs
	Compression   Compression
	// Modules are the archive's module paths (relative to /lib/modules/)
	// in load order, as written to /etc/modules.order.
	Modules []string
	// Builtin are requested modules compiled into the kernel (not needed).
	Builtin []string
	// Missing are requested modules this kernel does not have.
	Missing []string
	// AgentVersion and AgentSHA256 as recorded in /etc/castiron-ramdisk.
	AgentVersion string
	AgentSHA256  string
}

// Errors a caller may want to tell apart (wrapped with details).
var (
	// ErrNoKernel: no kernel image with matching modules was found.
	ErrNoKernel = errors.New("no usable kernel (install one: apt-get install linux-image-amd64)")
	// ErrCompressionUnsupported: unknown compression, or the kernel cannot
	// unpack an initramfs compressed this way.
	ErrCompressionUnsupported = errors.New("unsupported initramfs compression")
	// ErrBadAgent: the agent is missing, not an ELF executable, or not static.
	ErrBadAgent = errors.New("unusable agent binary")
	// ErrBadExtra: an extra file's archive path is invalid or taken.
	ErrBadExtra = errors.New("invalid extra file")
)

const (
	defaultModulesRoot = "/lib/modules"
	defaultBootDir     = "/boot"

	// Names of the outputs in OutDir (castiron's HTTP boot serves them).
	KernelFileName    = "vmlinuz"
	InitramfsFileName = "initramfs"

	// Paths inside the archive the agent relies on.
	ModulesOrderPath   = "/etc/modules.order"
	ModulesDir         = "/lib/modules"
	ModulesAliasPath   = ModulesDir + "/modules.alias"
	ModulesDepPath     = ModulesDir + "/modules.dep"
	ModulesSoftdepPath = ModulesDir + "/modules.softdep"
	InfoPath           = "/etc/castiron-ramdisk"
)

func (o Options) withDefaults() Options {
	if o.ModulesRoot == "" {
		o.ModulesRoot = defaultModulesRoot
	}
	if o.BootDir == "" {
		o.BootDir = defaultBootDir
	}
	if o.Modules == nil {
		o.Modules = DefaultModules()
	}
	if o.Compression == "" {
		o.Compression = Gzip
	}
	if o.BuildTime.IsZero() {
		o.BuildTime = time.Now()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}
