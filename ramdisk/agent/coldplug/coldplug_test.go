package coldplug

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"castiron/ramdisk/kmod"
)

// testOrder is a ramdisk's modules.order: a cut-down copy of the real one.
const testOrder = `kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio.ko
kernel/drivers/virtio/virtio_pci.ko
kernel/net/core/failover.ko
kernel/drivers/net/virtio_net.ko
kernel/drivers/block/virtio_blk.ko
kernel/drivers/scsi/scsi_mod.ko
kernel/drivers/scsi/virtio_scsi.ko
kernel/drivers/net/ethernet/intel/e1000/e1000.ko
kernel/drivers/net/phy/realtek.ko
kernel/drivers/net/ethernet/realtek/r8169.ko
kernel/crypto/crct10dif_common.ko
kernel/crypto/crct10dif_generic.ko
kernel/lib/crc-t10dif.ko
kernel/drivers/scsi/sd_mod.ko
kernel/fs/efivarfs/efivarfs.ko
kernel/drivers/block/loop.ko
`

const testAlias = `alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci
alias virtio:d00000001v* virtio_net
alias virtio:d00000002v* virtio_blk
alias virtio:d00000008v* virtio_scsi
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
alias mdio:000000000001110011001001000????? realtek
alias pci:v000010ECd00008168sv*sd*bc*sc*i* r8169
alias crct10dif crct10dif_generic
alias crypto-crct10dif crct10dif_generic
alias scsi:t-0x00* sd_mod
alias block-major-8-* sd_mod
alias fs-efivarfs efivarfs
alias devname:loop-control loop
alias block-major-7-* loop
alias pci:v00008086d000010D3sv*sd*bc*sc*i* e1000e
`

const testDep = `kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/net/core/failover.ko:
kernel/drivers/net/virtio_net.ko: kernel/net/core/failover.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/scsi/scsi_mod.ko:
kernel/drivers/scsi/virtio_scsi.ko: kernel/drivers/scsi/scsi_mod.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/net/ethernet/intel/e1000/e1000.ko:
kernel/drivers/net/phy/realtek.ko:
kernel/drivers/net/ethernet/realtek/r8169.ko:
kernel/crypto/crct10dif_common.ko:
kernel/crypto/crct10dif_generic.ko: kernel/crypto/crct10dif_common.ko
kernel/lib/crc-t10dif.ko: kernel/crypto/crct10dif_common.ko
kernel/drivers/scsi/sd_mod.ko: kernel/drivers/scsi/scsi_mod.ko kernel/lib/crc-t10dif.ko kernel/crypto/crct10dif_common.ko
kernel/fs/efivarfs/efivarfs.ko:
kernel/drivers/block/loop.ko:
`

const testSoftdep = `softdep crc_t10dif pre: crct10dif
softdep r8169 pre: realtek
`

// writeIndex writes the test ramdisk's index files into a new directory
// and returns the modules.order path and the module dir.
func writeIndex(t *testing.T, files map[string]string) (order, dir string) {
	t.Helper()
	dir = t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "modules.order"), dir
}

func testIndex(t *testing.T) *Index {
	t.Helper()
	order, dir := writeIndex(t, map[string]string{
		"modules.order": testOrder, AliasFile: testAlias, DepFile: testDep, SoftdepFile: testSoftdep,
	})
	ix, err := ReadIndex(order, dir)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestIndex(t *testing.T) {
	ix := testIndex(t)
	if !ix.Complete() || ix.Len() != 17 {
		t.Fatalf("Complete %v Len %d", ix.Complete(), ix.Len())
	}
	t.Run("match", func(t *testing.T) {
		for modalias, want := range map[string][]string{
			"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00": {"virtio_pci"},
			"virtio:d00000001v00001AF4":                             {"virtio_net"},
			"scsi:t-0x00":                                           {"sd_mod"},
			"scsi:t-0x05":                                           nil,
			// e1000e's alias is dropped: the module is not in the ramdisk.
			"pci:v00008086d000010D3sv00001AF4sd00001100bc02sc00i00": nil,
			"mdio:00000000000111001100100100010001":                 {"realtek"},
		} {
			if got := ix.Match(modalias); !reflect.DeepEqual(got, want) {
				t.Errorf("Match(%q) = %q, want %q", modalias, got, want)
			}
		}
	})
	t.Run("load order", func(t *testing.T) {
		tests := []struct {
			names, want []string
		}{
			{[]string{"virtio_net"}, []string{"virtio_ring", "virtio", "failover", "virtio_net"}},
			// softdep pre: through an alias (crct10dif -> crct10dif_generic).
			{[]string{"sd_mod"}, []string{"scsi_mod", "crct10dif_common", "crct10dif_generic", "crc_t10dif", "sd_mod"}},
			// softdep pre: by module name; r8169 fails to probe without it.
			{[]string{"r8169"}, []string{"realtek", "r8169"}},
			{[]string{"sd_mod", "virtio_scsi", "virtio_scsi"}, []string{"virtio_ring", "virtio", "scsi_mod", "virtio_scsi",
				"crct10dif_common", "crct10dif_generic", "crc_t10dif", "sd_mod"}},
			{[]string{"not_in_ramdisk"}, []string{}},
		}
		for _, tt := range tests {
			if got := ix.loadOrder(tt.names); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("loadOrder(%q)\n got  %q\n want %q", tt.names, got, tt.want)
			}
		}
	})
	t.Run("standalone", func(t *testing.T) {
		if got, want := ix.standalone(), []string{"efivarfs", "loop"}; !reflect.DeepEqual(got, want) {
			t.Errorf("standalone() = %q, want %q", got, want)
		}
	})
}

func TestReadIndexIncomplete(t *testing.T) {
	for _, missing := range []string{AliasFile, DepFile} {
		files := map[string]string{"modules.order": testOrder, AliasFile: testAlias, DepFile: testDep}
		delete(files, missing)
		ix, err := ReadIndex(writeIndex(t, files))
		if err != nil {
			t.Fatal(err)
		}
		if ix.Complete() {
			t.Errorf("without %s: index complete", missing)
		}
	}
	if _, err := ReadIndex(filepath.Join(t.TempDir(), "modules.order"), t.TempDir()); err == nil {
		t.Error("no error without modules.order")
	}
}

// fakeSys is a sysfs tree: devices under devices/, linked from
// bus/<bus>/devices/ as the kernel does.
type fakeSys struct {
	t    *testing.T
	root string
}

func newFakeSys(t *testing.T) *fakeSys {
	s := &fakeSys{t: t, root: t.TempDir()}
	for _, d := range []string{"bus/pci/devices", "bus/virtio/devices", "bus/scsi/devices", "bus/cpu/devices", "class/net/lo"} {
		s.mkdir(d)
	}
	return s
}

func (s *fakeSys) mkdir(rel string) {
	if err := os.MkdirAll(filepath.Join(s.root, rel), 0o755); err != nil {
		s.t.Fatal(err)
	}
}

// device adds a device; modalias "" gives it none.
func (s *fakeSys) device(bus, name, modalias string) {
	dev := filepath.Join("devices", bus, name)
	s.mkdir(dev)
	if modalias != "" {
		if err := os.WriteFile(filepath.Join(s.root, dev, "modalias"), []byte(modalias+"\n"), 0o444); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join("../../..", dev), filepath.Join(s.root, "bus", bus, "devices", name)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *fakeSys) netdev(name string) { s.mkdir(filepath.Join("class/net", name)) }

// fakeLoader records loads and plays the kernel: a module's probe adds the
// devices it brings (onLoad), and results are canned by module.
type fakeLoader struct {
	loaded  []string
	results map[string]error
	onLoad  map[string]func()
}

func (l *fakeLoader) Load(_ context.Context, rel string) error {
	name := kmod.Name(rel)
	if slices.Contains(l.loaded, name) {
		return unix.EEXIST // a real kernel says so; Run must not ask twice
	}
	if err := l.results[name]; err != nil {
		return err
	}
	l.loaded = append(l.loaded, name)
	if f := l.onLoad[name]; f != nil {
		f()
	}
	return nil
}

// A virtio VM: virtio_pci brings the virtio devices, virtio_scsi its disk,
// which wants sd_mod; the NIC needs virtio_net. Nothing for e1000 or r8169.
func TestRunVirtioMachine(t *testing.T) {
	sys := newFakeSys(t)
	sys.device("pci", "0000:00:00.0", "pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00") // host bridge: no driver
	sys.device("pci", "0000:00:03.0", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00")
	sys.device("pci", "0000:00:04.0", "pci:v00001AF4d00001004sv00001AF4sd00000008bc01sc00i00")
	sys.device("cpu", "cpu0", "cpu:type:x86,ven0000fam0006mod003F:feature:,0000,0001")
	sys.device("cpu", "cpu1", "") // no modalias: skipped
	loader := &fakeLoader{onLoad: map[string]func(){
		"virtio_pci": func() {
			sys.device("virtio", "virtio0", "virtio:d00000001v00001AF4")
			sys.device("virtio", "virtio1", "virtio:d00000008v00001AF4")
		},
		"virtio_net":  func() { sys.netdev("eth0") },
		"virtio_scsi": func() { sys.device("scsi", "0:0:0:0", "scsi:t-0x00") },
	}}
	res, err := New(Config{Index: testIndex(t), Loader: loader, Sys: sys.root}).Coldplug(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"virtio_ring", "virtio", "virtio_pci", "efivarfs", "loop", // pass 1: PCI and standalone, modules.order order
		"failover", "virtio_net", "scsi_mod", "virtio_scsi", // pass 2: virtio devices
		"crct10dif_common", "crct10dif_generic", "crc_t10dif", "sd_mod", // pass 3: the SCSI disk
	}
	if !reflect.DeepEqual(loader.loaded, want) {
		t.Errorf("loaded\n got  %q\n want %q", loader.loaded, want)
	}
	wantRes := Result{Loaded: len(want), Matched: 4, Passes: 4}
	res.Took = 0
	if res != wantRes {
		t.Errorf("Result %+v, want %+v", res, wantRes)
	}
}

func TestRunFailures(t *testing.T) {
	sys := newFakeSys(t)
	sys.device("pci", "0000:00:03.0", "pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00")
	sys.device("pci", "0000:00:04.0", "pci:v000010ECd00008168sv00001AF4sd00001100bc02sc00i00")
	sys.netdev("eth0")
	loader := &fakeLoader{results: map[string]error{
		"e1000":    unix.ENODEV, // no such hardware after all: not a failure
		"realtek":  errors.New("bad module"),
		"efivarfs": unix.EEXIST, // built in
	}}
	res, err := New(Config{Index: testIndex(t), Loader: loader, Sys: sys.root}).Coldplug(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// r8169 is still tried after its softdep failed, as modprobe does.
	if want := []string{"r8169", "loop"}; !reflect.DeepEqual(loader.loaded, want) {
		t.Errorf("loaded %q, want %q", loader.loaded, want)
	}
	res.Took = 0
	if want := (Result{Loaded: 2, Matched: 2, Failed: 1, Passes: 2}); res != want {
		t.Errorf("Result %+v, want %+v", res, want)
	}
}

// fakeEvents is a uevent source the test feeds.
type fakeEvents struct {
	ch      chan struct{}
	drained int
}

func (e *fakeEvents) Drain() { e.drained++ }

func (e *fakeEvents) Wait(ctx context.Context) error {
	select {
	case <-e.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A disk behind a SAS HBA shows up after coldplug: Hotplug loads sd_mod.
func TestHotplug(t *testing.T) {
	sys := newFakeSys(t)
	sys.device("pci", "0000:00:03.0", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00")
	loader := &fakeLoader{onLoad: map[string]func(){
		"virtio_pci": func() { sys.device("virtio", "virtio0", "virtio:d00000001v00001AF4") },
		"virtio_net": func() { sys.netdev("eth0") },
	}}
	events := &fakeEvents{ch: make(chan struct{})}
	var logBuf syncBuffer
	p := New(Config{Index: testIndex(t), Loader: loader, Sys: sys.root, Events: events, Log: slog.New(slog.NewTextHandler(&logBuf, nil))})
	res, err := p.Coldplug(context.Background())
	if err != nil || res.Fallback != "" || res.Passes != 3 {
		t.Fatalf("Coldplug: %+v, %v", res, err)
	}
	if events.drained != res.Passes {
		t.Errorf("drained %d times in %d passes: each scan must follow a drain", events.drained, res.Passes)
	}
	coldplugged := len(loader.loaded)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Hotplug(ctx) }()
	sys.device("scsi", "0:0:0:0", "scsi:t-0x00")
	events.ch <- struct{}{}
	events.ch <- struct{}{} // the first round is over once Wait takes this one
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Hotplug returned %v", err)
	}
	want := []string{"scsi_mod", "crct10dif_common", "crct10dif_generic", "crc_t10dif", "sd_mod"}
	if got := loader.loaded[coldplugged:]; !reflect.DeepEqual(got, want) {
		t.Errorf("hotplug loaded %q, want %q", got, want)
	}
	if !strings.Contains(logBuf.String(), `hotplug: kernel modules loaded" loaded=5`) {
		t.Errorf("log:\n%s", logBuf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// No NIC after coldplug (its driver has no alias): every other module is
// loaded, in order.
func TestRunFallbackNoNIC(t *testing.T) {
	sys := newFakeSys(t)
	sys.device("pci", "0000:00:03.0", "pci:v00008086d0000FFFFsv00001AF4sd00001100bc02sc00i00")
	loader := &fakeLoader{onLoad: map[string]func(){"e1000": func() { sys.netdev("eth0") }}}
	res, err := New(Config{Index: testIndex(t), Loader: loader, Sys: sys.root}).Coldplug(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != FallbackNoNIC || res.Loaded != 17 || res.Matched != 0 {
		t.Errorf("Result %+v", res)
	}
	if want := []string{"efivarfs", "loop", "virtio_ring"}; !reflect.DeepEqual(loader.loaded[:3], want) {
		t.Errorf("loaded %q, want standalone first, then modules.order", loader.loaded)
	}
}

// A ramdisk built before coldplug has only modules.order: load it all.
func TestRunFallbackNoIndex(t *testing.T) {
	order, dir := writeIndex(t, map[string]string{"modules.order": "# old ramdisk\nkernel/a/b-c.ko\n\nkernel/d/e.ko\n"})
	ix, err := ReadIndex(order, dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	loader := LoaderFunc(func(_ context.Context, rel string) error { paths = append(paths, rel); return nil })
	res, err := New(Config{Index: ix, Loader: loader, Sys: t.TempDir()}).Coldplug(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kernel/a/b-c.ko", "kernel/d/e.ko"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("loaded %q, want %q", paths, want)
	}
	if res.Fallback != FallbackNoIndex || res.Loaded != 2 || res.Passes != 0 {
		t.Errorf("Result %+v", res)
	}
}

func TestRunCanceled(t *testing.T) {
	sys := newFakeSys(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	loader := &fakeLoader{}
	_, err := New(Config{Index: testIndex(t), Loader: loader, Sys: sys.root}).Coldplug(ctx)
	if !errors.Is(err, context.Canceled) || len(loader.loaded) != 0 {
		t.Errorf("err %v, loaded %q", err, loader.loaded)
	}
}

// Without a readable sysfs there is nothing to match: load everything.
func TestRunNoSysfs(t *testing.T) {
	loader := &fakeLoader{}
	res, err := New(Config{Index: testIndex(t), Loader: loader, Sys: filepath.Join(t.TempDir(), "nosys")}).Coldplug(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Fallback, "scan sysfs") || res.Loaded != 17 {
		t.Errorf("Result %+v", res)
	}
}
