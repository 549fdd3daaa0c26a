package netboot

import (
	"fmt"
	"net"
	"strings"

	"castiron/pxe/boot"
	"castiron/ramdisk/protocol"
)

// How often the script tries to load kernel and initramfs before giving up,
// and how long it waits between tries (a ramdisk being rebuilt, a busy
// server). Worst case a node spends ~attempts×delay here before it powers
// off and engine's deadline takes over.
const (
	defaultAttempts     = 5
	defaultRetrySeconds = 5
)

// Names iPXE gives the loaded images. initrd=<name> on the kernel command
// line must match the initrd's name: UEFI iPXE hands the EFI-stub kernel
// only the initrds named there (lab NOTES gotcha 12).
const (
	kernelImageName = "vmlinuz"
	initrdImageName = "initramfs"
	trustImageName  = "ca"
)

// scriptParams is what one node's script depends on.
type scriptParams struct {
	BootURL   string // where iPXE loads kernel and initramfs, no trailing slash
	APIURL    string // where the agent calls castiron, no trailing slash
	MAC       net.HardwareAddr
	Decision  boot.Decision
	ExtraArgs []string
	Inspect   []string // more arguments when the boot is to inspect
	Trust     bool     // load castiron's CA overlay as a second initrd
	Arch      string   // the ramdisk's architecture ("" or DefaultArch: x86_64)
	Attempts  int
	RetrySecs int
}

// kernelArgs is the kernel command line, in iPXE syntax (${...} is
// expanded by iPXE on the node).
func kernelArgs(p scriptParams) []string {
	args := []string{"initrd=" + initrdImageName}
	if p.Trust {
		args = append(args, "initrd="+trustImageName)
	}
	args = append(args, protocol.AgentArgs(p.APIURL, p.Decision.NodeUUID, p.Arch, p.Decision.Purpose == "inspect")...)
	// netX is the interface iPXE booted from; hexhyp gives aa-bb-...
	args = append(args, protocol.ParamBootIF+"=01-${netX/mac:hexhyp}")
	if p.Decision.Purpose == "inspect" {
		args = append(args, p.Inspect...)
	}
	return append(args, p.ExtraArgs...)
}

// renderScript writes the iPXE script. The retry counter is a string that
// grows by one dot per try, because the `inc` command is missing from
// older iPXE builds (Debian's 2019 ROMs) while set/iseq are everywhere.
// Images are freed before each try so a half-loaded kernel does not linger.
func renderScript(p scriptParams) string {
	mac := p.MAC.String()
	query := "?mac=" + mac
	if p.Arch != "" && p.Arch != DefaultArch {
		query += "&arch=" + p.Arch
	}
	node := p.Decision.NodeUUID
	if node == "" {
		node = "(unknown)"
	}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("#!ipxe")
	line("# castiron %s boot of node %s, MAC %s", p.Decision.Purpose, node, mac)
	line("echo castiron: %s boot of node %s", p.Decision.Purpose, node)
	line("clear castiron-try ||")
	line(":retry")
	line("iseq x${castiron-try} x%s && goto giveup ||", strings.Repeat(".", p.Attempts))
	line("set castiron-try ${castiron-try}.")
	line("imgfree ||")
	line("kernel --name %s %s/boot/vmlinuz%s %s || goto failed", kernelImageName, p.BootURL, query, strings.Join(kernelArgs(p), " "))
	line("initrd --name %s %s/boot/initramfs%s || goto failed", initrdImageName, p.BootURL, query)
	if p.Trust {
		// After the ramdisk: the kernel unpacks it over it (the CA file).
		line("initrd --name %s %s/boot/ca.cpio || goto failed", trustImageName, p.BootURL)
	}
	line("boot || goto failed")
	line(":failed")
	line("echo castiron: loading kernel/initramfs failed (try ${castiron-try}), again in %d s", p.RetrySecs)
	line("sleep %d ||", p.RetrySecs)
	line("goto retry")
	line(":giveup")
	line("echo castiron: giving up after %d tries", p.Attempts)
	// poweroff is not built into every iPXE; exit hands back to firmware.
	line("poweroff || exit 1")
	return b.String()
}

// renderInstanceScript is the iPXE script of a node deployed with the
// ramdisk deploy interface (Ironic's ipxe_config.template ramdisk boot):
// the user's ISO by sanboot, or its kernel and ramdisk from their URLs with
// instance_info.ramdisk_kernel_arguments; retried as the agent's script.
func renderInstanceScript(p scriptParams) string {
	inst := p.Decision.Instance
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("#!ipxe")
	line("# castiron ramdisk instance boot of node %s, MAC %s", p.Decision.NodeUUID, p.MAC)
	line("echo castiron: ramdisk instance boot of node %s", p.Decision.NodeUUID)
	line("clear castiron-try ||")
	line(":retry")
	line("iseq x${castiron-try} x%s && goto giveup ||", strings.Repeat(".", p.Attempts))
	line("set castiron-try ${castiron-try}.")
	line("imgfree ||")
	if inst.ISO != "" {
		line("sanboot --no-describe %s || goto failed", inst.ISO)
	} else {
		args := append([]string{"initrd=" + initrdImageName}, inst.Args...)
		line("kernel --name %s %s %s || goto failed", kernelImageName, inst.Kernel, strings.Join(args, " "))
		line("initrd --name %s %s || goto failed", initrdImageName, inst.Ramdisk)
		line("boot || goto failed")
	}
	line(":failed")
	line("echo castiron: loading the instance failed (try ${castiron-try}), again in %d s", p.RetrySecs)
	line("sleep %d ||", p.RetrySecs)
	line("goto retry")
	line(":giveup")
	line("echo castiron: giving up after %d tries", p.Attempts)
	line("poweroff || exit 1")
	return b.String()
}
