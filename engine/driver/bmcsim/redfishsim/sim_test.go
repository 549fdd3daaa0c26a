package redfishsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/engine/driver/redfish"
)

// bmc starts a Server on a loopback httptest server.
func bmc(t *testing.T, cfg redfishsim.Config) (*redfishsim.Server, string) {
	t.Helper()
	s, err := redfishsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, serve(t, s)
}

// serve puts s on a loopback httptest server until the test ends.
func serve(t testing.TB, s *redfishsim.Server) string {
	hs := httptest.NewServer(s)
	s.SetBaseURL(hs.URL)
	t.Cleanup(func() {
		hs.Close()
		_ = s.Close(context.Background())
	})
	return hs.URL
}

type tlog struct{ t testing.TB }

func (l tlog) Write(p []byte) (int, error) { l.t.Log(strings.TrimSpace(string(p))); return len(p), nil }

func newDriver(t *testing.T, cfg redfish.Config) *redfish.Driver {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 10 * time.Millisecond
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	d := redfish.New(cfg)
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func node(url string, s *redfishsim.Server) driver.Node {
	return driver.Node{UUID: "62696f73-0000-4000-8000-000000000001", Properties: map[string]any{}, DriverInfo: map[string]any{
		"redfish_address": url, "redfish_username": s.User(), "redfish_password": s.Password()}}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// call is a raw Redfish request with basic auth; it returns the status,
// the decoded body and the headers.
func call(t *testing.T, s *redfishsim.Server, method, url string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case *bytes.Buffer:
		rd = b
	case multipartBody:
		rd, ct = b.buf, b.ct
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", ct)
	req.SetBasicAuth(s.User(), s.Password())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out, res.Header
}

type multipartBody struct {
	buf *bytes.Buffer
	ct  string
}

var flavours = []redfishsim.Flavour{redfishsim.Generic, redfishsim.IDRAC, redfishsim.ILO}

// TestDriverPowerBootMedia drives every flavour with castiron's redfish
// driver: verify (session login), power through each reset, boot device
// once and persistent read back, virtual media insert/state/eject in the
// flavour's slots, inspection (MACs, memory, disks), indicators.
func TestDriverPowerBootMedia(t *testing.T) {
	for _, f := range flavours {
		t.Run(string(f), func(t *testing.T) {
			s, url := bmc(t, redfishsim.Config{Flavour: f})
			d := newDriver(t, redfish.Config{})
			ctx, n := ctxT(t, 30*time.Second), node(url, s)
			if err := d.Verify(ctx, n); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Logins != 1 {
				t.Fatalf("logins %d, want one session", st.Logins)
			}
			for _, target := range []string{driver.PowerOn, driver.Rebooting, driver.PowerOff, driver.PowerOn, driver.SoftPowerOff} {
				if err := d.SetPowerState(ctx, n, target, 5*time.Second); err != nil {
					t.Fatalf("%s: %v", target, err)
				}
				want := map[string]string{driver.PowerOn: "On", driver.Rebooting: "On"}[target]
				if want == "" {
					want = "Off"
				}
				if got := s.PowerState(); got != want {
					t.Fatalf("%s: BMC power %s, want %s", target, got, want)
				}
			}
			if f == redfishsim.IDRAC {
				if err := d.SetPowerState(ctx, n, driver.PowerOn, time.Second); err != nil {
					t.Fatal(err)
				}
				if err := d.SetPowerState(ctx, n, driver.SoftRebooting, time.Second); err == nil || !strings.Contains(err.Error(), "GracefulRestart") {
					t.Fatalf("iDRAC soft reboot: %v, want a refusal naming GracefulRestart", err)
				}
			}
			t.Logf("resets seen: %v", s.Stats().Resets)

			for _, dev := range []string{driver.BootPXE, driver.BootDisk, driver.BootCDROM, driver.BootBIOS, driver.BootUEFIHTTP} {
				for _, persistent := range []bool{false, true} {
					if err := d.SetBootDevice(ctx, n, dev, persistent); err != nil {
						t.Fatalf("%s persistent=%t: %v", dev, persistent, err)
					}
					bd, err := d.BootDevice(ctx, n)
					if err != nil || bd.BootDevice != dev || bd.Persistent == nil || *bd.Persistent != persistent {
						t.Fatalf("%s persistent=%t read back %+v %v", dev, persistent, bd, err)
					}
				}
			}
			// Once is used up by the next boot.
			if err := d.SetBootDevice(ctx, n, driver.BootPXE, false); err != nil {
				t.Fatal(err)
			}
			if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if bd, _ := d.BootDevice(ctx, n); bd.Persistent != nil {
				t.Fatalf("a Once override after a boot: %+v, want it cleared", bd)
			}

			const iso = "http://10.0.0.1:8080/boot/node.iso"
			if err := d.InsertMedia(ctx, n, driver.MediaCDROM, iso); err != nil {
				t.Fatal(err)
			}
			slots, err := d.MediaState(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(slots, func(m driver.MediaSlot) bool { return m.Device == driver.MediaCDROM && m.Inserted })
			if i < 0 || slots[i].Image != iso || !strings.Contains(slots[i].Path, "/Managers/") {
				t.Fatalf("media after insert: %+v", slots)
			}
			if err := d.InsertMedia(ctx, n, driver.MediaDisk, "http://10.0.0.1:8080/cfg.img"); err != nil {
				t.Fatal(err)
			}
			if err := d.EjectMedia(ctx, n, ""); err != nil {
				t.Fatal(err)
			}
			for _, m := range s.Media() {
				if m.Inserted {
					t.Fatalf("after eject all: %+v", s.Media())
				}
			}
			if st := s.Stats(); st.Inserts != 2 || st.Ejects < 2 {
				t.Fatalf("inserts %d ejects %d", st.Inserts, st.Ejects)
			}

			res, err := d.InspectHardware(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.MACs, s.MACs()) || res.Properties["cpu_arch"] != "x86_64" || res.Properties["local_gb"] == int64(0) {
				t.Fatalf("inspection: MACs %v properties %v", res.MACs, res.Properties)
			}
			t.Logf("inspected: %v boot mode %s", res.Properties, res.BootMode)

			inds, err := d.SupportedIndicators(ctx, n)
			if err != nil || len(inds) < 2 {
				t.Fatalf("indicators %v %v", inds, err)
			}
			for _, ind := range inds {
				if err := d.SetIndicatorState(ctx, n, ind.Component, ind.Name, driver.IndicatorBlinking); err != nil {
					t.Fatal(err)
				}
				if st, err := d.IndicatorState(ctx, n, ind.Component, ind.Name); err != nil || st != driver.IndicatorBlinking {
					t.Fatalf("%+v: %q %v", ind, st, err)
				}
			}
		})
	}
}

// TestDriverBootModeSecureBoot: the boot mode and secure boot, applied by
// the driver (reboot included) and read back; secure boot is refused in
// Legacy mode.
func TestDriverBootModeSecureBoot(t *testing.T) {
	s, url := bmc(t, redfishsim.Config{Flavour: redfishsim.ILO}) // Legacy by default
	d := newDriver(t, redfish.Config{BootConfigTimeout: 5 * time.Second})
	ctx, n := ctxT(t, 30*time.Second), node(url, s)
	if err := d.SetSecureBoot(ctx, n, true); err == nil || !strings.Contains(err.Error(), "requires UEFI") {
		t.Fatalf("secure boot in Legacy mode: %v", err)
	}
	if err := d.SetBootMode(ctx, n, "uefi"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := s.BIOS(); cur["BootMode"] != "Uefi" {
		t.Fatalf("BIOS BootMode after set_boot_mode uefi: %v", cur["BootMode"])
	}
	if err := d.SetSecureBoot(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	code, sb, _ := call(t, s, "GET", url+s.SystemPath()+"/SecureBoot/", nil)
	if code != 200 || sb["SecureBootEnable"] != true {
		t.Fatalf("SecureBoot %d %v", code, sb)
	}
	// SecureBootCurrentBoot follows at the next boot.
	if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, sb, _ = call(t, s, "GET", url+s.SystemPath()+"/SecureBoot/", nil); sb["SecureBootCurrentBoot"] != "Enabled" {
		t.Fatalf("SecureBootCurrentBoot after a reboot: %v", sb)
	}
}

// TestBIOSPendingAppliedOnReset: settings PATCHed into Bios/Settings stay
// pending, are checked against the registry, and apply at the next reset;
// ResetBios stages the defaults.
func TestBIOSPendingAppliedOnReset(t *testing.T) {
	for _, f := range flavours {
		t.Run(string(f), func(t *testing.T) {
			s, url := bmc(t, redfishsim.Config{Flavour: f})
			d := newDriver(t, redfish.Config{})
			ctx, n := ctxT(t, 30*time.Second), node(url, s)
			code, bios, _ := call(t, s, "GET", url+s.SystemPath()+"/Bios", nil)
			if code != 200 {
				t.Fatalf("Bios: %d", code)
			}
			settings := bios["@Redfish.Settings"].(map[string]any)["SettingsObject"].(map[string]any)["@odata.id"].(string)
			reg := s.BIOSRegistry()
			var enum, readOnly, integer redfishsim.Attribute
			for _, a := range reg {
				switch {
				case a.ReadOnly:
					readOnly = a
				case a.Type == "Enumeration" && a.Name != "BootMode" && enum.Name == "":
					enum = a
				case a.Type == "Integer":
					integer = a
				}
			}
			// The registry is reachable the way clients find it.
			_, files, _ := call(t, s, "GET", url+"/redfish/v1/Registries", nil)
			file := files["Members"].([]any)[0].(map[string]any)["@odata.id"].(string)
			_, rf, _ := call(t, s, "GET", url+file, nil)
			loc := rf["Location"].([]any)[0].(map[string]any)["Uri"].(string)
			_, ar, _ := call(t, s, "GET", url+loc, nil)
			if attrs := ar["RegistryEntries"].(map[string]any)["Attributes"].([]any); len(attrs) != len(reg) {
				t.Fatalf("registry at %s: %d attributes, want %d", loc, len(attrs), len(reg))
			}

			var other string
			for _, v := range enum.Values {
				if v != bios["Attributes"].(map[string]any)[enum.Name] {
					other = v
				}
			}
			for _, bad := range []map[string]any{
				{"NoSuchSetting": "x"},
				{enum.Name: "NotAValue"},
				{readOnly.Name: "x"},
			} {
				code, body, _ := call(t, s, "PATCH", url+settings, map[string]any{"Attributes": bad})
				if code != 400 {
					t.Fatalf("PATCH %v: %d %v, want 400", bad, code, body)
				}
				t.Logf("PATCH %v: %v", bad, body["error"].(map[string]any)["@Message.ExtendedInfo"])
			}
			if integer.Name != "" {
				if code, _, _ := call(t, s, "PATCH", url+settings, map[string]any{"Attributes": map[string]any{integer.Name: integer.Upper + 1}}); code != 400 {
					t.Fatalf("integer out of range: %d", code)
				}
			}
			if code, _, _ := call(t, s, "PATCH", url+settings, map[string]any{"Attributes": map[string]any{enum.Name: other}}); code != 204 {
				t.Fatalf("PATCH settings: %d", code)
			}
			cur, pending := s.BIOS()
			if cur[enum.Name] == other || pending[enum.Name] != other {
				t.Fatalf("before the reset: current %v pending %v", cur[enum.Name], pending)
			}
			_, ps, _ := call(t, s, "GET", url+settings, nil)
			if ps["Attributes"].(map[string]any)[enum.Name] != other {
				t.Fatalf("settings object: %v", ps)
			}
			if f == redfishsim.IDRAC {
				// iDRAC: nothing applies without a configuration job.
				if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				if cur, pending = s.BIOS(); cur[enum.Name] == other || pending[enum.Name] != other {
					t.Fatalf("iDRAC applied settings without a job: current %v pending %v", cur[enum.Name], pending)
				}
				jobs := url + s.ManagerPath() + "/Jobs"
				code, _, h := call(t, s, "POST", jobs, map[string]any{"TargetSettingsURI": settings})
				if code != 200 || !strings.Contains(h.Get("Location"), "/Jobs/JID_") {
					t.Fatalf("config job: %d %v", code, h)
				}
				if code, _, _ := call(t, s, "POST", jobs, map[string]any{"TargetSettingsURI": settings}); code != 400 {
					t.Fatalf("a second config job: %d", code)
				}
				if code, _, _ := call(t, s, "PATCH", url+settings, map[string]any{"Attributes": map[string]any{enum.Name: enum.Default}}); code != 400 {
					t.Fatalf("PATCH with a job scheduled: %d", code)
				}
				_, job, _ := call(t, s, "GET", url+h.Get("Location"), nil)
				if job["JobState"] != "Scheduled" || job["JobType"] != "BIOSConfiguration" {
					t.Fatalf("job %v", job)
				}
			}
			if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if f == redfishsim.IDRAC {
				if j := s.Jobs(); len(j) != 1 || j[0].State != "Completed" || j[0].Percent != 100 {
					t.Fatalf("jobs after the reboot: %+v", j)
				}
			}
			cur, pending = s.BIOS()
			if cur[enum.Name] != other || pending != nil {
				t.Fatalf("after power on: current %v pending %v", cur[enum.Name], pending)
			}
			_, bios, _ = call(t, s, "GET", url+s.SystemPath()+"/Bios", nil)
			if msgs := bios["@Redfish.Settings"].(map[string]any)["Messages"].([]any); len(msgs) != 1 {
				t.Fatalf("settings messages after apply: %v", msgs)
			}
			// Factory defaults, again at the next reset.
			if code, _, _ := call(t, s, "POST", url+s.SystemPath()+"/Bios/Actions/Bios.ResetBios", map[string]any{}); code != 204 {
				t.Fatalf("ResetBios: %d", code)
			}
			if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if cur, _ = s.BIOS(); cur[enum.Name] != enum.Default {
				t.Fatalf("after ResetBios and a reboot: %v, want %v", cur[enum.Name], enum.Default)
			}
			if f == redfishsim.IDRAC {
				// Cleaning clears the job queue first, as Ironic's idrac interfaces do.
				_, m, _ := call(t, s, "GET", url+s.ManagerPath(), nil)
				svc := m["Links"].(map[string]any)["Oem"].(map[string]any)["Dell"].(map[string]any)["DellJobService"].(map[string]any)["@odata.id"].(string)
				_, js, _ := call(t, s, "GET", url+svc, nil)
				target := js["Actions"].(map[string]any)["#DellJobService.DeleteJobQueue"].(map[string]any)["target"].(string)
				if code, _, _ := call(t, s, "PATCH", url+settings, map[string]any{"Attributes": map[string]any{enum.Name: other},
					"@Redfish.SettingsApplyTime": map[string]any{"ApplyTime": "OnReset"}}); code != 202 || len(s.Jobs()) != 3 {
					t.Fatalf("PATCH with an apply time: %d, jobs %+v", code, s.Jobs())
				}
				if code, _, _ := call(t, s, "POST", url+target, map[string]any{"JobID": "JID_CLEARALL"}); code != 200 {
					t.Fatalf("DeleteJobQueue: %d", code)
				}
				if _, pending := s.BIOS(); len(s.Jobs()) != 0 || pending != nil {
					t.Fatalf("after clearing the queue: jobs %+v pending %v", s.Jobs(), pending)
				}
			}
		})
	}
}

// TestVolumes creates and deletes RAID volumes: RAID levels the controller
// offers, drive counts and capacities it refuses, drives in use; iDRAC
// builds them through a task.
func TestVolumes(t *testing.T) {
	for _, f := range flavours {
		t.Run(string(f), func(t *testing.T) {
			s, url := bmc(t, redfishsim.Config{Flavour: f, TaskDelay: 50 * time.Millisecond})
			vols := url + s.StoragePath() + "/Volumes"
			_, st, _ := call(t, s, "GET", url+s.StoragePath(), nil)
			var drives []any
			for _, d := range st["Drives"].([]any) {
				drives = append(drives, d)
			}
			if len(drives) != 4 {
				t.Fatalf("drives %v", drives)
			}
			_, d0, _ := call(t, s, "GET", url+drives[0].(map[string]any)["@odata.id"].(string), nil)
			size := int64(d0["CapacityBytes"].(float64))
			for _, bad := range []map[string]any{
				{"RAIDType": "RAID1", "Links": map[string]any{"Drives": drives[:3]}},
				{"RAIDType": "RAID5", "Links": map[string]any{"Drives": drives[:2]}},
				{"RAIDType": "RAID7", "Links": map[string]any{"Drives": drives[:2]}},
				{"RAIDType": "RAID1", "CapacityBytes": size + 1, "Links": map[string]any{"Drives": drives[:2]}},
				{"RAIDType": "RAID1"},
			} {
				if code, body, _ := call(t, s, "POST", vols, bad); code != 400 {
					t.Fatalf("%v: %d %v", bad, code, body)
				}
			}
			waitTask := func(code int, h http.Header) {
				t.Helper()
				if code != 202 {
					return
				}
				mon := h.Get("Location")
				deadline := time.Now().Add(5 * time.Second)
				for {
					c, task, _ := call(t, s, "GET", url+mon, nil)
					if c == 200 {
						if task["TaskState"] != "Completed" {
							t.Fatalf("task %v", task)
						}
						return
					}
					if c != 202 || time.Now().After(deadline) {
						t.Fatalf("task monitor %s: %d %v", mon, c, task)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			code, _, h := call(t, s, "POST", vols, map[string]any{"RAIDType": "RAID1", "Name": "os", "CapacityBytes": 100 << 30, "Links": map[string]any{"Drives": drives[:2]}})
			if want := map[bool]int{true: 202, false: 201}[f == redfishsim.IDRAC]; code != want {
				t.Fatalf("create RAID1: %d, want %d", code, want)
			}
			if code == 202 { // drives being built into a volume are taken
				if c, _, _ := call(t, s, "POST", vols, map[string]any{"RAIDType": "RAID0", "Links": map[string]any{"Drives": drives[:1]}}); c != 409 {
					t.Fatalf("a drive of a volume being built: %d", c)
				}
			}
			waitTask(code, h)
			// The legacy VolumeType spelling, on the other two drives.
			code, _, h = call(t, s, "POST", vols, map[string]any{"VolumeType": "NonRedundant", "Links": map[string]any{"Drives": drives[2:]}})
			waitTask(code, h)
			v := s.Volumes()
			if len(v) != 2 || v[0].RAIDType != "RAID1" || v[0].CapacityBytes != 100<<30 || v[1].RAIDType != "RAID0" || v[1].CapacityBytes != 2*size {
				t.Fatalf("volumes %+v", v)
			}
			if code, _, _ := call(t, s, "POST", vols, map[string]any{"RAIDType": "RAID0", "Links": map[string]any{"Drives": drives[:1]}}); code != 409 {
				t.Fatalf("a drive in use: %d", code)
			}
			// The driver's inspection counts the volumes.
			d := newDriver(t, redfish.Config{})
			res, err := d.InspectHardware(ctxT(t, 10*time.Second), node(url, s))
			if err != nil || res.Properties["local_gb"] != int64(99) {
				t.Fatalf("inspection with volumes: %v %v", res.Properties, err)
			}
			_, coll, _ := call(t, s, "GET", vols, nil)
			for _, m := range coll["Members"].([]any) {
				code, _, h := call(t, s, "DELETE", url+m.(map[string]any)["@odata.id"].(string), nil)
				if code != 204 && code != 202 {
					t.Fatalf("delete: %d", code)
				}
				waitTask(code, h)
			}
			if v := s.Volumes(); len(v) != 0 {
				t.Fatalf("after delete: %+v", v)
			}
		})
	}
}

// TestFirmwareUpdate: SimpleUpdate fetching the image, a multipart push,
// the task's progress through its monitor, a BIOS update staged until the
// next reset, a bad image, a failing and a never-ending task.
func TestFirmwareUpdate(t *testing.T) {
	images := map[string]redfishsim.Image{
		"/bmc.bin":   {Component: "BMC", Version: "2.0.0"},
		"/bios.bin":  {Version: "P80 v2.00"},
		"/fail.bin":  {Fail: "Image verification failed: bad signature."},
		"/never.bin": {Never: true},
	}
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/junk.bin" {
			_, _ = w.Write([]byte("\x7fELF not a package"))
			return
		}
		im, ok := images[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(im)
	}))
	defer img.Close()
	s, url := bmc(t, redfishsim.Config{TaskDelay: 300 * time.Millisecond})
	d := newDriver(t, redfish.Config{})
	ctx, n := ctxT(t, 30*time.Second), node(url, s)

	_, us, _ := call(t, s, "GET", url+"/redfish/v1/UpdateService", nil)
	simple := us["Actions"].(map[string]any)["#UpdateService.SimpleUpdate"].(map[string]any)["target"].(string)
	run := func(body any, target string) (map[string]any, []int) {
		t.Helper()
		var code int
		var h http.Header
		if body == nil {
			code, _, h = call(t, s, "POST", url+target, nil)
		} else {
			code, _, h = call(t, s, "POST", url+target, body)
		}
		if code != 202 || h.Get("Location") == "" {
			t.Fatalf("update: %d %v", code, h)
		}
		var pcts []int
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, task, _ := call(t, s, "GET", url+h.Get("Location"), nil)
			pcts = append(pcts, int(task["PercentComplete"].(float64)))
			if c == 200 || time.Now().After(deadline) {
				return task, pcts
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	task, pcts := run(map[string]any{"ImageURI": img.URL + "/bmc.bin", "TransferProtocol": "HTTP"}, simple)
	if task["TaskState"] != "Completed" || len(pcts) < 3 || pcts[len(pcts)-1] != 100 {
		t.Fatalf("BMC update task %v, progress %v", task, pcts)
	}
	t.Logf("progress seen: %v", pcts)
	fw := func(id string) string {
		for _, c := range s.Firmware() {
			if c.ID == id {
				return c.Version
			}
		}
		return ""
	}
	if fw("BMC") != "2.0.0" {
		t.Fatalf("BMC version %q", fw("BMC"))
	}

	// Multipart push of a BIOS image: staged, applied at the next reset.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, _ := mw.CreateFormField("UpdateParameters")
	_, _ = pw.Write([]byte(`{"Targets":["/redfish/v1/UpdateService/FirmwareInventory/BIOS"]}`))
	fwr, _ := mw.CreateFormFile("UpdateFile", "bios.bin")
	_ = json.NewEncoder(fwr).Encode(images["/bios.bin"])
	_ = mw.Close()
	task, _ = run(multipartBody{&buf, mw.FormDataContentType()}, us["MultipartHttpPushUri"].(string))
	if task["TaskState"] != "Completed" || fw("BIOS") != "P79 v1.45" {
		t.Fatalf("BIOS push: %v, version %q (want the old one until a reset)", task, fw("BIOS"))
	}
	if err := d.SetPowerState(ctx, n, driver.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if fw("BIOS") != "P80 v2.00" {
		t.Fatalf("BIOS after the reset: %q", fw("BIOS"))
	}
	_, sys, _ := call(t, s, "GET", url+s.SystemPath(), nil)
	if sys["BiosVersion"] != "P80 v2.00" {
		t.Fatalf("BiosVersion %v", sys["BiosVersion"])
	}

	for path, want := range map[string]string{
		"/fail.bin":    "bad signature",
		"/junk.bin":    "not a firmware image",
		"/missing.bin": "HTTP 404",
	} {
		task, _ := run(map[string]any{"ImageURI": img.URL + path, "Targets": []string{"BMC"}}, simple)
		raw, _ := json.Marshal(task["Messages"])
		if task["TaskState"] != "Exception" || !strings.Contains(string(raw), want) {
			t.Fatalf("%s: task %v, want Exception with %q", path, task, want)
		}
	}
	// The system as the target (Ironic, with several systems): its BIOS.
	images["/v3.bin"] = redfishsim.Image{Version: "P81 v3.00"}
	task, _ = run(map[string]any{"ImageURI": img.URL + "/v3.bin", "Targets": []string{s.SystemPath()}}, simple)
	if task["TaskState"] != "Completed" {
		t.Fatalf("update targeting the system: %v", task)
	}
	if err := d.SetPowerState(ctx, n, driver.Rebooting, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if fw("BIOS") != "P81 v3.00" {
		t.Fatalf("BIOS after an update targeting the system: %q", fw("BIOS"))
	}
	if code, _, _ := call(t, s, "POST", url+simple, map[string]any{"ImageURI": img.URL + "/bmc.bin", "Targets": []string{"/redfish/v1/UpdateService/FirmwareInventory/NOPE"}}); code != 400 {
		t.Fatalf("unknown target: %d", code)
	}
	// A task that never ends stays Running; the monitor keeps answering 202.
	code, _, h := call(t, s, "POST", url+simple, map[string]any{"ImageURI": img.URL + "/never.bin", "Targets": []string{"BMC"}})
	if code != 202 {
		t.Fatal(code)
	}
	time.Sleep(400 * time.Millisecond)
	if c, task, _ := call(t, s, "GET", url+h.Get("Location"), nil); c != 202 || task["TaskState"] != "Running" {
		t.Fatalf("never-ending task: %d %v", c, task)
	}
}

// TestAuthSessionsFaults: wrong passwords, session login/logout by the
// driver, sessions dropped by the BMC (the driver logs in again), session
// timeout, basic-only BMCs, 5xx and slow answers.
func TestAuthSessionsFaults(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	s, url := bmc(t, redfishsim.Config{Flavour: redfishsim.ILO, SessionTimeout: time.Minute, Now: func() time.Time { return clock() }})
	ctx, n := ctxT(t, 30*time.Second), node(url, s)

	bad := node(url, s)
	bad.DriverInfo["redfish_password"] = "wrong"
	d := newDriver(t, redfish.Config{})
	if err := d.Verify(ctx, bad); err == nil || !errors.Is(err, redfish.ErrAuthentication) {
		t.Fatalf("wrong password: %v", err)
	}
	if code, _, _ := call(t, s, "GET", url+s.SystemPath(), nil); code != 200 {
		t.Fatalf("basic auth: %d", code)
	}
	req, _ := http.NewRequest("GET", url+s.SystemPath(), nil)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 {
		t.Fatalf("no credentials: %v %v", res, err)
	}

	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatal(err)
	}
	if s.Sessions() != 1 {
		t.Fatalf("sessions %d", s.Sessions())
	}
	s.DropSessions() // the BMC rebooted
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("after the BMC dropped the session: %v", err)
	}
	now = now.Add(2 * time.Minute) // idle beyond SessionTimeout
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("after the session timed out: %v", err)
	}
	if st := s.Stats(); st.Logins != 3 || st.AuthFailures < 3 {
		t.Fatalf("logins %d auth failures %d, want 3 logins", st.Logins, st.AuthFailures)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Sessions() != 0 {
		t.Fatalf("sessions after the driver closed: %d", s.Sessions())
	}

	// Faults: a 503 twice is retried through; a 500 is not; a slow answer
	// beyond the request timeout; a dropped connection.
	d = newDriver(t, redfish.Config{RequestTimeout: 300 * time.Millisecond})
	remove := s.InjectFault(redfishsim.Fault{Method: "GET", Path: "/Systems/", Status: 503, Times: 2})
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("503 twice: %v", err)
	}
	remove()
	remove = s.InjectFault(redfishsim.Fault{Method: "GET", Path: "/Systems/", Status: 500})
	if _, err := d.PowerState(ctx, n); err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("500: %v", err)
	}
	remove()
	remove = s.InjectFault(redfishsim.Fault{Method: "GET", Path: "/Systems/", Delay: 2 * time.Second})
	start := time.Now()
	_, err := d.PowerState(ctx, n)
	if err == nil || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("slow BMC: %v after %v", err, time.Since(start))
	}
	t.Logf("slow BMC: %v", err)
	remove()
	remove = s.InjectFault(redfishsim.Fault{Method: "GET", Path: "/Systems/", Drop: true, Times: 1})
	if _, err := d.PowerState(ctx, n); err == nil {
		t.Log("dropped connection: the driver retried through it")
	} else {
		t.Logf("dropped connection: %v", err)
	}
	remove()
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
}

// TestBasicOnlySystemMedia: a BMC without SessionService and virtual media
// under the System (sushy-tools' shape); the driver falls back to basic
// auth and uses the System's slots.
func TestBasicOnlySystemMedia(t *testing.T) {
	s, url := bmc(t, redfishsim.Config{NoSessionService: true, VirtualMedia: "system", OnceReadsContinuous: true})
	d := newDriver(t, redfish.Config{})
	ctx, n := ctxT(t, 30*time.Second), node(url, s)
	if err := d.InsertMedia(ctx, n, driver.MediaCDROM, "http://10.0.0.1/x.iso"); err != nil {
		t.Fatal(err)
	}
	m := s.Media()
	if !m[0].Inserted || !strings.Contains(m[0].Path, "/Systems/") {
		t.Fatalf("media %+v", m)
	}
	if err := d.SetBootDevice(ctx, n, driver.BootCDROM, false); err != nil {
		t.Fatal(err)
	}
	if bd, _ := d.BootDevice(ctx, n); bd.Persistent == nil || !*bd.Persistent {
		t.Fatalf("Once reads Continuous: %+v", bd)
	}
	if st := s.Stats(); st.Logins != 0 {
		t.Fatalf("logins %d on a BMC without sessions", st.Logins)
	}
}

// TestBadRequests: what a BMC refuses, with Redfish error bodies.
func TestBadRequests(t *testing.T) {
	s, url := bmc(t, redfishsim.Config{Flavour: redfishsim.IDRAC})
	sp := url + s.SystemPath()
	for _, c := range []struct {
		method, path string
		body         any
		code         int
	}{
		{"PATCH", sp, map[string]any{"PowerState": "On"}, 400},
		{"PATCH", sp, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Tape"}}, 400},
		{"PATCH", sp, bytes.NewBufferString("{not json"), 400},
		{"POST", sp + "/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "GracefulRestart"}, 400}, // not offered by iDRAC
		{"POST", sp + "/Actions/ComputerSystem.Reset", map[string]any{}, 400},
		{"POST", sp + "/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}, 409}, // already off (iDRAC)
		{"GET", url + "/redfish/v1/Systems/nope", nil, 404},
		{"DELETE", sp, nil, 405},
		{"POST", url + s.ManagerPath() + "/VirtualMedia/CD/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "nfs://x/y.iso"}, 400},
		{"PATCH", sp + "/SecureBoot", map[string]any{"SecureBootEnable": "yes"}, 400},
	} {
		code, body, _ := call(t, s, c.method, c.path, c.body)
		if code != c.code {
			t.Errorf("%s %s %v: %d %v, want %d", c.method, c.path, c.body, code, body, c.code)
			continue
		}
		e, _ := body["error"].(map[string]any)
		if info, _ := e["@Message.ExtendedInfo"].([]any); len(info) != 1 {
			t.Errorf("%s %s: no Redfish error body: %v", c.method, c.path, body)
		}
	}
	if _, err := redfishsim.New(redfishsim.Config{Flavour: "supermicro"}); err == nil {
		t.Fatal("unknown flavour accepted")
	}
}

// TestControlAPI: a BMC in another process is steered over HTTP: its
// state read, a fault injected and removed, sessions dropped, health set
// (read back by the driver's System read).
func TestControlAPI(t *testing.T) {
	s, url := bmc(t, redfishsim.Config{ControlAPI: true})
	d := newDriver(t, redfish.Config{Retries: -1})
	ctx, n := ctxT(t, 30*time.Second), node(url, s)
	if err := d.SetPowerState(ctx, n, driver.PowerOn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	code, st, _ := call(t, s, "GET", url+redfishsim.ControlPrefix+"/state", nil)
	if code != 200 || st["PowerState"] != "On" || st["Sessions"] != float64(1) || st["BootMode"] != "UEFI" {
		t.Fatalf("state %d %v", code, st)
	}
	if code, _, _ := call(t, s, "POST", url+redfishsim.ControlPrefix+"/faults", map[string]any{"Method": "GET", "Path": "/Systems/", "Status": 503}); code != 201 {
		t.Fatalf("fault: %d", code)
	}
	if _, err := d.PowerState(ctx, n); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("with the injected 503: %v", err)
	}
	if code, _, _ := call(t, s, "DELETE", url+redfishsim.ControlPrefix+"/faults", nil); code != 204 {
		t.Fatalf("faults removed: %d", code)
	}
	if code, _, _ := call(t, s, "POST", url+redfishsim.ControlPrefix+"/drop-sessions", nil); code != 204 || s.Sessions() != 0 {
		t.Fatalf("drop sessions: %d, %d left", code, s.Sessions())
	}
	if code, _, _ := call(t, s, "PUT", url+redfishsim.ControlPrefix+"/health", map[string]any{"Health": "Critical"}); code != 204 {
		t.Fatalf("health: %d", code)
	}
	if _, err := d.PowerState(ctx, n); err != nil {
		t.Fatalf("after the faults and a dropped session: %v", err)
	}
	if _, sys, _ := call(t, s, "GET", url+s.SystemPath(), nil); sys["Status"].(map[string]any)["Health"] != "Critical" {
		t.Fatalf("health %v", sys["Status"])
	}
	req, _ := http.NewRequest("GET", url+redfishsim.ControlPrefix+"/state", nil)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 {
		t.Fatalf("control API without credentials: %v %v", res, err)
	}
	if code, _, _ := call(t, s, "PUT", url+redfishsim.ControlPrefix+"/health", map[string]any{"Health": "Meh"}); code != 400 {
		t.Fatalf("bad health: %d", code)
	}
}
