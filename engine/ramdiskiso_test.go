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
