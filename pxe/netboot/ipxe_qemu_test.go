package netboot

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/pxe/boot"
)

// The stock Debian kernel: its first lines on the serial port include the
// command line iPXE built, which is all this test needs from it.
const debianKernel = "/boot/vmlinuz-6.1.0-56-amd64"

// TestIPXEInQEMU runs the script in the real iPXE ROM that Debian ships for
// qemu (ipxe-qemu, the same 2019 build as the lab): SeaBIOS → iPXE →
// DHCP from qemu's built-in user-mode network → our script over HTTP.
// qemu's user-mode stack lives inside the qemu process; the guest's only
// way out is the connection qemu makes to this test's loopback server
// (10.0.2.2 in the guest is the host's 127.0.0.1). No device, no namespace.
func TestIPXEInQEMU(t *testing.T) {
	qemu := requireTool(t, "qemu-system-x86_64")
	requireFile(t, "/usr/lib/ipxe/qemu/pxe-virtio.rom") // ipxe-qemu
	requireFile(t, debianKernel)                        // linux-image-amd64

	tests := []struct {
		name     string
		initrd   bool   // serve an initramfs?
		wantLine string // serial line that ends the test
		want     []string
	}{
		{
			name:     "kernel gets the command line",
			initrd:   true,
			wantLine: "Command line:",
			want: []string{
				"initrd=initramfs", "console=tty0 console=ttyS0,115200",
				"BOOTIF=01-52-54-00-20-20-01", // ${netX/mac:hexhyp} expanded by iPXE
				"ipa-node-uuid=" + uuidA,
				"ipa-inspection-callback-url=",
			},
		},
		{
			name:     "retries then gives up",
			initrd:   false, // 503: ramdisk not built
			wantLine: "castiron: giving up after 2 tries",
			want:     []string{"castiron: loading kernel/initramfs failed (try .)", "castiron: loading kernel/initramfs failed (try ..)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &events{}
			initrdPath := t.TempDir() + "/initramfs"
			if tc.initrd {
				// Not a valid archive: the kernel complains later, which is
				// after the line this test waits for.
				os.WriteFile(initrdPath, []byte("castiron test initramfs\n"), 0o644)
			}
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			h := New(Config{
				PublicURL:     "http://10.0.2.2:" + strconv.Itoa(port),
				KernelPath:    debianKernel,
				InitramfsPath: initrdPath,
				Gate:          testGate,
				Recorder:      rec,
				Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
				// The ramdisk's arguments say quiet: an extra argument comes
				// after them and wins, so the kernel prints the command line
				// this test reads.
				ExtraKernelArgs: []string{"loglevel=7"},
			})
			h.attempts, h.retrySecs = 2, 1
			srv := &http.Server{Handler: h}
			go srv.Serve(ln)
			defer srv.Close()

			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, qemu,
				"-accel", "tcg", "-m", "256", "-nographic", "-monitor", "none", "-no-reboot",
				"-boot", "strict=on",
				"-netdev", "user,id=n0,bootfile=http://10.0.2.2:"+strconv.Itoa(port)+"/boot/ipxe?mac=${net0/mac}",
				"-device", "virtio-net-pci,netdev=n0,mac="+macInspect+",bootindex=1",
			)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdin = nil
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer func() { cmd.Process.Kill() }() // our own qemu, by PID

			lines := make(chan string, 256)
			wg.Go(func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				sc.Buffer(make([]byte, 64*1024), 1024*1024)
				for sc.Scan() {
					lines <- strings.TrimRight(sc.Text(), "\r")
				}
				cmd.Wait()
			})

			var console []string
			found := ""
		read:
			for {
				select {
				case line, ok := <-lines:
					if !ok {
						break read
					}
					console = append(console, line)
					if strings.Contains(line, tc.wantLine) {
						found = line
						break read
					}
					if strings.Contains(line, "No bootable device") {
						break read // iPXE never ran or exited early
					}
				case <-ctx.Done():
					break read
				}
			}
			cmd.Process.Kill()
			for range lines { // drain so the reader ends
			}
			all := strings.Join(console, "\n")
			if found == "" {
				t.Fatalf("no %q on the console within %s:\n%s", tc.wantLine, time.Since(start).Round(time.Second), tail(all, 60))
			}
			t.Logf("%q after %s", found, time.Since(start).Round(100*time.Millisecond))
			for _, s := range tc.want {
				if !strings.Contains(all, s) {
					t.Errorf("console lacks %q:\n%s", s, tail(all, 40))
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			kinds := map[string]int{}
			for _, ev := range rec.evs {
				if ev.MAC == macInspect {
					kinds[ev.Kind]++
				}
			}
			if kinds[boot.HTTPScript] != 1 || kinds[boot.HTTPKernel] < 1 {
				t.Errorf("events by kind for %s: %v, want one script and kernel downloads", macInspect, kinds)
			}
			if tc.initrd && kinds[boot.HTTPInitramfs] != 1 {
				t.Errorf("initramfs events %d, want 1", kinds[boot.HTTPInitramfs])
			}
		})
	}
}

func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		skipOrFail(t, name+" not installed")
	}
	return path
}

func requireFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, err.Error())
	}
}

// skipOrFail skips, except in CI, where a missing tool is a failure.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (required in CI)")
	}
	t.Skip(why)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestIPXEInstanceInQEMU: a node deployed with the ramdisk deploy
// interface gets its instance from the script in the real iPXE ROM: the
// user's kernel and ramdisk from their own URLs (here this test's server,
// outside /boot/) with ramdisk_kernel_arguments, not castiron's agent.
func TestIPXEInstanceInQEMU(t *testing.T) {
	qemu := requireTool(t, "qemu-system-x86_64")
	requireFile(t, "/usr/lib/ipxe/qemu/pxe-virtio.rom")
	requireFile(t, debianKernel)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://10.0.2.2:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	var mu sync.Mutex
	fetched := map[string]int{}
	gate := mapGate{macInspect: {NodeUUID: uuidA, Purpose: "instance", Instance: &boot.Instance{
		Kernel: base + "/live/vmlinuz", Ramdisk: base + "/live/initrd.img",
		Args: []string{"root=/dev/ram0", "text", "console=ttyS0", "loglevel=7", "live.marker=castiron-live-1"}}}}
	mux := http.NewServeMux()
	mux.Handle("/boot/", New(Config{PublicURL: base, KernelPath: "/nonexistent", InitramfsPath: "/nonexistent", Gate: gate,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	mux.HandleFunc("/live/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/live/vmlinuz":
			http.ServeFile(w, r, debianKernel)
		case "/live/initrd.img":
			_, _ = w.Write([]byte("not an archive: the kernel complains after the line this test reads\n"))
		default:
			http.NotFound(w, r)
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu,
		"-accel", "tcg", "-m", "256", "-nographic", "-monitor", "none", "-no-reboot", "-boot", "strict=on",
		"-netdev", "user,id=n0,bootfile="+base+"/boot/ipxe?mac=${net0/mac}",
		"-device", "virtio-net-pci,netdev=n0,mac="+macInspect+",bootindex=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }() // our own qemu, by PID
	sc := bufio.NewScanner(out)
	var console []string
	line := ""
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		console = append(console, l)
		if strings.Contains(l, "Command line:") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatalf("no kernel command line on the console:\n%s", tail(strings.Join(console, "\n"), 40))
	}
	for _, want := range []string{"live.marker=castiron-live-1", "root=/dev/ram0", "initrd=initramfs"} {
		if !strings.Contains(line, want) {
			t.Errorf("command line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "ipa-api-url") {
		t.Errorf("the instance got the agent's arguments: %q", line)
	}
	mu.Lock()
	defer mu.Unlock()
	if fetched["/live/vmlinuz"] != 1 || fetched["/live/initrd.img"] != 1 {
		t.Errorf("instance files fetched %v, want the kernel and ramdisk once each", fetched)
	}
}
