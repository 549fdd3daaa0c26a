package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/fault"
)

// Firmware and hardware RAID against castiron's own emulator in
// state-only mode (real HTTP on loopback).

func startSim(t *testing.T, cfg redfishsim.Config) (*redfishsim.Server, driver.Node) {
	t.Helper()
	if cfg.TaskDelay == 0 {
		cfg.TaskDelay = 50 * time.Millisecond
	}
	bmc, err := redfishsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(bmc)
	t.Cleanup(srv.Close)
	bmc.SetBaseURL(srv.URL)
	return bmc, driver.Node{UUID: "1c3a2b4d-0000-4000-8000-00000000f00d", DriverInfo: map[string]any{
		"redfish_address": srv.URL, "redfish_username": bmc.User(), "redfish_password": bmc.Password()}}
}

// serveImages serves firmware images (emulator JSON) by path.
func serveImages(t *testing.T, imgs map[string]redfishsim.Image) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		img, ok := imgs[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(img)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func fastDriver(t *testing.T) *Driver {
	d := newTestDriver(t, Config{PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func waitFirmwareTask(ctx context.Context, d *Driver, n driver.Node, task string) (driver.TaskState, error) {
	for {
		st, err := d.FirmwareTask(ctx, n, task)
		if err != nil || st.Done {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestFirmwareComponentsFromSim(t *testing.T) {
	for _, fl := range []redfishsim.Flavour{redfishsim.Generic, redfishsim.IDRAC, redfishsim.ILO} {
		t.Run(string(fl), func(t *testing.T) {
			bmc, n := startSim(t, redfishsim.Config{Flavour: fl})
			d := fastDriver(t)
			got, err := d.FirmwareComponents(ctxT(t, 10*time.Second), n)
			if err != nil {
				t.Fatal(err)
			}
			inv := bmc.Firmware()
			if len(got) != 3 || got[0].Component != "bios" || got[0].Version != inv[slices.IndexFunc(inv, func(c redfishsim.Component) bool { return c.ResetRequired })].Version ||
				got[1].Component != "bmc" || got[1].Model == "" || !strings.HasPrefix(got[2].Component, "nic:") ||
				got[2].SerialNumber == "" || got[2].Vendor == "" || got[2].Model == "" {
				t.Fatalf("components %+v (inventory %+v)", got, inv)
			}
			t.Logf("%+v", got)
		})
	}
}

func TestFirmwareUpdateThroughSim(t *testing.T) {
	imgs := serveImages(t, map[string]redfishsim.Image{
		"bmc.json":   {Component: "BMC", Version: "2.0.0"},
		"bios.json":  {Component: "BIOS", Version: "P80 v2.00"},
		"fail.json":  {Fail: "flash verification failed"},
		"never.json": {Never: true},
	})
	for _, mode := range []string{"simple", "multipart"} {
		t.Run(mode, func(t *testing.T) {
			bmc, n := startSim(t, redfishsim.Config{MultipartOnly: mode == "multipart"})
			d := fastDriver(t)
			ctx := ctxT(t, 20*time.Second)
			push := func(name string) driver.FirmwareImage {
				img := driver.FirmwareImage{Component: name, URL: imgs + "/" + name}
				img.Image = func() (driver.ReadSeekCloser, int64, error) {
					resp, err := http.Get(img.URL)
					if err != nil {
						return nil, 0, err
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					return nopCloser{bytes.NewReader(b)}, int64(len(b)), err
				}
				return img
			}
			task, err := d.StartFirmwareUpdate(ctx, n, push("bmc.json"))
			if err != nil {
				t.Fatal(err)
			}
			st, err := waitFirmwareTask(ctx, d, n, task)
			if err != nil || st.Failed || st.ResetRequired {
				t.Fatalf("bmc update: %+v %v", st, err)
			}
			comps, _ := d.FirmwareComponents(ctx, n)
			if comps[1].Version != "2.0.0" {
				t.Fatalf("bmc version after update: %+v", comps)
			}
			// BIOS: staged, applies at the next reset.
			task, err = d.StartFirmwareUpdate(ctx, n, push("bios.json"))
			if err != nil {
				t.Fatal(err)
			}
			if st, err = waitFirmwareTask(ctx, d, n, task); err != nil || !st.ResetRequired {
				t.Fatalf("bios update: %+v %v", st, err)
			}
			if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if comps, _ = d.FirmwareComponents(ctx, n); comps[0].Version != "P80 v2.00" {
				t.Fatalf("bios after reboot: %+v", comps)
			}
			// A failing task: Failed with the BMC's message.
			task, err = d.StartFirmwareUpdate(ctx, n, push("fail.json"))
			if err != nil {
				t.Fatal(err)
			}
			if st, err = waitFirmwareTask(ctx, d, n, task); err != nil || !st.Failed || !strings.Contains(st.Message, "flash verification failed") {
				t.Fatalf("failing task: %+v %v", st, err)
			}
			// A task that never ends stays not Done.
			task, err = d.StartFirmwareUpdate(ctx, n, push("never.json"))
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if st, err = waitFirmwareTask(short, d, n, task); err == nil || st.Done {
				t.Fatalf("endless task: %+v %v", st, err)
			}
			_ = bmc
		})
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func TestFirmwareNoUpdateService(t *testing.T) {
	_, n := startSim(t, redfishsim.Config{NoUpdateService: true})
	d := fastDriver(t)
	_, err := d.StartFirmwareUpdate(ctxT(t, 10*time.Second), n, driver.FirmwareImage{Component: "bmc", URL: "http://127.0.0.1:1/x"})
	if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "no UpdateService") {
		t.Fatalf("%v", err)
	}
}

func TestRAIDCreateDeleteThroughSim(t *testing.T) {
	for _, fl := range []redfishsim.Flavour{redfishsim.Generic, redfishsim.IDRAC} {
		t.Run(string(fl), func(t *testing.T) {
			bmc, n := startSim(t, redfishsim.Config{Flavour: fl})
			d := fastDriver(t)
			ctx := ctxT(t, 20*time.Second)
			ctls, err := d.RAIDControllers(ctx, n)
			if err != nil || len(ctls) != 1 || len(ctls[0].Disks) != 4 {
				t.Fatalf("%+v %v", ctls, err)
			}
			disks := []any{ctls[0].Disks[2].ID, ctls[0].Disks[3].ID}
			target := []map[string]any{
				{"raid_level": "1", "size_gb": float64(100), "is_root_volume": true, "volume_name": "root"},
				{"raid_level": "0", "size_gb": "MAX", "physical_disks": disks},
			}
			if err := d.CreateRAIDConfiguration(ctx, n, target, true, true); err != nil {
				t.Fatal(err)
			}
			vols := bmc.Volumes()
			if len(vols) != 2 || vols[0].RAIDType != "RAID1" || vols[0].CapacityBytes != 100<<30 || len(vols[0].Drives) != 2 ||
				vols[1].RAIDType != "RAID0" || len(vols[1].Drives) != 2 || slices.ContainsFunc(vols[0].Drives, func(s string) bool { return slices.Contains(vols[1].Drives, s) }) {
				t.Fatalf("volumes %+v", vols)
			}
			cfg, err := d.RAIDConfig(ctx, n)
			if err != nil || len(cfg) != 2 || cfg[0].RAIDLevel != "1" || cfg[0].SizeGB != 100 || cfg[0].Controller != ctls[0].ID || cfg[1].RAIDLevel != "0" {
				t.Fatalf("raid config %+v %v", cfg, err)
			}
			// MAX on two 480 GB drives: 64 MiB stripes, as Ironic computes it.
			if want := int64(2*((479559942144/1024)/(64*1024))) * 64 * 1024 * 1024; vols[1].CapacityBytes != want {
				t.Fatalf("MAX RAID0 %d bytes, want %d", vols[1].CapacityBytes, want)
			}
			if err := d.DeleteRAIDConfiguration(ctx, n); err != nil {
				t.Fatal(err)
			}
			if v := bmc.Volumes(); len(v) != 0 {
				t.Fatalf("after delete: %+v", v)
			}
		})
	}
}

func TestRAIDUnbuildable(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    redfishsim.Config
		target []map[string]any
		want   string
	}{
		{"level the controller lacks", redfishsim.Config{RAIDTypes: []string{"RAID0", "RAID1"}},
			[]map[string]any{{"raid_level": "5", "size_gb": float64(100)}}, "not supported by controller"},
		{"too big", redfishsim.Config{},
			[]map[string]any{{"raid_level": "1", "size_gb": float64(5000)}}, "failed to find matching physical disks"},
		{"MAX without disks", redfishsim.Config{},
			[]map[string]any{{"raid_level": "1", "size_gb": "MAX"}}, "'physical_disks' is missing"},
		{"unknown drive", redfishsim.Config{},
			[]map[string]any{{"raid_level": "0", "size_gb": float64(10), "physical_disks": []any{"nope"}}}, "is not a drive of a RAID controller"},
		{"no storage", redfishsim.Config{NoStorage: true},
			[]map[string]any{{"raid_level": "1", "size_gb": float64(10)}}, "reports no Storage"},
		{"BMC refuses", redfishsim.Config{}, nil, "Injected fault"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bmc, n := startSim(t, c.cfg)
			d := fastDriver(t)
			target := c.target
			if target == nil {
				target = []map[string]any{{"raid_level": "1", "size_gb": float64(10)}}
				bmc.InjectFault(redfishsim.Fault{Method: http.MethodPost, Path: "/Volumes", Status: http.StatusBadRequest})
			}
			start := time.Now()
			err := d.CreateRAIDConfiguration(ctxT(t, 10*time.Second), n, target, true, true)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want %q", err, c.want)
			}
			if len(bmc.Volumes()) != 0 {
				t.Fatalf("volumes left: %+v", bmc.Volumes())
			}
			t.Logf("%v (%v)", err, time.Since(start))
		})
	}
}

func TestRAIDVolumeTaskBounded(t *testing.T) {
	// iDRAC builds volumes in tasks: a task slower than the step's bound
	// ends the call when the context does.
	_, n := startSim(t, redfishsim.Config{Flavour: redfishsim.IDRAC, TaskDelay: time.Hour})
	d := fastDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := d.CreateRAIDConfiguration(ctx, n, []map[string]any{{"raid_level": "1", "size_gb": float64(10)}}, true, true)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("%v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}
