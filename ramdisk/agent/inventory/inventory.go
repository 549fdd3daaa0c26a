// Package inventory collects this machine's hardware inventory from sysfs and
// procfs, in the format ironic-python-agent posts (protocol.Inventory). The
// ramdisk has no udev, lshw or dmidecode, so everything is read from files;
// the roots are injectable so tests run against a fake tree.
package inventory

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"castiron/ramdisk/protocol"
)

// Root says where the kernel's pseudo file systems are mounted and carries
// the few facts that do not come from files.
type Root struct {
	Sys  string // "/sys"
	Proc string // "/proc"
	Dev  string // "/dev"

	// BootMAC is the MAC of the NIC the machine booted from (BOOTIF); it
	// becomes boot.pxe_interface.
	BootMAC string
	// IPv4 returns an interface's IPv4 address, "" for none. Nil uses the
	// running system's interfaces.
	IPv4 func(ifname string) string
}

// DefaultRoot is the running system.
func DefaultRoot() Root {
	return Root{Sys: "/sys", Proc: "/proc", Dev: "/dev"}
}

// ErrIncomplete wraps the reasons a part of the inventory could not be read.
// Collect still returns everything else it found.
var ErrIncomplete = errors.New("inventory incomplete")

// Collect reads the inventory. On a partial failure (a file every Linux
// system has is unreadable) it returns the inventory it has and an error
// wrapping ErrIncomplete, which the agent reports to the server as the
// inspection error.
func Collect(ctx context.Context, root Root) (*protocol.Inventory, error) {
	if root.IPv4 == nil {
		root.IPv4 = liveIPv4
	}
	inv := &protocol.Inventory{}
	var errs []error
	sections := []func() error{
		func() (err error) { inv.CPU, err = readCPU(root); return },
		func() (err error) { inv.Memory, err = readMemory(root); return },
		func() (err error) { inv.Disks, err = readDisks(root); return },
		func() (err error) { inv.Interfaces, err = readInterfaces(root); return },
		func() error { inv.SystemVendor = readSystemVendor(root); return nil },
	}
	for _, section := range sections {
		if err := ctx.Err(); err != nil {
			return inv, err
		}
		if err := section(); err != nil {
			errs = append(errs, err)
		}
	}
	inv.Boot = protocol.Boot{CurrentBootMode: bootMode(root), PXEInterface: strings.ToLower(root.BootMAC)}
	inv.Hostname = readLine(filepath.Join(root.Proc, "sys/kernel/hostname"))
	if inv.Hostname == "" {
		inv.Hostname, _ = os.Hostname()
	}
	// The BMC's LAN addresses come from the bmc package (IPMI in-band).
	inv.RedfishHostInterface = readRedfishHostInterface(root)
	if len(errs) > 0 {
		return inv, errors.Join(append([]error{ErrIncomplete}, errs...)...)
	}
	return inv, nil
}

// readLine returns the first line of a file without surrounding blanks, ""
// when it cannot be read (sysfs attributes are often absent or EINVAL).
func readLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// optional turns "" into a JSON null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// machine is uname's machine field (x86_64, aarch64): the architecture the
// kernel runs, which is what Ironic records as cpu_arch.
func machine(root Root) string {
	if arch := readLine(filepath.Join(root.Proc, "sys/kernel/arch")); arch != "" {
		return arch
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Machine[:])
}

func liveIPv4(ifname string) string {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return ""
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}
