//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"castiron/storage/pgtest"
)

// Two conductors over one PostgreSQL database on one provisioning segment
// (issue 14): c1 in the lab's namespace on the bridge, c2 in a namespace of
// its own whose veth is a port of the same bridge. Both hear the VM's DHCP;
// only the node's owner (c2, by the hash ring) answers it, serves the boot
// and runs the inspection, while the API is driven through c1.

// side2IP is the second conductor's address on the lab's segment.
const side2IP = "10.205.0.2"

// sideNamespace attaches a new namespace to the lab's bridge through a veth
// pair and gives its end ip; the namespace is deleted (with whatever still
// runs inside) when the test ends, before the lab's own teardown.
func sideNamespace(t *testing.T, l *Lab, ip string) (ns *netns, link string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := newNetns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ns.Delete(ctx); err != nil {
			t.Errorf("delete netns %s: %v", ns.Name, err)
		}
	})
	link = "side0"
	// Both ends are created in the lab's namespace (names are per namespace,
	// so they cannot collide with another test's), then one end moves.
	if err := l.NS.IPBatch(ctx,
		"link add "+link+" type veth peer name sideport",
		"link set "+link+" netns "+ns.Name,
		"link set sideport master "+Bridge,
		"link set sideport up",
	); err != nil {
		t.Fatal(err)
	}
	if err := ns.IPBatch(ctx,
		"link set lo up",
		fmt.Sprintf("addr add %s/%d dev %s", ip, labPrefix, link),
		"link set "+link+" up",
	); err != nil {
		t.Fatal(err)
	}
	return ns, link
}

func TestInspectTwoConductorsPostgres(t *testing.T) {
	ramdisk := ramdiskDir(t)
	db := pgtest.New(t).Database(t)
	opts := LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1, BMCOnBridge: true,
		Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}}
	l := NewLab(t, opts)
	shared := []string{"--database", db, "--log-level", "debug"}
	c1 := StartCastiron(t, l, CastironOptions{ExtraArgs: append(slices.Clone(shared),
		"--conductor-name", "c1", "--conductor-url", fmt.Sprintf("http://%s:%d", ServerIP, CastironPort))})

	side, link := sideNamespace(t, l, side2IP)
	dir2 := filepath.Join(l.Dir, "castiron-data-c2")
	if err := os.MkdirAll(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	url2 := fmt.Sprintf("http://%s:%d", side2IP, CastironPort)
	args := castironArgs(l, dir2, ramdisk, CastironOptions{CallbackTimeout: 120 * time.Second, DHCPMode: "full",
		ExtraArgs: append(slices.Clone(shared), "--conductor-name", "c2", "--conductor-url", url2)})
	for i, a := range args { // c2 serves PXE on its veth, under its own address
		switch {
		case a == Bridge && i > 0 && args[i-1] == "--pxe-interface":
			args[i] = link
		case strings.HasPrefix(a, "http://"+ServerIP+":") && i > 0 && args[i-1] == "--public-url":
			args[i] = url2
		}
	}
	d2, err := l.StartDaemonIn(side, "castiron-c2", append([]string{castironBinary(t)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	c2 := &Client{Base: url2, HTTP: l.HTTPClient(30 * time.Second)}
	log1, log2 := c1.LogPath, filepath.Join(l.Dir, "castiron-c2.log")

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Both conductors on both rings (each re-reads the conductors table
	// every second).
	for _, c := range []*Client{c1.Client, c2} {
		for {
			var drv struct {
				Hosts []string `json:"hosts"`
			}
			err := c.Do(ctx, "GET", "/v1/drivers/ipmi", nil, &drv)
			if err == nil && slices.Equal(drv.Hosts, []string{"c1", "c2"}) {
				break
			}
			if !d2.running() {
				t.Fatalf("castiron c2 exited: %v\n%s", d2.err, tailFile(log2, 30))
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: ipmi hosts %v (err %v), want [c1 c2]", c.Base, drv.Hosts, err)
			case <-time.After(250 * time.Millisecond):
			}
		}
	}

	// A node owned by c2, enrolled and driven through c1.
	var node *Node
	for i := 0; i < 50 && node == nil; i++ {
		n, err := c1.CreateNode(ctx, map[string]any{"name": fmt.Sprintf("two-conductors-%d", i), "driver": "ipmi",
			"driver_info": l.DriverInfo(), "inspect_interface": "agent"})
		if err != nil {
			t.Fatalf("create node: %v", err)
		}
		if n.Conductor == "c2" {
			node = n
			break
		}
		if err := c1.Do(ctx, "DELETE", "/v1/nodes/"+n.UUID, nil, nil); err != nil {
			t.Fatalf("delete node %s: %v", n.UUID, err)
		}
	}
	if node == nil {
		t.Fatal("no node on c2 in 50 tries")
	}
	if _, err := c1.CreatePort(ctx, node.UUID, l.MACs[0], true); err != nil {
		t.Fatalf("create port: %v", err)
	}
	if err := c1.SetProvisionState(ctx, node.UUID, "manage"); err != nil {
		t.Fatalf("manage: %v", err)
	}
	if _, err := c1.WaitProvisionState(ctx, node.UUID, "manageable", 90*time.Second); err != nil {
		t.Fatalf("manage: %v", err)
	}
	start := time.Now()
	if err := c1.SetProvisionState(ctx, node.UUID, "inspect"); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	n, err := c1.WaitProvisionState(ctx, node.UUID, "manageable", 300*time.Second)
	end := time.Now()
	if err != nil {
		t.Log(TimingLine("inspect_two_conductors_failed", start, end, BootPhases(ctx, l, c1, node.UUID, start, end)))
		t.Fatalf("inspect: %v\n---- c2 ----\n%s", err, tailFile(log2, 60))
	}
	t.Log(TimingLine("inspect_two_conductors", start, end, BootPhases(ctx, l, c1, node.UUID, start, end)))
	checkInspectedProperties(t, n, l.Opts)
	checkPorts(ctx, t, c1, n.UUID, l.MACs[0])
	checkInventory(ctx, t, c1, n.UUID, l)

	// The owner did the work: every history event is c2's.
	hist, err := c1.History(ctx, node.UUID)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	for _, e := range hist {
		if e.Conductor != "c2" {
			t.Errorf("history event %q recorded by %q, want c2", e.Event, e.Conductor)
		}
	}
	// The VM booted from c2: c1 heard its DHCP and stayed silent; c2 served
	// the boot script, kernel and initramfs, and the agent reported to it.
	mac := strings.ToLower(l.MACs[0])
	b1, _ := os.ReadFile(log1)
	b2, _ := os.ReadFile(log2)
	has := func(log []byte, parts ...string) bool {
		for _, line := range strings.Split(string(log), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		return false
	}
	if !has(b1, "boot gate refused", "mac="+mac) {
		t.Errorf("c1's log does not show it declining %s's DHCP", mac)
	}
	for _, want := range [][]string{
		{"boot script served", "mac=" + mac},
		{"boot file served", "file=vmlinuz", "mac=" + mac},
		{"boot file served", "file=initramfs", "mac=" + mac},
		{"path=/v1/continue_inspection", "status=202"},
	} {
		if !has(b2, want...) || has(b1, want...) {
			t.Errorf("%q: on c1 %v, on c2 %v; want on c2 only", want, has(b1, want...), has(b2, want...))
		}
	}
}
