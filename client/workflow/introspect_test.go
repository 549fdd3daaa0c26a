package workflow

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"castiron/client"
)

// TestIntrospectOnlyManageable: asking for an available node is refused with
// the reason and touches nothing (seed 003); manageable and inspect failed
// nodes are introspected, --provide makes them available.
func TestIntrospectOnlyManageable(t *testing.T) {
	s := newServer(t)
	file := writeFile(t, "rack.json", fakeRack("in", 4))
	s.runWant(0, "import", file)
	s.runWant(0, "provide", "in-000")
	// Mixed request: the available node is refused and nothing happens to
	// the manageable one either.
	out, errs := s.runWant(1, "introspect", "in-001", "in-000")
	mustContain(t, "refusal", errs, "refused, no node was touched", "in-000 is available",
		"deployment pool", "castiron manage in-000")
	if s.node("in-000").ProvisionState != "available" {
		t.Error("available node moved")
	}
	if f := fields(t, s.node("in-001")); f["inspection_started_at"] != nil {
		t.Errorf("manageable node was inspected although the command was refused: %v", f)
	}
	// Unknown node: refused with the server's 404 message.
	code, _, errs := s.run("introspect", "no-such-node")
	if code != 1 {
		t.Errorf("unknown node: exit %d", code)
	}
	mustContain(t, "unknown node", errs, "no-such-node", "could not be found", "HTTP 404")

	out, errs = s.runWant(0, "introspect", "in-001", "--provide")
	mustContain(t, "introspect", out, "inspect requested", "in-001: done: available (inspect, provide)")
	if n := s.node("in-001"); n.ProvisionState != "available" {
		t.Errorf("in-001 %s", n.ProvisionState)
	}
	// --all-manageable picks only the two still manageable.
	out, errs = s.runWant(0, "introspect", "--all-manageable", "--concurrency", "1")
	mustContain(t, "all-manageable", out, "2 succeeded, 0 failed", "in-002", "in-003")
	if strings.Contains(out, "in-000") || strings.Contains(out, "in-001") {
		t.Errorf("--all-manageable touched available nodes:\n%s", out)
	}
	for _, name := range []string{"in-002", "in-003"} {
		if n := s.node(name); n.ProvisionState != "manageable" || fields(t, n)["inspection_finished_at"] == nil {
			t.Errorf("%s: %s %s", name, n.ProvisionState, n.Raw)
		}
	}
}

// TestAbortInspectWait: an agent-inspected fake node waits for its ramdisk;
// abort moves it to inspect failed, and a new introspect is accepted there.
func TestAbortAndInspectFailed(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	c := s.client()
	n, err := c.CreateNode(ctx, map[string]any{"name": "agent-0", "driver": "fake-hardware", "inspect_interface": "agent"})
	if err != nil {
		t.Fatal(err)
	}
	s.runWant(0, "manage", "agent-0")
	if err := c.SetProvisionState(ctx, n.UUID, "inspect"); err != nil {
		t.Fatal(err)
	}
	s.runWant(0, "abort", "agent-0")
	if got := s.node("agent-0"); got.ProvisionState != "inspect failed" {
		t.Fatalf("after abort: %s", got.ProvisionState)
	}
	// Aborting again is refused by the server with its reason.
	code, out, _ := s.run("abort", "agent-0")
	if code != 1 || !strings.Contains(out, "HTTP 400") {
		t.Errorf("second abort: exit %d\n%s", code, out)
	}
	// inspect failed is eligible for introspection; switch to fake inspect so
	// it finishes without a ramdisk.
	if _, err := c.PatchNode(ctx, n.UUID, []client.PatchOp{{Op: "replace", Path: "/inspect_interface", Value: "fake"}}); err != nil {
		t.Fatal(err)
	}
	s.runWant(0, "introspect", "agent-0")
	if got := s.node("agent-0"); got.ProvisionState != "manageable" {
		t.Errorf("after introspect: %s", got.ProvisionState)
	}
}

// TestProvideManageConfigure covers the remaining bulk verbs and their
// refusals.
func TestProvideManageConfigure(t *testing.T) {
	s := newServer(t)
	file := writeFile(t, "rack.json", fakeRack("pm", 3))
	s.runWant(0, "import", file)
	code, out, errs := s.run("configure", "--all-manageable", "--boot-mode", "bios",
		"--root-device", `{"serial": "S123"}`, "--deploy-image", "http://img/ipa")
	if code != 0 {
		t.Fatalf("configure: %d\n%s\n%s", code, out, errs)
	}
	for _, name := range []string{"pm-000", "pm-001", "pm-002"} {
		n := s.node(name)
		rd, _ := n.Properties["root_device"].(map[string]any)
		if n.Properties["capabilities"] != "boot_mode:bios" || rd["serial"] != "S123" ||
			n.DriverInfo["deploy_kernel"] != "http://img/ipa.kernel" || n.DriverInfo["deploy_ramdisk"] != "http://img/ipa.initramfs" {
			t.Errorf("%s: %v %v", name, n.Properties, n.DriverInfo)
		}
	}
	for _, bad := range [][]string{
		{"configure", "pm-000", "--boot-mode", "legacy"},
		{"configure", "pm-000", "--root-device", "size=1"},
		{"configure", "pm-000"},
		{"provide"},
		{"introspect", "pm-000", "--all-manageable"},
		{"node", "frob"},
	} {
		code, _, errs := s.run(bad...)
		if code != 2 && !(bad[0] == "introspect" && code == 1) {
			t.Errorf("%v: exit %d (%s)", bad, code, errs)
		}
	}
	s.runWant(0, "provide", "pm-000", "pm-001")
	// provide again: already available is fine, nothing requested.
	code, out, _ = s.run("provide", "pm-000")
	if code != 0 || strings.Contains(out, "provide requested") {
		t.Errorf("provide of an available node: %d\n%s", code, out)
	}
	// configure refuses available nodes.
	code, _, errs = s.run("configure", "pm-000", "--boot-mode", "uefi")
	if code != 1 || !strings.Contains(errs, "pm-000 is available: only manageable nodes are configured") {
		t.Errorf("configure available: %d %s", code, errs)
	}
	// manage brings an available node back when asked explicitly.
	if code, out, errs := s.run("manage", "pm-001"); code != 0 || s.node("pm-001").ProvisionState != "manageable" {
		t.Errorf("manage: %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := s.run("provide", "--all-manageable"); code != 0 || !strings.Contains(out, "2 succeeded") {
		t.Errorf("provide --all-manageable: %d\n%s\n%s", code, out, errs)
	}
}

// fields decodes the node as the server sent it.
func fields(t testing.TB, n *client.Node) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(n.Raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
