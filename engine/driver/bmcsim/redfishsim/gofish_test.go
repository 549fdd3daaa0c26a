package redfishsim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"castiron/engine/driver/bmcsim/redfishsim"
)

// TestGofish reads and drives the emulator with gofish, a client written
// against the DMTF schemas by others: session login, BIOS attributes staged
// with an apply time and applied by a reset, secure boot, storage volumes,
// the firmware inventory and a SimpleUpdate task, for every flavour.
func TestGofish(t *testing.T) {
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(redfishsim.Image{Version: "9.9.9"})
	}))
	defer img.Close()
	for _, f := range flavours {
		t.Run(string(f), func(t *testing.T) {
			s, url := bmc(t, redfishsim.Config{Flavour: f, TaskDelay: 10 * time.Millisecond})
			c, err := gofish.ConnectContext(ctxT(t, 30*time.Second), gofish.ClientConfig{Endpoint: url, Username: s.User(), Password: s.Password()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Logout()
			if s.Sessions() != 1 {
				t.Fatalf("gofish did not log in: %d sessions", s.Sessions())
			}
			systems, err := c.GetService().Systems()
			if err != nil || len(systems) != 1 {
				t.Fatalf("systems %v %v", systems, err)
			}
			sys := systems[0]
			if string(sys.PowerState) != "Off" || sys.UUID == "" || sys.Status.Health != "OK" {
				t.Fatalf("system %+v", sys)
			}
			bios, err := sys.Bios()
			if err != nil {
				t.Fatal(err)
			}
			var name, value string
			for _, a := range s.BIOSRegistry() {
				if a.Type == "Enumeration" && a.Name != "BootMode" && !a.ReadOnly {
					name, value = a.Name, a.Values[1]
					break
				}
			}
			if err := bios.UpdateBiosAttributesApplyAt(schemas.SettingsAttributes{name: value}, schemas.OnResetSettingsApplyTime); err != nil {
				t.Fatal(err)
			}
			if _, pending := s.BIOS(); pending[name] != value {
				t.Fatalf("pending after gofish's PATCH: %v", pending)
			}
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatal(err)
			}
			if bios, err = sys.Bios(); err != nil || bios.Attributes[name] != value {
				t.Fatalf("after the reset: %v %v", bios.Attributes[name], err)
			}
			sb, err := sys.SecureBoot()
			if err != nil || sb.SecureBootEnable {
				t.Fatalf("secure boot %+v %v", sb, err)
			}
			st, err := sys.Storage()
			if err != nil || len(st) != 1 || len(st[0].StorageControllers) != 1 || len(st[0].StorageControllers[0].SupportedRAIDTypes) < 5 {
				t.Fatalf("storage %+v %v", st, err)
			}
			drives, err := st[0].Drives()
			if err != nil || len(drives) != 4 {
				t.Fatalf("drives %d %v", len(drives), err)
			}
			us, err := c.GetService().UpdateService()
			if err != nil {
				t.Fatal(err)
			}
			inv, err := us.FirmwareInventory()
			if err != nil || len(inv) != 3 {
				t.Fatalf("firmware inventory %v %v", inv, err)
			}
			var bmcFW *schemas.SoftwareInventory // one that updates without a reset
			for _, comp := range s.Firmware() {
				for _, i := range inv {
					if bmcFW == nil && !comp.ResetRequired && i.Name == comp.Name {
						bmcFW = i
					}
				}
			}
			tm, err := us.SimpleUpdate(&schemas.UpdateServiceSimpleUpdateParameters{ImageURI: img.URL + "/fw.bin", Targets: []string{bmcFW.ODataID}, TransferProtocol: "HTTP"})
			if err != nil || tm == nil || tm.TaskMonitor == "" {
				t.Fatalf("SimpleUpdate: %+v %v", tm, err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				task, err := schemas.GetTask(c, tm.TaskMonitor)
				if err == nil && task.TaskState == schemas.CompletedTaskState {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("task %+v %v", task, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, comp := range s.Firmware() {
				if comp.Name == bmcFW.Name && comp.Version != "9.9.9" {
					t.Fatalf("%s after the update: %s", comp.Name, comp.Version)
				}
			}
		})
	}
}
