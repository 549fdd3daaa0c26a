package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"castiron/ramdisk/iso"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/trust"
)

// TestISOSpecTrust: with TLS (a CA bundle) the ISO's overlay carries the CA
// where the agent looks for it, beside the https API URL; without TLS there
// is no CA file; a rotated CA changes the ISO's cache key (a new ISO).
func TestISOSpecTrust(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{iso.ISOLinuxName, iso.LDLinuxName, iso.GRUBEFIName, "vmlinuz", "initramfs"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t)
	n := h.nodeIn(t, Inspecting, nil)
	ca := []byte("-----BEGIN CERTIFICATE-----\nfirst\n-----END CERTIFICATE-----\n")
	vc := &VMediaConfig{RamdiskDir: dir, APIURL: "https://192.0.2.1:6385"}
	caFile := strings.TrimPrefix(trust.AgentCAPath, "/")

	plain, err := h.c.isoSpec(context.Background(), n, vc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Overlay[caFile]; ok {
		t.Fatal("CA in the ISO without TLS")
	}
	vc.CABundle = func() ([]byte, error) { return ca, nil }
	spec, err := h.c.isoSpec(context.Background(), n, vc)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(spec.Overlay[caFile]); got != string(ca) {
		t.Fatalf("ISO overlay %s = %q, want the CA bundle", caFile, got)
	}
	if !slices.Contains(spec.Args, protocol.ParamAPIURL+"=https://192.0.2.1:6385") {
		t.Fatalf("args %q lack the https API URL", spec.Args)
	}
	key1, err := spec.Key()
	if err != nil {
		t.Fatal(err)
	}
	ca = []byte("-----BEGIN CERTIFICATE-----\nrotated\n-----END CERTIFICATE-----\n")
	spec2, err := h.c.isoSpec(context.Background(), n, vc)
	if err != nil {
		t.Fatal(err)
	}
	if key2, _ := spec2.Key(); key2 == key1 {
		t.Fatal("a rotated CA keeps the same ISO")
	}
}

// TestRamdiskISOURL: the URL a BMC gets for the node's ISO is --public-url's
// /boot/vmedia/<node>-<digest>.iso, or under the node's
// driver_info.external_http_url (Ironic's per-node setting) while the agent
// still calls the API at --public-url; without --public-url a virtual media
// boot is refused with a message naming it.
func TestRamdiskISOURL(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{iso.ISOLinuxName, iso.LDLinuxName, iso.GRUBEFIName, "vmlinuz", "initramfs"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Repeat(name, 512)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	h := newHarness(t)
	n := h.nodeIn(t, Inspecting, nil)
	if _, err := h.c.ramdiskISO(ctx, n); err == nil || !strings.Contains(err.Error(), "--public-url") {
		t.Fatalf("no --public-url: %v", err)
	}
	vc := &VMediaConfig{ISOs: iso.NewCache(filepath.Join(t.TempDir(), "vmedia")), RamdiskDir: dir, APIURL: "http://192.0.2.1:6385/"}
	h.c.cfg.VMedia = vc
	url, err := h.c.ramdiskISO(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "http://192.0.2.1:6385/boot/vmedia/" + n.UUID + "-"
	if !strings.HasPrefix(url, prefix) || !strings.HasSuffix(url, ".iso") {
		t.Fatalf("URL %q, want %s<digest>.iso", url, prefix)
	}
	if _, err := os.Stat(filepath.Join(vc.ISOs.Dir(), strings.TrimPrefix(url, "http://192.0.2.1:6385/boot/vmedia/"))); err != nil {
		t.Fatalf("the URL names no ISO in the cache: %v", err)
	}

	n.DriverInfo = map[string]any{"external_http_url": "http://198.51.100.7:8080/"}
	ext, err := h.c.ramdiskISO(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://198.51.100.7:8080/boot/vmedia/" + strings.TrimPrefix(url, "http://192.0.2.1:6385/boot/vmedia/"); ext != want {
		t.Fatalf("with external_http_url: %q, want %q (same ISO, the node's base URL)", ext, want)
	}
	spec, err := h.c.isoSpec(ctx, n, vc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(spec.Args, protocol.ParamAPIURL+"=http://192.0.2.1:6385") {
		t.Fatalf("args %q: the agent must still call --public-url", spec.Args)
	}
}
