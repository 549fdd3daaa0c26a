package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"castiron/ramdisk/agent/coldplug"
)

// mount is one file system /init mounts.
type mount struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

// mountEarly mounts what the kernel leaves to init: nothing is mounted in
// an initramfs but the rootfs itself. It runs before the console is known
// to work, so it returns its errors for logging later.
func mountEarly() []error {
	earlyMounts := []mount{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	}
	var errs []error
	for _, m := range earlyMounts {
		if err := mountOne(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// mountEFIVars mounts efivarfs on UEFI machines, for steps that set boot
// entries. It runs after the modules are loaded: Debian builds efivarfs as
// a module, and without it in the ramdisk the mount fails with ENODEV.
func mountEFIVars(log *slog.Logger) {
	const dir = "/sys/firmware/efi/efivars"
	if _, err := os.Stat(dir); err != nil {
		return // BIOS boot
	}
	err := mountOne(mount{"efivarfs", dir, "efivarfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""})
	switch {
	case errors.Is(err, unix.ENODEV):
		log.Info("efivarfs not available (module not in the ramdisk)")
	case err != nil:
		log.Warn("efivarfs", "err", err)
	}
}

func mountOne(m mount) error {
	if err := os.MkdirAll(m.target, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", m.target, err)
	}
	err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data)
	if err != nil && !errors.Is(err, unix.EBUSY) { // EBUSY: already mounted
		return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
	}
	return nil
}

// attachConsole points stdin/stdout/stderr at /dev/console when the kernel
// could not (an initramfs without a /dev/console node starts init with no
// open descriptors).
func attachConsole() {
	if _, err := unix.FcntlInt(uintptr(unix.Stdout), unix.F_GETFD, 0); err == nil {
		return
	}
	fd, err := unix.Open("/dev/console", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return // nowhere to log; carry on blind
	}
	for _, target := range []int{unix.Stdin, unix.Stdout, unix.Stderr} {
		if fd != target {
			unix.Dup3(fd, target, 0)
		}
	}
	if fd > unix.Stderr {
		unix.Close(fd)
	}
}

// loadModules loads the kernel modules this machine's devices need (see
// package coldplug): orderFile lists the ramdisk's modules (paths relative to
// moduleDir, dependencies first, uncompressed) and moduleDir holds the
// builder's modules.alias, modules.dep and modules.softdep. It returns a
// function that loads modules for devices found later until its context
// ends (nil without hotplug), for the caller to run in a goroutine.
func loadModules(ctx context.Context, log *slog.Logger, sys, orderFile, moduleDir string) (hotplug func(context.Context)) {
	ix, err := coldplug.ReadIndex(orderFile, moduleDir)
	if err != nil {
		log.Warn("no module list", "err", err)
		return nil
	}
	if ix.Len() == 0 {
		// A kernel with its drivers built in (make ramdisk RAMDISK_KERNEL=vm):
		// nothing to match devices against, so no sysfs scan (~70 ms under
		// emulation) and no hotplug listener.
		log.Info("kernel modules loaded", "loaded", 0, "of", 0)
		return nil
	}
	cfg := coldplug.Config{Index: ix, Loader: coldplug.FinitLoader{Dir: moduleDir}, Sys: sys, Log: log}
	// Subscribed before the first sysfs scan, so no device is missed.
	events, err := coldplug.OpenUevents()
	if err != nil {
		log.Warn("no hotplug", "err", err)
	} else {
		cfg.Events = events
	}
	p := coldplug.New(cfg)
	res, err := p.Coldplug(ctx)
	if err != nil {
		log.Warn("module loading stopped", "err", err)
	}
	attrs := []any{"loaded", res.Loaded, "matched", res.Matched, "failed", res.Failed,
		"of", ix.Len(), "passes", res.Passes, "took", res.Took.Round(time.Millisecond)}
	if res.Fallback != "" {
		attrs = append(attrs, "fallback", res.Fallback)
	}
	log.Info("kernel modules loaded", attrs...)
	if events == nil {
		return nil
	}
	return func(ctx context.Context) {
		defer events.Close()
		if err := p.Hotplug(ctx); err != nil && ctx.Err() == nil {
			log.Warn("hotplug stopped", "err", err)
		}
	}
}
