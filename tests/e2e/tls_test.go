//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RogueIP is a second address on the lab's bridge where TestTLSRogue runs
// a plain-HTTP server offering the same image: anyone on the provisioning
// L2 can do that.
const RogueIP = "10.205.0.66"

// TestTLSRogue: castiron serves HTTPS with its own CA (--tls-auto); iPXE
// loads the CA as a second initrd, so the agent verifies castiron and uses
// HTTPS only. A deploy whose image points at a rogue plain-HTTP server on
// the same bridge fails without the rogue seeing a single request; the same
// node then deploys castiron's image over HTTPS.
func TestTLSRogue(t *testing.T) {
	im := deployImagesFor(t)
	r := newDeployRigWith(t, "tls-rogue", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1}, CastironOptions{TLS: true}, im.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if !strings.HasPrefix(r.c.URL, "https://") {
		t.Fatalf("castiron URL %s is not HTTPS", r.c.URL)
	}

	// The rogue: python's plain HTTP server on another address of the bridge,
	// serving a copy of the image under the same name.
	rogueDir := filepath.Join(r.l.Dir, "rogue")
	if err := os.MkdirAll(rogueDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFileSparse(im.Raw.Path, filepath.Join(rogueDir, im.Raw.Name)); err != nil {
		t.Fatal(err)
	}
	if err := r.l.NS.IPBatch(ctx, fmt.Sprintf("addr add %s/%d dev %s", RogueIP, labPrefix, Bridge)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.StartDaemon("rogue", "python3", "-u", "-m", "http.server", "--bind", RogueIP, "--directory", rogueDir, "8080"); err != nil {
		t.Fatalf("rogue server: %v", err)
	}
	rogueLog := filepath.Join(r.l.Dir, "rogue.log")
	if _, err := waitFor(ctx, 10*time.Second, func() bool {
		b, _ := os.ReadFile(rogueLog)
		return strings.Contains(string(b), "Serving HTTP")
	}); err != nil {
		t.Fatalf("rogue server up: %v", err)
	}

	r.setImage(ctx, t, im.Raw, "")
	if _, err := r.c.PatchNode(ctx, r.node.UUID, PatchOp{Op: "replace", Path: "/instance_info/image_source",
		Value: fmt.Sprintf("http://%s:8080/%s", RogueIP, im.Raw.Name)}); err != nil {
		t.Fatal(err)
	}
	r.provide(ctx, t, false)
	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "active"); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	n, err := r.c.WaitProvisionState(ctx, r.node.UUID, "deploy failed", deployTimeout)
	if err != nil {
		t.Fatalf("deploy from the rogue: %v", err)
	}
	t.Logf("E2E-TIMING deploy_tls_rogue_refused total=%.2fs", time.Since(start).Seconds())
	if !strings.Contains(n.LastErr(), "refusing plain HTTP") {
		t.Errorf("last_error %q does not say the agent refused plain HTTP", n.LastErr())
	}
	if b, _ := os.ReadFile(rogueLog); strings.Contains(string(b), "GET ") {
		t.Errorf("the agent fetched from the rogue server:\n%s", b)
	}
	if err := waitConsole(ctx, r.l, start, 10*time.Second, "HTTPS only"); err != nil {
		t.Errorf("the agent did not load castiron's CA: %v", err)
	}
	r.waitVMOff(ctx, t, "after the refused deploy", 60*time.Second)

	// The same node, castiron's image: lookup, heartbeats and the download
	// over HTTPS. The node stays locked while castiron powers it off.
	if _, err := waitFor(ctx, 60*time.Second, func() bool {
		_, err := r.c.PatchNode(ctx, r.node.UUID, PatchOp{Op: "replace", Path: "/instance_info/image_source", Value: im.Raw.Name})
		return err == nil
	}); err != nil {
		t.Fatalf("instance_info updated after the failed deploy: %v", err)
	}
	r.deployTimed(ctx, t, "deploy_tls_bios", true)
	if err := DiskStartsWith(r.l.DiskPath(0), im.Raw.Path); err != nil {
		t.Errorf("after the HTTPS deploy: %v", err)
	}
	if b, _ := os.ReadFile(rogueLog); strings.Contains(string(b), "GET ") {
		t.Errorf("the rogue server was asked for something:\n%s", b)
	}
}
