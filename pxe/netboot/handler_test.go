package netboot

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/pxe/boot"
)

const (
	macInspect = "52:54:00:20:20:01"
	macDeploy  = "52:54:00:20:20:02"
	macUnknown = "52:54:00:20:20:03" // allowed without a node (discovery)
	macRefused = "52:54:00:20:20:99"
	uuidA      = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	uuidB      = "2be26c0b-03f2-4d2e-ae87-c02d7f33c456"
)

// mapGate allows the MACs it knows.
type mapGate map[string]boot.Decision

func (g mapGate) Allow(_ context.Context, mac net.HardwareAddr) (boot.Decision, bool) {
	d, ok := g[mac.String()]
	return d, ok
}

var testGate = mapGate{
	macInspect: {NodeUUID: uuidA, Purpose: "inspect"},
	macDeploy:  {NodeUUID: uuidB, Purpose: "deploy"},
	macUnknown: {Purpose: "inspect"},
}

type events struct {
	mu  sync.Mutex
	evs []boot.Event
}

func (e *events) Record(_ context.Context, ev boot.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.evs)
}

// after waits for the event recorded after the first n: file events are
// recorded when the handler returns, which can be after the client has
// read the last byte.
func (e *events) after(t *testing.T, n int) boot.Event {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		e.mu.Lock()
		if len(e.evs) > n {
			ev := e.evs[n]
			e.mu.Unlock()
			return ev
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no event recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fixture struct {
	srv             *httptest.Server
	rec             *events
	meter           *boot.Tally
	kernel, initrd  []byte
	loader          []byte
	kPath, initPath string
}

func newFixture(t testing.TB, kernelSize, initrdSize int) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		rec:      &events{},
		meter:    &boot.Tally{},
		kernel:   randomBytes(t, kernelSize),
		initrd:   randomBytes(t, initrdSize),
		kPath:    filepath.Join(dir, "vmlinuz"),
		initPath: filepath.Join(dir, "initramfs.cpio.zst"),
	}
	os.WriteFile(f.kPath, f.kernel, 0o644)
	os.WriteFile(f.initPath, f.initrd, 0o644)
	f.loader = randomBytes(t, 3000)
	os.WriteFile(filepath.Join(dir, "snponly.efi"), f.loader, 0o644)
	h := New(Config{
		PublicURL:       "http://10.202.0.1:6385/",
		Loaders:         map[string]string{"snponly.efi": filepath.Join(dir, "snponly.efi")},
		KernelPath:      f.kPath,
		InitramfsPath:   f.initPath,
		ExtraKernelArgs: []string{"ipa-debug=1"},
		Gate:            testGate,
		Recorder:        f.rec,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Meter:           f.meter,
	})
	mux := http.NewServeMux()
	mux.Handle("/boot/", h) // as the API server mounts it
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) do(t *testing.T, method, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestScript(t *testing.T) {
	f := newFixture(t, 1000, 1000)
	const api = "http://10.202.0.1:6385"
	common := []string{
		"#!ipxe",
		"kernel --name vmlinuz " + api + "/boot/vmlinuz?mac=",
		"initrd --name initramfs " + api + "/boot/initramfs?mac=",
		" initrd=initramfs ",
		" console=tty0 console=ttyS0,115200 ",
		" ipa-api-url=" + api + " ",
		" BOOTIF=01-${netX/mac:hexhyp} ",
		" ipa-debug=1 ",
		":retry", "|| goto failed", "sleep 5", "goto retry", ":giveup", "poweroff || exit 1",
	}
	inspectURL := "ipa-inspection-callback-url=" + api + "/v1/continue_inspection"
	tests := []struct {
		name      string
		path      string
		status    int
		want      []string
		wantNot   []string
		eventMAC  string
		eventNode string
	}{
		{"inspect", "/boot/ipxe?mac=" + macInspect, 200,
			append([]string{inspectURL, "ipa-node-uuid=" + uuidA, "vmlinuz?mac=" + macInspect}, common...), nil, macInspect, uuidA},
		{"deploy has no inspection URL", "/boot/ipxe?mac=" + macDeploy, 200,
			append([]string{"ipa-node-uuid=" + uuidB}, common...), []string{"ipa-inspection-callback-url"}, macDeploy, uuidB},
		{"allowed without node", "/boot/ipxe?mac=" + macUnknown, 200,
			append([]string{inspectURL}, common...), []string{"ipa-node-uuid"}, macUnknown, ""},
		{"path form, upper case", "/boot/ipxe/" + strings.ToUpper(macInspect), 200, []string{"ipa-node-uuid=" + uuidA}, nil, macInspect, uuidA},
		{"hexhyp form", "/boot/ipxe?mac=52-54-00-20-20-02", 200, []string{"ipa-node-uuid=" + uuidB}, nil, macDeploy, uuidB},
		{"BOOTIF form", "/boot/ipxe?mac=01-52-54-00-20-20-02", 200, []string{"ipa-node-uuid=" + uuidB}, nil, macDeploy, uuidB},
		{"hexraw form", "/boot/ipxe?mac=525400202002", 200, []string{"ipa-node-uuid=" + uuidB}, nil, macDeploy, uuidB},
		{"refused", "/boot/ipxe?mac=" + macRefused, 404, []string{"castiron: no network boot for " + macRefused}, []string{"#!ipxe"}, macRefused, ""},
		{"no mac", "/boot/ipxe", 400, []string{"needs ?mac="}, nil, "", ""},
		{"unexpanded iPXE variable", "/boot/ipxe?mac=${net0/mac}", 400, []string{`got "${net0/mac}"`}, nil, "", ""},
		{"eui64 is not a NIC MAC", "/boot/ipxe?mac=00:00:5e:00:53:01:02:03", 400, nil, nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.rec.count()
			resp, body := f.do(t, "GET", strings.ReplaceAll(tc.path, "$", "%24"), nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tc.status, body)
			}
			for _, s := range tc.want {
				if !bytes.Contains(body, []byte(s)) {
					t.Errorf("body lacks %q:\n%s", s, body)
				}
			}
			for _, s := range tc.wantNot {
				if bytes.Contains(body, []byte(s)) {
					t.Errorf("body has %q:\n%s", s, body)
				}
			}
			if tc.status == 200 {
				checkLabels(t, string(body))
				if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
					t.Errorf("Cache-Control %q", cc)
				}
			}
			if tc.eventMAC == "" {
				time.Sleep(20 * time.Millisecond)
				if n := f.rec.count(); n != before {
					t.Errorf("event recorded for a bad request: %+v", f.rec.after(t, before))
				}
				return
			}
			ev := f.rec.after(t, before)
			if ev.Kind != boot.HTTPScript || ev.MAC != tc.eventMAC || ev.NodeUUID != tc.eventNode {
				t.Errorf("event %+v, want %s for %s node %q", ev, boot.HTTPScript, tc.eventMAC, tc.eventNode)
			}
			if served := tc.status == http.StatusOK; served != (ev.Took > 0) {
				t.Errorf("event %+v: took %s, want it measured for a served script only", ev, ev.Took)
			}
		})
	}
}

// TestTrustOverlay: with TLS, the script loads castiron's CA overlay as a
// second initrd (and names it to the EFI stub); the overlay is served at
// /boot/ca.cpio. Without TLS there is neither.
func TestTrustOverlay(t *testing.T) {
	overlay := []byte("070701 cpio bytes")
	h := New(Config{Gate: testGate, Logger: slog.New(slog.DiscardHandler), URLs: func(netip.Addr) URLs {
		return URLs{Boot: "http://10.0.0.1:8080", API: "https://10.0.0.1:6385"}
	}, TrustArchive: func(context.Context) ([]byte, error) { return overlay, nil }})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, []byte) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, script := get("/boot/ipxe?mac=" + macInspect)
	for _, want := range []string{"initrd --name ca http://10.0.0.1:8080/boot/ca.cpio || goto failed", " initrd=initramfs initrd=ca ",
		" ipa-api-url=https://10.0.0.1:6385 ", "ipa-inspection-callback-url=https://10.0.0.1:6385/v1/continue_inspection"} {
		if code != 200 || !bytes.Contains(script, []byte(want)) {
			t.Errorf("script (HTTP %d) lacks %q:\n%s", code, want, script)
		}
	}
	if code, b := get("/boot/ca.cpio"); code != 200 || !bytes.Equal(b, overlay) {
		t.Errorf("ca.cpio: %d %q", code, b)
	}
	off := httptest.NewServer(New(Config{Gate: testGate, Logger: slog.New(slog.DiscardHandler)}))
	defer off.Close()
	resp, err := http.Get(off.URL + "/boot/ca.cpio")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("ca.cpio without TLS: %d", resp.StatusCode)
	}
}

// checkLabels: every goto has its label (iPXE fails at run time otherwise).
func checkLabels(t *testing.T, script string) {
	t.Helper()
	labels := map[string]bool{}
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, ":") {
			labels[strings.TrimPrefix(line, ":")] = true
		}
	}
	for _, m := range regexp.MustCompile(`goto (\S+)`).FindAllStringSubmatch(script, -1) {
		if !labels[m[1]] {
			t.Errorf("goto %s has no label", m[1])
		}
	}
}

func TestPublicURLFromRequest(t *testing.T) {
	h := New(Config{Gate: testGate, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/boot/ipxe?mac=" + macInspect)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("ipa-api-url="+srv.URL+" ")) {
		t.Fatalf("script does not use the request's host %s:\n%s", srv.URL, body)
	}
}

// TestURLsByFamily: a node that fetched its script over IPv6 is told the
// IPv6 URLs (boot and API may differ: the API may speak TLS).
func TestURLsByFamily(t *testing.T) {
	h := New(Config{Gate: testGate, Logger: slog.New(slog.DiscardHandler), URLs: func(local netip.Addr) URLs {
		if local.Is6() {
			return URLs{Boot: "http://[fd51::1]:8080", API: "https://[fd51::1]:6385/"}
		}
		return URLs{Boot: "http://10.0.0.1:8080", API: "https://10.0.0.1:6385"}
	}})
	for _, tc := range []struct{ listen, boot, api string }{
		{"127.0.0.1:0", "http://10.0.0.1:8080/boot/vmlinuz", "ipa-api-url=https://10.0.0.1:6385 "},
		{"[::1]:0", "http://[fd51::1]:8080/boot/vmlinuz", "ipa-api-url=https://[fd51::1]:6385 "},
	} {
		ln, err := net.Listen("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener = ln
		srv.Start()
		resp, err := http.Get(srv.URL + "/boot/ipxe?mac=" + macInspect)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if !bytes.Contains(body, []byte(tc.boot)) || !bytes.Contains(body, []byte(tc.api)) {
			t.Errorf("over %s the script lacks %s or %s:\n%s", tc.listen, tc.boot, tc.api, body)
		}
	}
}

func TestNilGateRefuses(t *testing.T) {
	srv := httptest.NewServer(New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/boot/ipxe?mac=" + macInspect)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
}

func TestFiles(t *testing.T) {
	f := newFixture(t, 256*1024+3, 100*1024)
	tests := []struct {
		name     string
		method   string
		path     string
		hdr      map[string]string
		status   int
		want     []byte
		kind     string
		eventMAC string
	}{
		{"kernel", "GET", "/boot/vmlinuz?mac=" + macInspect, nil, 200, f.kernel, boot.HTTPKernel, macInspect},
		{"initramfs", "GET", "/boot/initramfs?mac=" + strings.ToUpper(macDeploy), nil, 200, f.initrd, boot.HTTPInitramfs, macDeploy},
		{"no mac", "GET", "/boot/initramfs", nil, 200, f.initrd, boot.HTTPInitramfs, ""},
		{"range", "GET", "/boot/vmlinuz?mac=" + macInspect, map[string]string{"Range": "bytes=1000-1999"}, 206, f.kernel[1000:2000], boot.HTTPKernel, macInspect},
		{"open range", "GET", "/boot/initramfs", map[string]string{"Range": "bytes=102000-"}, 206, f.initrd[102000:], boot.HTTPInitramfs, ""},
		{"head", "HEAD", "/boot/vmlinuz", nil, 200, nil, "", ""},
		{"unknown file", "GET", "/boot/pxelinux.0", nil, 404, nil, "", ""},
		{"boot loader", "GET", "/boot/snponly.efi", nil, 200, f.loader, boot.HTTPLoader, ""},
		{"post", "POST", "/boot/vmlinuz", nil, 405, nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.rec.count()
			resp, body := f.do(t, tc.method, tc.path, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.want != nil && !bytes.Equal(body, tc.want) {
				t.Fatalf("body %d bytes, want %d identical", len(body), len(tc.want))
			}
			if tc.method == "HEAD" {
				if resp.ContentLength != int64(len(f.kernel)) || len(body) != 0 || resp.Header.Get("Accept-Ranges") != "bytes" {
					t.Fatalf("HEAD: length %d body %d accept-ranges %q", resp.ContentLength, len(body), resp.Header.Get("Accept-Ranges"))
				}
			}
			if tc.kind == "" {
				time.Sleep(20 * time.Millisecond)
				if n := f.rec.count(); n != before {
					t.Fatalf("unexpected event %+v", f.rec.after(t, before))
				}
				return
			}
			ev := f.rec.after(t, before)
			wantDetail := "bytes=" + strconv.Itoa(len(tc.want)) + " "
			if ev.Kind != tc.kind || ev.MAC != tc.eventMAC || !strings.Contains(ev.Detail, wantDetail) || strings.Contains(ev.Detail, "incomplete") {
				t.Fatalf("event %+v, want %s MAC %q detail with %q", ev, tc.kind, tc.eventMAC, wantDetail)
			}
			// castiron's own time ends at the first byte, so it is no
			// longer than the whole transfer.
			if whole, err := time.ParseDuration(strings.Fields(ev.Detail[strings.Index(ev.Detail, "duration="):])[0][len("duration="):]); ev.Took <= 0 || err != nil || ev.Took > whole+time.Millisecond {
				t.Fatalf("event %+v: took %s, want > 0 and <= duration (%v)", ev, ev.Took, err)
			}
		})
	}

	t.Run("rebuilt ramdisk is served at once", func(t *testing.T) {
		fresh := []byte("new initramfs")
		if err := os.WriteFile(f.initPath+".tmp", fresh, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Rename(f.initPath+".tmp", f.initPath)
		_, body := f.do(t, "GET", "/boot/initramfs", nil)
		if !bytes.Equal(body, fresh) {
			t.Fatalf("got %d bytes, want the rebuilt file", len(body))
		}
	})

	t.Run("missing files", func(t *testing.T) {
		os.Remove(f.kPath)
		os.Remove(f.initPath)
		for _, p := range []string{"/boot/vmlinuz", "/boot/initramfs"} {
			resp, body := f.do(t, "GET", p, nil)
			if resp.StatusCode != 503 || !bytes.Contains(body, []byte("ramdisk not built: run make ramdisk")) {
				t.Fatalf("%s: %d %q", p, resp.StatusCode, body)
			}
		}
	})
}

func TestFilesNotConfigured(t *testing.T) {
	srv := httptest.NewServer(New(Config{Gate: testGate, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/boot/vmlinuz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "kernel path not configured") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"52:54:00:fa:00:01", "52:54:00:fa:00:01"},
		{"52:54:00:FA:00:01", "52:54:00:fa:00:01"},
		{"52-54-00-fa-00-01", "52:54:00:fa:00:01"},
		{"01-52-54-00-fa-00-01", "52:54:00:fa:00:01"},
		{"525400fa0001", "52:54:00:fa:00:01"},
		{" 52:54:00:fa:00:01 ", "52:54:00:fa:00:01"},
		{"", ""},
		{"52:54:00:fa:00", ""},
		{"zz:54:00:fa:00:01", ""},
		{"${net0/mac}", ""},
		{"02-52-54-00-fa-00-01", ""},
		{"00:00:5e:00:53:01:02:03", ""},
	}
	for _, tc := range tests {
		mac, ok := parseMAC(tc.in)
		got := ""
		if ok {
			got = mac.String()
		}
		if got != tc.want {
			t.Errorf("parseMAC(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMeter: scripts and files count by result, with the bytes sent.
func TestMeter(t *testing.T) {
	f := newFixture(t, 3000, 5000)
	f.do(t, "GET", "/boot/ipxe?mac="+macInspect, nil)
	f.do(t, "GET", "/boot/ipxe?mac=52:54:00:ff:ff:ff", nil)
	f.do(t, "GET", "/boot/vmlinuz", nil)
	f.do(t, "GET", "/boot/initramfs", map[string]string{"Range": "bytes=0-99"})
	f.do(t, "GET", "/boot/initramfs", map[string]string{"Range": "bytes=9000-"})
	m := f.meter
	for key, want := range map[string]int{
		"http ipxe-script ok": 1, "http ipxe-script refused": 1,
		"http kernel ok": 1, "http initramfs ok": 1, "http initramfs refused": 1,
	} {
		if got := m.Count(key); got != want {
			t.Errorf("%s: %d, want %d", key, got, want)
		}
	}
	if b := m.Bytes("http kernel ok"); b != 3000 {
		t.Errorf("kernel bytes %d, want 3000", b)
	}
	if b := m.Bytes("http initramfs ok"); b != 100 {
		t.Errorf("initramfs range bytes %d, want 100", b)
	}
	if m.Bytes("http ipxe-script ok") == 0 {
		t.Error("script bytes not counted")
	}
}

// TestGRUBConfig: arm64's grub.cfg boots the arm64 ramdisk with the iPXE
// script's command line, over TFTP from the address the node reached; a
// machine the gate refuses gets none.
func TestGRUBConfig(t *testing.T) {
	h := New(Config{Gate: testGate, Logger: slog.New(slog.DiscardHandler),
		Ramdisks: map[string]Ramdisk{"aarch64": {KernelPath: "/k", InitramfsPath: "/i"}},
		URLs:     func(netip.Addr) URLs { return URLs{Boot: "http://10.0.0.1:6385", API: "http://10.0.0.1:6385"} }})
	cfg, ok := h.GRUBConfig(context.Background(), mustMAC(t, macInspect), netip.MustParseAddr("10.0.0.1"), "aarch64")
	if !ok {
		t.Fatal("refused")
	}
	for _, want := range []string{"linux '(tftp,10.0.0.1)/" + GRUBKernel + "' ",
		"'console=ttyAMA0,115200'", "'ipa-inspection-callback-url=http://10.0.0.1:6385/v1/continue_inspection'",
		"initrd '(tftp,10.0.0.1)/" + GRUBInitramfs + "'\nboot\n"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("grub.cfg lacks %q:\n%s", want, cfg)
		}
	}
	if _, ok := h.GRUBConfig(context.Background(), mustMAC(t, macRefused), netip.MustParseAddr("10.0.0.1"), "aarch64"); ok {
		t.Error("a refused machine got a grub.cfg")
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestInstanceScript: a ramdisk instance's script loads the user's kernel
// and ramdisk (or sanboots its ISO), never castiron's agent.
func TestInstanceScript(t *testing.T) {
	mac, _ := net.ParseMAC(macDeploy)
	p := scriptParams{MAC: mac, Attempts: 3, RetrySecs: 5, BootURL: "http://10.0.0.1:6385", APIURL: "http://10.0.0.1:6385",
		Decision: boot.Decision{NodeUUID: uuidB, Purpose: "instance", Instance: &boot.Instance{
			Kernel: "http://192.0.2.9/k", Ramdisk: "http://192.0.2.9/r", Args: []string{"root=/dev/ram0", "text", "live=1"}}}}
	s := renderInstanceScript(p)
	for _, want := range []string{"#!ipxe\n", "kernel --name vmlinuz http://192.0.2.9/k initrd=initramfs root=/dev/ram0 text live=1 || goto failed\n",
		"initrd --name initramfs http://192.0.2.9/r || goto failed\n", "boot || goto failed\n", "goto retry\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "ipa-") || strings.Contains(s, "/boot/vmlinuz") {
		t.Errorf("instance script mentions the agent:\n%s", s)
	}
	p.Decision.Instance = &boot.Instance{ISO: "http://192.0.2.9/live.iso"}
	if s := renderInstanceScript(p); !strings.Contains(s, "sanboot --no-describe http://192.0.2.9/live.iso || goto failed\n") || strings.Contains(s, "kernel ") {
		t.Errorf("ISO instance script:\n%s", s)
	}
}
