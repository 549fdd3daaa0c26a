package netboot

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"castiron/pxe/boot"
)

// DefaultArch is the architecture of Config.KernelPath/InitramfsPath.
const DefaultArch = "x86_64"

// Ramdisk is one architecture's agent kernel and initramfs.
type Ramdisk struct{ KernelPath, InitramfsPath string }

// arch picks the ramdisk for a boot: the architecture the firmware reported
// (asked, from DHCP), else the node's cpu_arch, else x86_64; only ones
// castiron has a ramdisk for.
func (h *Handler) arch(asked string, d boot.Decision) string {
	for _, a := range []string{asked, d.CPUArch} {
		if a == DefaultArch {
			return a
		}
		if _, ok := h.cfg.Ramdisks[a]; ok && a != "" {
			return a
		}
	}
	return DefaultArch
}

// ramdisk is arch's kernel and initramfs paths.
func (h *Handler) ramdisk(arch string) Ramdisk {
	if rd, ok := h.cfg.Ramdisks[arch]; ok {
		return rd
	}
	return Ramdisk{KernelPath: h.cfg.KernelPath, InitramfsPath: h.cfg.InitramfsPath}
}

// Files network GRUB loads from castiron's TFTP server by these names
// (the TFTP server maps them to the arm64 ramdisk and the CA overlay):
// Debian's signed arm64 network GRUB has no http module.
const (
	GRUBKernel    = "aarch64-vmlinuz"
	GRUBInitramfs = "aarch64-initramfs"
	GRUBTrust     = "aarch64-ca.cpio"
)

// GRUBConfig is the grub.cfg network GRUB (castiron's arm64 boot loader:
// Debian has no arm64 iPXE) loads over TFTP: the same kernel command line as
// the iPXE script, the files over TFTP from local (castiron's address the
// node reached). ok is false when the gate refuses mac.
func (h *Handler) GRUBConfig(ctx context.Context, mac net.HardwareAddr, local netip.Addr, arch string) ([]byte, bool) {
	d, ok := boot.Decision{}, false
	if h.cfg.Gate != nil {
		d, ok = h.cfg.Gate.Allow(ctx, mac)
	}
	ev := boot.Event{MAC: mac.String(), Kind: boot.HTTPScript}
	if !ok {
		ev.Detail = "grub.cfg refused: not allowed to network-boot"
		h.rec.Record(ctx, ev)
		return nil, false
	}
	if d.Instance != nil {
		// A ramdisk instance through network GRUB (arm64): not done; the
		// node gets no config, as for a refusal.
		ev.NodeUUID, ev.Detail = d.NodeUUID, "grub.cfg refused: a ramdisk instance boot by GRUB is not implemented"
		h.rec.Record(ctx, ev)
		h.log.Warn("grub.cfg refused: ramdisk instance boot by GRUB is not implemented", "mac", mac.String(), "node", d.NodeUUID)
		return nil, false
	}
	urls := h.urlsFor(local, "")
	p := scriptParams{BootURL: urls.Boot, APIURL: urls.API, MAC: mac, Decision: d, ExtraArgs: h.cfg.ExtraKernelArgs,
		Inspect: h.cfg.InspectionKernelArgs, Trust: h.cfg.TrustArchive != nil, Arch: h.arch(arch, d)}
	dev := "(tftp," + local.String() + ")/"
	var b strings.Builder
	fmt.Fprintf(&b, "set timeout=0\n")
	fmt.Fprintf(&b, "echo 'castiron: %s boot of node %s'\n", d.Purpose, orUnknown(d.NodeUUID))
	args := kernelArgs(p)
	for i, a := range args {
		args[i] = grubQuote(a)
	}
	fmt.Fprintf(&b, "linux %s %s\n", grubQuote(dev+GRUBKernel), strings.Join(args, " "))
	initrds := grubQuote(dev + GRUBInitramfs)
	if p.Trust {
		initrds += " " + grubQuote(dev+GRUBTrust)
	}
	fmt.Fprintf(&b, "initrd %s\nboot\n", initrds)
	ev.NodeUUID, ev.Detail = d.NodeUUID, "grub.cfg purpose="+d.Purpose+" arch="+p.Arch
	h.rec.Record(ctx, ev)
	h.log.Info("grub.cfg served", "mac", mac.String(), "node", d.NodeUUID, "purpose", d.Purpose, "arch", p.Arch)
	return []byte(b.String()), true
}

// grubQuote single-quotes a word for GRUB's shell-like parser.
func grubQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
