package coldplug

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"castiron/ramdisk/kmod"
)

// Loader loads one module, given its path relative to the module dir. Its
// errors are finit_module's: EEXIST (already loaded), ENODEV or ENXIO (no
// such hardware) are expected.
type Loader interface {
	Load(ctx context.Context, relPath string) error
}

// LoaderFunc adapts a function to Loader.
type LoaderFunc func(ctx context.Context, relPath string) error

func (f LoaderFunc) Load(ctx context.Context, relPath string) error { return f(ctx, relPath) }

// Events tells when devices may have appeared (kernel uevents: Uevents).
type Events interface {
	// Drain discards what has arrived: the scan that follows sees it.
	Drain()
	// Wait returns when a device may have appeared, or with ctx's error.
	Wait(ctx context.Context) error
}

// Config says where to look and how to load.
type Config struct {
	Index  *Index
	Loader Loader
	// Sys is the sysfs mount point ("/sys").
	Sys string
	// Events, when set, lets Hotplug load modules for devices that show
	// up after Coldplug. Open it before Coldplug, so no device is missed.
	Events Events
	Log    *slog.Logger
}

// Result says what Coldplug did.
type Result struct {
	Loaded  int // modules that loaded
	Matched int // modules whose aliases matched a device
	Failed  int // modules that failed other than for lack of hardware
	Passes  int // sysfs scans
	// Fallback says why every module was loaded, "" when coldplug sufficed.
	Fallback string
	Took     time.Duration
}

// Reasons for loading every module.
const (
	FallbackNoIndex = "no modules.alias or modules.dep (ramdisk built before coldplug)"
	FallbackNoNIC   = "no network interface after coldplug"
)

// Plugger loads modules for devices: Coldplug once at boot, then Hotplug
// for the devices found later. Not safe for concurrent use: Hotplug runs
// after Coldplug returned.
type Plugger struct {
	cfg         Config
	res         Result
	attempted   map[string]bool // modules tried, whatever the outcome
	seenDevices map[string]bool // sysfs device links already read
	matched     map[string]bool
}

func New(cfg Config) *Plugger {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Plugger{cfg: cfg, attempted: map[string]bool{}, seenDevices: map[string]bool{}, matched: map[string]bool{}}
}

// Coldplug loads the modules the devices in sysfs need, then checks that a
// network interface showed up: if none did (a NIC whose driver has no
// alias, or a driver that failed), it loads every remaining module, as the
// agent did before coldplug, since without a NIC it cannot do anything.
// An incomplete index or an unreadable sysfs loads every module too.
// Coldplug returns an error only when ctx ends.
func (p *Plugger) Coldplug(ctx context.Context) (Result, error) {
	start := time.Now()
	reason := p.coldplugOrReason(ctx)
	if ctx.Err() == nil && reason != "" {
		p.res.Fallback = reason
		p.cfg.Log.Info("loading every module", "reason", reason)
		p.loadAll(ctx)
	}
	p.res.Matched = len(p.matched)
	p.res.Took = time.Since(start)
	return p.res, ctx.Err()
}

// coldplugOrReason coldplugs and returns why every module must be loaded
// after all, "" if they need not.
func (p *Plugger) coldplugOrReason(ctx context.Context) string {
	if !p.cfg.Index.Complete() {
		return FallbackNoIndex
	}
	loaded, err := p.passes(ctx, p.cfg.Index.standalone())
	p.res.Loaded += loaded
	if err != nil {
		return err.Error()
	}
	if !hasNIC(p.cfg.Sys) {
		return FallbackNoNIC
	}
	return ""
}

// Hotplug loads the modules devices that appear later need (a SAS HBA
// reporting disks behind an expander, a deferred probe) until ctx ends,
// as udev does after its coldplug. It needs Config.Events.
func (p *Plugger) Hotplug(ctx context.Context) error {
	if p.cfg.Events == nil || !p.cfg.Index.Complete() || len(p.attempted) == p.cfg.Index.Len() {
		return nil // nothing to watch with, or nothing left to load
	}
	for {
		if err := p.cfg.Events.Wait(ctx); err != nil {
			return err
		}
		before := len(p.attempted)
		loaded, err := p.passes(ctx, nil)
		if err != nil {
			return err
		}
		if len(p.attempted) > before {
			p.cfg.Log.Info("hotplug: kernel modules loaded", "loaded", loaded, "tried", len(p.attempted)-before)
		}
	}
}

// passes scans and loads, starting with want, until a scan finds no module
// to try. It returns how many modules loaded.
func (p *Plugger) passes(ctx context.Context, want []string) (int, error) {
	ix := p.cfg.Index
	loaded := 0
	for {
		if p.cfg.Events != nil {
			p.cfg.Events.Drain() // this scan sees the devices they announced
		}
		p.res.Passes++
		aliases, err := p.newModaliases()
		if err != nil {
			return loaded, err
		}
		for _, a := range aliases {
			for _, m := range ix.Match(a) {
				if !p.matched[m] {
					p.matched[m] = true
					want = append(want, m)
				}
			}
		}
		var todo []string
		for _, m := range ix.loadOrder(want) {
			if !p.attempted[m] {
				todo = append(todo, m)
			}
		}
		if len(todo) == 0 {
			return loaded, nil
		}
		p.cfg.Log.Debug("coldplug pass", "pass", p.res.Passes, "new_devices", len(aliases), "modules", strings.Join(todo, ","))
		loaded += p.load(ctx, todo)
		if err := ctx.Err(); err != nil {
			return loaded, err
		}
		want = want[:0]
	}
}

// newModaliases reads the modalias of the devices not seen in an earlier
// pass. /sys/bus/*/devices/* links every device on a bus; walking
// /sys/devices instead is several times slower under emulation. A device's
// modalias never changes, so each is read once.
func (p *Plugger) newModaliases() ([]string, error) {
	busDir := filepath.Join(p.cfg.Sys, "bus")
	buses, err := os.ReadDir(busDir)
	if err != nil {
		return nil, fmt.Errorf("scan sysfs: %w", err)
	}
	var out []string
	for _, bus := range buses {
		devDir := filepath.Join(busDir, bus.Name(), "devices")
		devices, err := os.ReadDir(devDir)
		if err != nil {
			continue // a bus without devices/ (none in practice)
		}
		for _, dev := range devices {
			path := filepath.Join(devDir, dev.Name())
			if p.seenDevices[path] {
				continue
			}
			p.seenDevices[path] = true
			b, err := os.ReadFile(filepath.Join(path, "modalias"))
			if err != nil {
				continue // most buses' devices have one; the rest need no driver module
			}
			if a := strings.TrimSpace(string(b)); a != "" {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// loadAll loads every module not tried yet, in modules.order order.
func (p *Plugger) loadAll(ctx context.Context) {
	var todo []string
	for _, rel := range p.cfg.Index.order {
		if m := kmod.Name(rel); !p.attempted[m] {
			todo = append(todo, m)
		}
	}
	p.res.Loaded += p.load(ctx, todo)
}

// load tries each module once, until ctx ends, and returns how many
// loaded. A module missing its hardware fails with ENODEV; one already
// loaded (or built in) with EEXIST.
func (p *Plugger) load(ctx context.Context, modules []string) int {
	loaded := 0
	for _, m := range modules {
		if ctx.Err() != nil {
			break
		}
		p.attempted[m] = true
		switch err := p.cfg.Loader.Load(ctx, p.cfg.Index.path(m)); {
		case err == nil:
			loaded++
		case errors.Is(err, unix.EEXIST):
		case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
			p.cfg.Log.Debug("module: no such hardware", "module", m)
		default:
			p.res.Failed++
			p.cfg.Log.Warn("module load failed", "module", m, "err", err)
		}
	}
	return loaded
}

// hasNIC reports whether a network interface other than lo exists.
func hasNIC(sys string) bool {
	entries, _ := os.ReadDir(filepath.Join(sys, "class", "net"))
	for _, e := range entries {
		if e.Name() != "lo" {
			return true
		}
	}
	return false
}
