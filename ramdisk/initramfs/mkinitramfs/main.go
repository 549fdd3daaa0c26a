// Command mkinitramfs builds castiron's ramdisk: OUT/vmlinuz (a copy of the
// host kernel) and OUT/initramfs (the agent as /init plus NIC and disk
// modules). See package castiron/ramdisk/initramfs.
//
//	mkinitramfs -agent build/castiron-agent -out castiron-data/ramdisk
//
// SOURCE_DATE_EPOCH, when set, is the build time recorded in the archive,
// which makes the output reproducible byte for byte.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"castiron/ramdisk/initramfs"
	"castiron/ramdisk/iso"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkinitramfs:", err)
		if errors.Is(err, initramfs.ErrNoKernel) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mkinitramfs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts     initramfs.Options
		modules  string
		compress string
		verbose  bool
		loaders  bool
		extra    = extraFlag{}
	)
	fs.StringVar(&opts.AgentPath, "agent", "build/castiron-agent", "static agent binary, becomes /init")
	fs.StringVar(&opts.AgentVersion, "agent-version", "", "version recorded in /etc/castiron-ramdisk (default: the agent's -X main.version)")
	fs.StringVar(&opts.KernelVersion, "kver", "", "kernel version (default: newest with /boot/vmlinuz-<ver> and /lib/modules/<ver>)")
	fs.StringVar(&opts.ModulesRoot, "modules-root", "/lib/modules", "directory holding <kver>/modules.dep")
	fs.StringVar(&opts.BootDir, "boot-dir", "/boot", "directory holding vmlinuz-<kver> and config-<kver>")
	fs.StringVar(&modules, "modules", "", "comma-separated modules or sets (default: "+strings.Join(initramfs.DefaultModules(), ",")+
		"; full: those and the NICs and disk controllers of physical servers, "+strings.Join(initramfs.FullModules()[len(initramfs.DefaultModules()):], ",")+
		"); a leading + adds to the defaults")
	fs.StringVar(&compress, "compress", "", "gzip, zstd, lz4 or none (default: "+string(initramfs.DefaultCompression)+" when the kernel has it, else gzip)")
	fs.StringVar(&opts.OutDir, "out", "castiron-data/ramdisk", "output directory (vmlinuz, initramfs)")
	fs.Var(extra, "extra", "extra file `/archive/path=hostfile` (repeatable)")
	fs.BoolVar(&loaders, "iso-loaders", true, "copy the host's isolinux and CD GRUB next to the ramdisk (castiron builds virtual media ISOs with them)")
	fs.BoolVar(&verbose, "v", false, "log progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	var err error
	if opts.Compression, err = initramfs.ParseCompression(compress); err != nil {
		return err
	}
	opts.Modules = parseModules(modules)
	opts.Extra = extra
	if opts.BuildTime, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return err
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	opts.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	start := time.Now()
	res, err := initramfs.Build(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kernel     %s  %s (%s)\n", res.KernelPath, humanSize(res.KernelSize), res.KernelVersion)
	fmt.Fprintf(stdout, "initramfs  %s  %s (%s, %d modules, agent %s, %.1fs)\n",
		res.InitramfsPath, humanSize(res.Size), res.Compression, len(res.Modules), res.AgentVersion, time.Since(start).Seconds())
	if len(res.Missing) > 0 {
		fmt.Fprintf(stdout, "not in kernel %s: %s\n", res.KernelVersion, strings.Join(res.Missing, " "))
	}
	if loaders {
		copied, missing, err := iso.CopyLoaders(ctx, opts.OutDir)
		if err != nil {
			return err
		}
		if len(copied) > 0 {
			fmt.Fprintf(stdout, "iso loaders %s (virtual media ISOs)\n", strings.Join(copied, " "))
		}
		if len(missing) > 0 {
			fmt.Fprintf(stdout, "iso loaders missing on this host: %s (for virtual media: apt-get install isolinux syslinux-common grub-efi-amd64-signed)\n", strings.Join(missing, " "))
		}
	}
	return nil
}

// parseModules: "" -> defaults (nil), "a,b" -> those, "+a,b" -> defaults
// and those; a set's name ("default", "full") stands for its modules.
func parseModules(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var list []string
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		list, s = initramfs.DefaultModules(), rest
	}
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		if set, ok := initramfs.ModuleSet(m); ok {
			list = append(list, set...)
		} else if m != "" {
			list = append(list, m)
		}
	}
	return list
}

// sourceDateEpoch reads the reproducible-builds timestamp; unset means now.
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
	}
	return time.Unix(n, 0), nil
}

func humanSize(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// extraFlag collects -extra /archive/path=hostfile.
type extraFlag map[string]string

func (e extraFlag) String() string { return "" }

func (e extraFlag) Set(v string) error {
	dst, src, ok := strings.Cut(v, "=")
	if !ok || dst == "" || src == "" {
		return fmt.Errorf("want /archive/path=hostfile, got %q", v)
	}
	e[dst] = src
	return nil
}
