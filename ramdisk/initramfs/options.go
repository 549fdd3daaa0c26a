// Package initramfs builds the ramdisk castiron PXE-boots: a newc cpio
// archive (lz4, gzip, zstd or none) whose /init is the static agent binary, plus the
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

// The kernel's initramfs decompressors that a ramdisk build may use. The
// default is LZ4: measured under qemu TCG (BIOS, 2 vCPUs) on the default
// 12 MB archive, the kernel unpacks it in about half of gzip's time and a
// fifth of xz's, while the file stays 2.3x smaller than an uncompressed one
// (5.4 MB vs 12.5 MB to download); see ramdisk/BOOT-SPEED.md.
const (
	Gzip Compression = "gzip"
	Zstd Compression = "zstd"
	// LZ4 is lz4's legacy frame format, the one the kernel's unlz4 reads.
	LZ4 Compression = "lz4"
	// None writes the archive uncompressed.
	None Compression = "none"
)

// DefaultCompression is what "" means when the kernel can unpack it
// (its config says CONFIG_RD_LZ4=y); otherwise "" means Gzip.
const DefaultCompression = LZ4

// ParseCompression accepts gzip, zstd, lz4 or none, and "" (the default:
// DefaultCompression if the kernel has it, else gzip).
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case "", Gzip, Zstd, LZ4, None:
		return c, nil
	}
	return "", fmt.Errorf("%w: %q (want gzip, zstd, lz4 or none)", ErrCompressionUnsupported, s)
}

// kernelConfigKey is the kernel option that must be =y for the kernel to
// unpack an initramfs compressed this way ("" for none: always readable).
func (c Compression) kernelConfigKey() string {
	switch c {
	case Zstd:
		return "CONFIG_RD_ZSTD"
	case LZ4:
		return "CONFIG_RD_LZ4"
	case None:
		return ""
	default:
		return "CONFIG_RD_GZIP"
	}
}

// DefaultModules is the small set a ramdisk gets unless told otherwise:
// the drivers of virtual machines (qemu/KVM, libvirt, the e2e VMs) and what
// the agent loads for its own sake. Every module costs boot time twice: it
// is downloaded and decompressed before the agent starts, whether or not
// the machine has the device (the archive of FullModules is 27 MB
// uncompressed, of which 17 MB are modules; this set's modules are ~3 MB).
// Physical servers want FullModules (make ramdisk RAMDISK_MODULES=full).
func DefaultModules() []string {
	return append([]string{
		// virtual machines: virtio over PCI (x86, arm64 virt) and MMIO
		"virtio_pci", "virtio_mmio", "virtio_net", "virtio_blk", "virtio_scsi",
		// SCSI and SATA disks (virtio-scsi, q35's AHCI)
		"sd_mod", "ahci",
	}, agentModules()...)
}

// FullModules returns the drivers a bare-metal or virtual machine needs
// to show its NICs and disks to the agent: DefaultModules plus the common
// server NICs and disk controllers. Dependencies come from modules.dep;
// names the kernel lacks are skipped, built-ins are left out.
func FullModules() []string {
	return append(DefaultModules(),
		// NICs: Intel 1/10/25/40/100G, Broadcom, Mellanox, Realtek
		"e1000", "e1000e", "igb", "igc", "ixgbe", "i40e", "ice", "tg3", "bnxt_en", "mlx5_core", "r8169",
		// disk controllers: legacy IDE/SATA, NVMe, LSI/Broadcom SAS HBAs and RAID
		"ata_piix", "nvme", "mptsas", "mpt3sas", "megaraid_sas",
	)
}

// agentModules are loaded by the agent whatever the hardware.
func agentModules() []string {
	return []string{
		// loop devices (image handling, tests)
		"loop",
		// VLANs of a static network configuration (virtual media boots)
		"8021q",
		// UEFI variables (boot mode details)
		"efivarfs",
		// the BMC's system interface (KCS/BT/SMIC, SSIF) and /dev/ipmi0, for
		// reading the BMC's address in-band
		"ipmi_si", "ipmi_ssif", "ipmi_devintf",
		// software RAID (the agent raid interface): md and its levels
		"md_mod", "raid0", "raid1", "raid10", "raid456",
	}
}

// Named module sets for -modules / RAMDISK_MODULES.
const (
	ModuleSetDefault = "default"
	ModuleSetFull    = "full"
)

// ModuleSet returns the modules of a named set, false for an unknown name.
func ModuleSet(name string) ([]string, bool) {
	switch name {
	case ModuleSetDefault:
		return DefaultModules(), true
	case ModuleSetFull:
		return FullModules(), true
	}
	return nil, false
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
	// Compression of the archive; default DefaultCompression, or Gzip when
	// the kernel's config does not show CONFIG_RD_LZ4=y.
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
	if o.BuildTime.IsZero() {
		o.BuildTime = time.Now()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}
