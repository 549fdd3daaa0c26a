package initramfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Build writes OutDir/initramfs and a copy of the kernel as OutDir/vmlinuz,
// each atomically (temporary file, then rename).
//
// Archive layout: /init (the agent, 0755); /etc/modules.order (module paths
// relative to /lib/modules/, dependencies first); /lib/modules/<those paths>
// (plain .ko: .xz/.zst/.gz are decompressed); /lib/modules/modules.alias,
// modules.dep and modules.softdep (the kernel's, cut down to the archive's
// modules, paths as in modules.order: the agent loads only the modules
// whose aliases match the machine's devices); /etc/castiron-ramdisk (build
// info, os-release syntax); the directories /proc /sys /dev /run /tmp /etc
// /mnt; /dev/console (c 5 1) and /dev/null (c 1 3), so the kernel can open
// init's console before anything mounts devtmpfs.
func Build(ctx context.Context, opts Options) (Result, error) {
	o := opts.withDefaults()
	if o.AgentPath == "" {
		return Result{}, fmt.Errorf("%w: no agent path given", ErrBadAgent)
	}
	if o.OutDir == "" {
		return Result{}, errors.New("initramfs: no output directory given")
	}
	if _, err := ParseCompression(string(o.Compression)); err != nil {
		return Result{}, err
	}
	start := time.Now()

	k, err := findKernel(ctx, o.ModulesRoot, o.BootDir, o.KernelVersion)
	if err != nil {
		return Result{}, err
	}
	if o.Compression == "" {
		o.Compression = Gzip
		if k.checkCompression(DefaultCompression) == nil {
			o.Compression = DefaultCompression
		}
	}
	if err := k.checkCompression(o.Compression); err != nil {
		return Result{}, err
	}
	if err := checkAgent(o.AgentPath); err != nil {
		return Result{}, err
	}
	agentInfo, err := os.Stat(o.AgentPath)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrBadAgent, err)
	}
	version := o.AgentVersion
	if version == "" {
		version = agentVersion(o.AgentPath)
	}
	agentSum, err := fileSHA256(ctx, o.AgentPath)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrBadAgent, err)
	}

	db, err := LoadModuleDB(ctx, k.modulesDir)
	if err != nil {
		return Result{}, err
	}
	resolved := db.Resolve(o.Modules)
	for _, m := range resolved.Missing {
		o.Log.Warn("module not in this kernel, skipped", "module", m, "kernel", k.version)
	}

	l := newLayout()
	for _, d := range []string{"/proc", "/sys", "/dev", "/run", "/etc", "/mnt", "/lib/modules"} {
		l.dir(d, 0o755)
	}
	l.dir("/tmp", 0o1777)
	l.charDev("/dev/console", 0o600, 5, 1)
	l.charDev("/dev/null", 0o666, 1, 3)
	l.hostFile("/init", 0o755, o.AgentPath, agentInfo.Size())

	order, err := addModules(ctx, l, k.modulesDir, resolved.Modules)
	if err != nil {
		return Result{}, err
	}
	l.file(ModulesOrderPath, 0o644, []byte(joinLines(order)))
	index := db.archiveIndex(resolved.Modules)
	l.file(ModulesAliasPath, 0o644, []byte(index.alias))
	l.file(ModulesDepPath, 0o644, []byte(index.dep))
	l.file(ModulesSoftdepPath, 0o644, []byte(index.softdep))
	l.file(InfoPath, 0o644, []byte(infoFile(buildInfo{
		kernelVersion: k.version,
		agentVersion:  version,
		agentSHA256:   agentSum,
		compression:   o.Compression,
		built:         o.BuildTime,
		modules:       len(order),
	})))
	if err := addExtras(l, o.Extra); err != nil {
		return Result{}, err
	}

	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return Result{}, err
	}
	res := Result{
		KernelVersion: k.version,
		KernelPath:    filepath.Join(o.OutDir, KernelFileName),
		InitramfsPath: filepath.Join(o.OutDir, InitramfsFileName),
		Compression:   o.Compression,
		Modules:       order,
		Builtin:       resolved.Builtin,
		Missing:       resolved.Missing,
		AgentVersion:  version,
		AgentSHA256:   agentSum,
	}
	res.Size, err = writeAtomic(ctx, res.InitramfsPath, 0o644, func(w io.Writer) error {
		return l.writeCPIO(ctx, w, o.Compression)
	})
	if err != nil {
		return Result{}, fmt.Errorf("write %s: %w", res.InitramfsPath, err)
	}
	res.KernelSize, err = copyFileAtomic(ctx, k.imagePath, res.KernelPath, 0o644)
	if err != nil {
		return Result{}, fmt.Errorf("copy kernel: %w", err)
	}
	o.Log.Info("initramfs built", "kernel", k.version, "initramfs", res.InitramfsPath, "bytes", res.Size,
		"compression", o.Compression, "modules", len(order), "agent_version", version, "took", time.Since(start))
	return res, nil
}

// addModules puts the modules into the layout under /lib/modules, plain,
// and returns their archive paths relative to /lib/modules in load order.
func addModules(ctx context.Context, l *layout, modulesDir string, modules []string) ([]string, error) {
	order := make([]string, 0, len(modules))
	for _, rel := range modules {
		plain := uncompressedModulePath(rel)
		src := filepath.Join(modulesDir, filepath.FromSlash(rel))
		dst := path.Join(ModulesDir, plain)
		if plain == rel {
			fi, err := os.Stat(src)
			if err != nil {
				return nil, fmt.Errorf("module: %w", err)
			}
			l.hostFile(dst, 0o644, src, fi.Size())
		} else {
			data, err := readModule(ctx, src)
			if err != nil {
				return nil, fmt.Errorf("module: %w", err)
			}
			l.file(dst, 0o644, data)
		}
		order = append(order, plain)
	}
	return order, nil
}

// addExtras copies the caller's extra files in, refusing to replace
// anything the builder wrote (/init, /etc/modules.order, ...).
func addExtras(l *layout, extra map[string]string) error {
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names) // parents are created in a stable order
	for _, name := range names {
		host := extra[name]
		if archiveName(name) == "" {
			return fmt.Errorf("%w: archive path %q", ErrBadExtra, name)
		}
		if l.has(name) {
			return fmt.Errorf("%w: %s is already in the archive", ErrBadExtra, name)
		}
		if p, ok := l.nonDirParent(name); ok {
			return fmt.Errorf("%w: %s: %s is not a directory", ErrBadExtra, name, p)
		}
		fi, err := os.Stat(host)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadExtra, name, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s: %s is not a regular file", ErrBadExtra, name, host)
		}
		l.hostFile(name, uint64(fi.Mode().Perm()), host, fi.Size())
	}
	return nil
}

// buildInfo is what /etc/castiron-ramdisk records.
type buildInfo struct {
	kernelVersion, agentVersion, agentSHA256 string
	compression                              Compression
	built                                    time.Time
	modules                                  int
}

// infoFile is /etc/castiron-ramdisk, in os-release syntax.
func infoFile(bi buildInfo) string {
	kv := [][2]string{
		{"NAME", "castiron ramdisk"},
		{"KERNEL_VERSION", bi.kernelVersion},
		{"AGENT_VERSION", bi.agentVersion},
		{"AGENT_SHA256", bi.agentSHA256},
		{"BUILD_TIME", bi.built.UTC().Format(time.RFC3339)},
		{"COMPRESSION", string(bi.compression)},
		{"MODULES", strconv.Itoa(bi.modules)},
	}
	var b strings.Builder
	for _, p := range kv {
		fmt.Fprintf(&b, "%s=%s\n", p[0], shellQuote(p[1]))
	}
	return b.String()
}

// shellQuote double-quotes s the way os-release(5) wants.
func shellQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return `"` + r.Replace(s) + `"`
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
