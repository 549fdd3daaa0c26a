package pxeboot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"castiron/tests/castironserve"
)

// TestBootAgainstCastiron boots three machines (BIOS and UEFI) with the
// bench's client against a real castiron whose --pxe-interface is one end
// of a veth pair in a namespace of the test's, the client at the other end
// in a second namespace: DORA, TFTP, DORA as iPXE, then the script, kernel
// and initramfs over HTTP, compared with the files castiron serves.
// Castiron runs with --pxe-discovery, so unknown MACs are booted.
func TestBootAgainstCastiron(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	dir := t.TempDir()
	bin := castironserve.Build(t, dir)

	b := make([]byte, 3)
	rand.Read(b)
	sfx := hex.EncodeToString(b)
	srvNS, cliNS, srvIf, cliIf := "cipxb-s-"+sfx, "cipxb-c-"+sfx, "cpbs"+sfx, "cpbc"+sfx
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	for _, ns := range []string{srvNS, cliNS} {
		sh("ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	sh("ip", "link", "add", srvIf, "netns", srvNS, "type", "veth", "peer", "name", cliIf, "netns", cliNS)
	sh("ip", "-n", srvNS, "addr", "add", "10.254.77.1/24", "dev", srvIf)
	sh("ip", "-n", cliNS, "addr", "add", "10.254.77.2/24", "dev", cliIf)
	for _, c := range [][2]string{{srvNS, srvIf}, {srvNS, "lo"}, {cliNS, cliIf}, {cliNS, "lo"}} {
		sh("ip", "-n", c[0], "link", "set", c[1], "up")
	}

	rd := filepath.Join(dir, "ramdisk")
	os.MkdirAll(rd, 0o755)
	files := map[string][]byte{"vmlinuz": make([]byte, 1<<20), "initramfs": make([]byte, 3<<20)}
	for name, data := range files {
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(rd, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	url := "http://10.254.77.1:6385"
	logPath := filepath.Join(dir, "castiron.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", srvNS, bin, "serve", "--listen", "10.254.77.1:6385",
		"--data-dir", filepath.Join(dir, "data"), "--pxe-interface", srvIf, "--pxe-discovery",
		"--dhcp-range", "10.254.77.100,10.254.77.200", "--public-url", url, "--ramdisk-dir", rd,
		"--insecure-noauth") // a namespace of the test's, nobody else on it
	cmd.Env = castironserve.Env()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { // ip netns exec execs castiron: this PID is castiron's
		cmd.Process.Signal(syscall.SIGTERM)
		done := exited
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("castiron log:\n%s", out)
		}
	})

	c, err := New(Config{Netns: cliNS, Interface: cliIf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for { // castiron up: its API answers from the client namespace
		resp, err := c.HTTP.Get(url + "/v1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("castiron exited: %v", cmd.ProcessState)
		case <-ctx.Done():
			t.Fatalf("castiron did not answer GET /v1: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	time.Sleep(time.Second) // DHCP and TFTP listen after the API (readiness is not this test's subject)
	c.Stats.Reset()

	get := func(u string) []byte {
		t.Helper()
		resp, err := c.HTTP.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v: %.200s", u, resp.StatusCode, err, body)
		}
		return body
	}
	var want int64
	for i, uefi := range []bool{false, true, false} {
		mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xbb, 0x00, byte(i + 1)}
		script, err := c.Boot(ctx, Machine{MAC: mac, UEFI: uefi})
		if err != nil {
			t.Fatalf("boot %s (UEFI %v): %v", mac, uefi, err)
		}
		if !strings.HasPrefix(script, url+"/boot/") {
			t.Fatalf("boot %s: script URL %q, want one under %s/boot/", mac, script, url)
		}
		body := string(get(script))
		hexhyp := strings.ReplaceAll(mac.String(), ":", "-")
		got := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			f := strings.Fields(strings.ReplaceAll(line, "${netX/mac:hexhyp}", hexhyp))
			if len(f) == 0 || (f[0] != "kernel" && f[0] != "initrd") {
				continue
			}
			for _, w := range f[1:] {
				if !strings.HasPrefix(w, "http") {
					continue
				}
				name := "initramfs"
				if f[0] == "kernel" {
					name = "vmlinuz"
				}
				if data := get(w); !bytes.Equal(data, files[name]) {
					t.Fatalf("boot %s: %s from %s: %d bytes, not castiron's %s", mac, f[0], w, len(data), name)
				}
				got[name] = true
				want += int64(len(files[name]))
				break
			}
		}
		if !got["vmlinuz"] || !got["initramfs"] {
			t.Fatalf("boot %s: script without kernel or initrd URL:\n%s", mac, body)
		}
	}
	s := c.Stats.Summary()
	if s.DORAs != 6 || s.DORAErrors != 0 {
		t.Errorf("DORAs %d, errors %d; want 6 (two per boot), 0", s.DORAs, s.DORAErrors)
	}
	if s.TFTPs != 3 || s.TFTPErrors != 0 || s.TFTPMB <= 0 {
		t.Errorf("TFTP transfers %d (%.3f MB), errors %d; want 3, 0", s.TFTPs, s.TFTPMB, s.TFTPErrors)
	}
	if s.HTTPErrors != 0 || s.HTTPMB < float64(want)/1e6 {
		t.Errorf("HTTP %.3f MB, errors %d; want >= %.3f MB (kernels and initramfs), 0", s.HTTPMB, s.HTTPErrors, float64(want)/1e6)
	}
	t.Log(fmt.Sprintf("%+v", s))
}
