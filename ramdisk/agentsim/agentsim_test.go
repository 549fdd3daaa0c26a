package agentsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/enginetest"
	"castiron/httpapi"
	"castiron/ramdisk/protocol"
)

// api is a real castiron (engine over SQLite + httpapi) on loopback.
type api struct {
	t   *testing.T
	url string
}

func newAPI(t *testing.T) *api {
	t.Helper()
	cond, _ := enginetest.Start(t, engine.Config{Hostname: "sim-conductor", AutomatedClean: true,
		AgentHeartbeatInterval: 100 * time.Millisecond, AgentPowerOffWait: 50 * time.Millisecond},
		engine.NewFakeHardware(fake.New()))
	srv := httptest.NewServer(httpapi.New(cond, httpapi.Options{Logger: enginetest.Quiet()}))
	t.Cleanup(srv.Close)
	return &api{t: t, url: srv.URL}
}

func (a *api) do(method, path string, body any, want int) map[string]any {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// waitState waits for the node's provision state, failing on an
// unexpected failure state.
func (a *api) waitState(id, want string) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := a.do("GET", "/v1/nodes/"+id, nil, http.StatusOK)
		st, _ := n["provision_state"].(string)
		if st == want {
			return n
		}
		if strings.HasSuffix(st, "failed") || time.Now().After(deadline) {
			a.t.Fatalf("node %s is %s (last_error %v), want %s", id, st, n["last_error"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// machine records what the agent asked of the power.
type machine struct{ offs, reboots atomic.Int32 }

func (m *machine) PowerOff() error { m.offs.Add(1); return nil }
func (m *machine) Reboot() error   { m.reboots.Add(1); return nil }

// imageServer serves a random image and counts its downloads.
func imageServer(t *testing.T, size int) (url, sum string, gets *atomic.Int32) {
	img := make([]byte, size)
	rand.Read(img)
	h := sha256.Sum256(img)
	gets = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		http.ServeContent(w, r, "img.raw", time.Time{}, bytes.NewReader(img))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/img.raw", hex.EncodeToString(h[:]), gets
}

// boot runs one boot of the simulated agent until the node reaches want.
// An agent told to power off calls its Machine (selfOff); an inspection
// agent is cut off by castiron's BMC power off instead, which is the
// context's end here.
func boot(t *testing.T, a *api, id, want string, selfOff bool, p Params, hw *Hardware, disks *Disks) {
	t.Helper()
	m := &machine{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Params: p, Hardware: hw, Disks: disks, Machine: m, MinHeartbeat: 50 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	}()
	a.waitState(id, want)
	if !selfOff {
		cancel()
	}
	err := <-done
	switch {
	case selfOff && (err != nil || m.offs.Load() != 1):
		t.Fatalf("agent: %v after %d power offs, want nil after 1", err, m.offs.Load())
	case !selfOff && !errors.Is(err, context.Canceled):
		t.Fatalf("agent: %v, want it running until the power cut", err)
	}
}

// TestInspectCleanDeploy takes a node through inspection, automated
// cleaning and deployment with the simulated agent against a real castiron:
// its inventory is what castiron records, erase marks the disks, and
// write_image downloads the image and checks its checksum.
func TestInspectCleanDeploy(t *testing.T) {
	a := newAPI(t)
	const mac = "52:54:00:12:34:01"
	hw := NewHardware(0, []string{mac, "52:54:00:12:34:02"})
	disks := NewDisks(hw)
	n := a.do("POST", "/v1/nodes", map[string]any{"name": "sim-0", "driver": "fake-hardware",
		"boot_interface": "ipxe", "inspect_interface": "agent", "deploy_interface": "direct"}, http.StatusCreated)
	id := n["uuid"].(string)
	a.do("POST", "/v1/ports", map[string]any{"node_uuid": id, "address": mac, "pxe_enabled": true}, http.StatusCreated)
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "manage"}, http.StatusAccepted)
	a.waitState(id, "manageable")
	bootIF := "01-" + strings.ReplaceAll(mac, ":", "-")

	// Inspection: the iPXE script's parameters for an inspection boot.
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "inspect"}, http.StatusAccepted)
	a.waitState(id, "inspect wait")
	args := protocol.AgentArgs(a.url, id, "", true)
	boot(t, a, id, "manageable", false, ParseArgs(append(args, "BOOTIF="+bootIF)), hw, disks)
	n = a.waitState(id, "manageable")
	props := n["properties"].(map[string]any)
	if props["memory_mb"] != float64(256<<10) || props["cpus"] != float64(64) || props["cpu_arch"] != "x86_64" {
		t.Errorf("properties after inspection: %v", props)
	}
	inv := a.do("GET", "/v1/nodes/"+id+"/inventory", nil, http.StatusOK)["inventory"].(map[string]any)
	if sv := inv["system_vendor"].(map[string]any); sv["product_name"] != "PowerEdge R650" || sv["manufacturer"] != "Dell Inc." {
		t.Errorf("system_vendor %v", sv)
	}
	if ifs := inv["interfaces"].([]any); len(ifs) != 2 || ifs[1].(map[string]any)["mac_address"] != "52:54:00:12:34:02" {
		t.Errorf("interfaces %v", ifs)
	}
	ports := a.do("GET", "/v1/ports?node="+id, nil, http.StatusOK)["ports"].([]any)
	if len(ports) != 2 {
		t.Errorf("ports after inspection: %v (want the second NIC added)", ports)
	}

	// Automated cleaning: lookup by MACs (no inspection URL), token, steps.
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "provide"}, http.StatusAccepted)
	a.waitState(id, "clean wait")
	boot(t, a, id, "available", true, ParseArgs(append(protocol.AgentArgs(a.url, id, "", false), "BOOTIF="+bootIF)), hw, disks)
	for _, d := range hw.Disks {
		if st, _ := disks.Get(d.Name); !st.MetadataErased {
			t.Errorf("%s not erased by cleaning: %+v", d.Name, st)
		}
	}
	if disks.Bootable() {
		t.Error("disks bootable after cleaning")
	}

	// Deployment: write_image downloads and checks the image.
	url, sum, gets := imageServer(t, 3<<20+123)
	a.do("PATCH", "/v1/nodes/"+id, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": url},
		{"op": "add", "path": "/instance_info/image_checksum", "value": sum},
	}, http.StatusOK)
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "active"}, http.StatusAccepted)
	a.waitState(id, "wait call-back")
	boot(t, a, id, "active", true, ParseArgs(append(protocol.AgentArgs(a.url, "", "", false), "BOOTIF="+bootIF)), hw, disks)
	root := hw.Disks[0].Name
	st, _ := disks.Get(root)
	if st.Image != url || st.ImageBytes != 3<<20+123 || st.ImageChecksum != sum || !disks.Bootable() {
		t.Errorf("root disk after deploy: %+v", st)
	}
	if gets.Load() != 1 {
		t.Errorf("image downloaded %d times", gets.Load())
	}
}

// TestChecksumMismatch: a wrong checksum fails the deployment with the real
// agent's message, and the disk does not boot.
func TestChecksumMismatch(t *testing.T) {
	a := newAPI(t)
	const mac = "52:54:00:12:35:01"
	hw := NewHardware(1, []string{mac})
	disks := NewDisks(hw)
	n := a.do("POST", "/v1/nodes", map[string]any{"name": "sim-1", "driver": "fake-hardware",
		"boot_interface": "ipxe", "deploy_interface": "direct"}, http.StatusCreated)
	id := n["uuid"].(string)
	a.do("POST", "/v1/ports", map[string]any{"node_uuid": id, "address": mac}, http.StatusCreated)
	url, _, _ := imageServer(t, 1<<20)
	bad := strings.Repeat("ab", 32)
	a.do("PATCH", "/v1/nodes/"+id, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": url},
		{"op": "add", "path": "/instance_info/image_checksum", "value": bad},
	}, http.StatusOK)
	for _, v := range []string{"manage", "provide"} {
		a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": v}, http.StatusAccepted)
		if v == "provide" {
			a.waitState(id, "clean wait")
			boot(t, a, id, "available", true, ParseArgs(append(protocol.AgentArgs(a.url, id, "", false), "BOOTIF=01-"+strings.ReplaceAll(mac, ":", "-"))), hw, disks)
		}
	}
	a.waitState(id, "available")
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "active"}, http.StatusAccepted)
	a.waitState(id, "wait call-back")
	m := &machine{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go Run(ctx, Config{Params: ParseArgs(protocol.AgentArgs(a.url, id, "", false)), Hardware: hw, Disks: disks, Machine: m, MinHeartbeat: 50 * time.Millisecond})
	deadline := time.Now().Add(20 * time.Second)
	for {
		n = a.do("GET", "/v1/nodes/"+id, nil, http.StatusOK)
		if n["provision_state"] == "deploy failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node is %v, want deploy failed", n["provision_state"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if le, _ := n["last_error"].(string); !strings.Contains(le, "image checksum mismatch: sha256 is") || !strings.Contains(le, "expected "+bad) {
		t.Errorf("last_error %q", le)
	}
	if disks.Bootable() {
		t.Error("a disk with a bad image is bootable")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestAbortFullErase: a manual clean's full erase runs (progress in
// clean_step) until castiron's abort, which the agent obeys at its next
// heartbeat: the step stops and the machine powers off.
func TestAbortFullErase(t *testing.T) {
	a := newAPI(t)
	const mac = "52:54:00:12:36:01"
	hw := NewHardware(2, []string{mac})
	disks := NewDisks(hw)
	n := a.do("POST", "/v1/nodes", map[string]any{"name": "sim-2", "driver": "fake-hardware",
		"boot_interface": "ipxe", "deploy_interface": "direct"}, http.StatusCreated)
	id := n["uuid"].(string)
	a.do("POST", "/v1/ports", map[string]any{"node_uuid": id, "address": mac}, http.StatusCreated)
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "manage"}, http.StatusAccepted)
	a.waitState(id, "manageable")
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "clean",
		"clean_steps": []map[string]any{{"interface": "deploy", "step": "erase_devices"}}}, http.StatusAccepted)
	a.waitState(id, "clean wait")
	m := &machine{}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Config{Params: ParseArgs(protocol.AgentArgs(a.url, id, "", false)), Hardware: hw, Disks: disks,
			Machine: m, MinHeartbeat: 50 * time.Millisecond, EraseRate: 1 << 30})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n = a.do("GET", "/v1/nodes/"+id, nil, http.StatusOK)
		if cs, _ := n["clean_step"].(map[string]any); cs != nil {
			if p, _ := cs["progress"].(map[string]any); p != nil && p["done"].(float64) > 0 && p["unit"] == "bytes" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no erase progress in clean_step: %v", n["clean_step"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.do("PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "abort"}, http.StatusAccepted)
	select {
	case err := <-done:
		if err != nil || m.offs.Load() != 1 {
			t.Fatalf("agent after abort: %v, %d power offs", err, m.offs.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop after the abort")
	}
	a.waitState(id, "clean failed")
	if st, _ := disks.Get(hw.Disks[0].Name); st.Erased {
		t.Errorf("%s marked erased although the erase was aborted", hw.Disks[0].Name)
	}
}
