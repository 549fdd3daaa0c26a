package main

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// machine powers this computer off or reboots it. Only as PID 1 (in the
// ramdisk) does it act; run under an OS it just logs, so trying the agent on
// a workstation does not switch the workstation off.
type machine struct {
	pid1 bool
	log  *slog.Logger
}

func (m machine) PowerOff() error { return m.act(unix.LINUX_REBOOT_CMD_POWER_OFF, "power off") }
func (m machine) Reboot() error   { return m.act(unix.LINUX_REBOOT_CMD_RESTART, "reboot") }

// act flushes the disks first: a freshly written image must be on disk
// before the power goes.
func (m machine) act(cmd int, what string) error {
	unix.Sync()
	if !m.pid1 {
		m.log.Warn("not PID 1: not doing it", "action", what)
		return nil
	}
	return unix.Reboot(cmd)
}
