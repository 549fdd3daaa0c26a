package httpapi

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestPowerMaintenanceBootDeviceValidateTraits(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "mgmt"})
	base := "/v1/nodes/" + id

	h.expect(202, "PUT", base+"/states/power", latest, map[string]any{"target": "power on"})
	waitPower := func(want string) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			st := h.expect(200, "GET", base+"/states", latest, nil).json(t)
			if st["power_state"] == want && st["target_power_state"] == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("power %v target %v, want %s", st["power_state"], st["target_power_state"], want)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}
	waitPower("power on")
	h.expect(202, "PUT", base+"/states/power", latest, map[string]any{"target": "rebooting"})
	waitPower("power on")
	h.expect(202, "PUT", base+"/states/power", latest, map[string]any{"target": "soft power off", "timeout": 10})
	waitPower("power off")
	r := h.expect(400, "PUT", base+"/states/power", latest, map[string]any{"target": "sideways"})
	if want := fmt.Sprintf(`The requested action "sideways" can not be performed on node "%s" while it is in state "power off".`, id); r.faultstring(t) != want {
		t.Fatalf("bogus power: %q", r.faultstring(t))
	}
	h.expect(406, "PUT", base+"/states/power", "1.26", map[string]any{"target": "soft power off"})
	h.expect(400, "PUT", base+"/states/power", latest, map[string]any{"target": "power on", "timeout": -1})
	h.expect(400, "PUT", base+"/states/power", latest, map[string]any{})

	h.expect(202, "PUT", base+"/maintenance", latest, map[string]any{"reason": "disk swap"})
	n := h.expect(200, "GET", base, latest, nil).json(t)
	if n["maintenance"] != true || n["maintenance_reason"] != "disk swap" {
		t.Fatalf("maintenance: %v %v", n["maintenance"], n["maintenance_reason"])
	}
	// In maintenance, deploy is refused but delete is allowed.
	h.expect(202, "DELETE", base+"/maintenance", latest, nil)
	n = h.expect(200, "GET", base, latest, nil).json(t)
	if n["maintenance"] != false || n["maintenance_reason"] != nil {
		t.Fatalf("maintenance off: %v %v", n["maintenance"], n["maintenance_reason"])
	}

	// Before any set, fake management answers as Ironic's: pxe, not persistent.
	if bd := h.expect(200, "GET", base+"/management/boot_device", latest, nil).json(t); bd["boot_device"] != "pxe" || bd["persistent"] != false {
		t.Fatalf("boot device before a set: %v", bd)
	}
	h.expect(204, "PUT", base+"/management/boot_device", latest, map[string]any{"boot_device": "pxe", "persistent": true})
	bd := h.expect(200, "GET", base+"/management/boot_device", latest, nil).json(t)
	if bd["boot_device"] != "pxe" || bd["persistent"] != true {
		t.Fatalf("boot device %v", bd)
	}
	h.expect(400, "PUT", base+"/management/boot_device", latest, map[string]any{"boot_device": "floppy"})
	sup := h.expect(200, "GET", base+"/management/boot_device/supported", latest, nil).json(t)
	if len(sup["supported_boot_devices"].([]any)) == 0 {
		t.Fatal("no supported boot devices")
	}

	v := h.expect(200, "GET", base+"/validate", latest, nil).json(t)
	if v["power"].(map[string]any)["result"] != true || v["deploy"].(map[string]any)["result"] != true {
		t.Fatalf("validate: %v", v)
	}

	h.expect(204, "PUT", base+"/traits", latest, map[string]any{"traits": []any{"CUSTOM_GPU", "HW_CPU_X86_AVX2"}})
	h.expect(204, "PUT", base+"/traits/CUSTOM_FAST", latest, nil)
	tr := h.expect(200, "GET", base+"/traits", latest, nil).json(t)["traits"].([]any)
	if len(tr) != 3 {
		t.Fatalf("traits %v", tr)
	}
	h.expect(400, "PUT", base+"/traits/lowercase", latest, nil)
	many := make([]any, 51)
	for i := range many {
		many[i] = fmt.Sprintf("CUSTOM_T%d", i)
	}
	h.expect(400, "PUT", base+"/traits", latest, map[string]any{"traits": many})
	h.expect(204, "DELETE", base+"/traits/CUSTOM_GPU", latest, nil)
	h.expect(404, "DELETE", base+"/traits/CUSTOM_GPU", latest, nil)
	h.expect(204, "DELETE", base+"/traits", latest, nil)
	// Below 1.37, as Ironic (the tempest plugin's TestNodesTraitsOldApi).
	h.expect(406, "GET", base+"/traits", "1.36", nil)
	h.expect(405, "PUT", base+"/traits/CUSTOM_GPU", "1.36", nil)
	h.expect(405, "PUT", base+"/traits", "1.36", map[string]any{"traits": []string{"CUSTOM_GPU"}})
	h.expect(404, "DELETE", base+"/traits/CUSTOM_GPU", "1.36", nil)
	h.expect(404, "DELETE", base+"/traits", "1.36", nil)
}

func TestPorts(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "withports"})
	other := h.createNode(map[string]any{"name": "other"})["uuid"].(string)
	r := h.expect(201, "POST", "/v1/ports", latest, map[string]any{"node_uuid": id, "address": "52:54:00:AA:BB:01", "extra": map[string]any{"slot": 1}})
	p := r.json(t)
	if p["address"] != "52:54:00:aa:bb:01" || p["pxe_enabled"] != true || p["node_uuid"] != id {
		t.Fatalf("port %v", p)
	}
	pid := p["uuid"].(string)
	if r.header.Get("Location") != h.srv.URL+"/v1/ports/"+pid {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	h.expect(201, "POST", "/v1/ports", latest, map[string]any{"node_uuid": other, "address": "52:54:00:aa:bb:02"})
	dup := h.expect(409, "POST", "/v1/ports", latest, map[string]any{"node_uuid": other, "address": "52:54:00:AA:BB:01"})
	if dup.faultstring(t) != "A port with MAC address 52:54:00:aa:bb:01 already exists." {
		t.Fatalf("dup: %q", dup.faultstring(t))
	}
	h.expect(400, "POST", "/v1/ports", latest, map[string]any{"node_uuid": id, "address": "not-a-mac"})
	h.expect(400, "POST", "/v1/ports", latest, map[string]any{"node_uuid": "00000000-0000-0000-0000-000000000000", "address": "52:54:00:aa:bb:03"})
	h.expect(400, "POST", "/v1/ports", latest, map[string]any{"address": "52:54:00:aa:bb:03"})
	h.expect(400, "POST", "/v1/ports", latest, map[string]any{"node_uuid": id, "address": "52:54:00:aa:bb:03", "bogus": 1})

	if got := len(h.expect(200, "GET", "/v1/ports", latest, nil).json(t)["ports"].([]any)); got != 2 {
		t.Fatalf("%d ports", got)
	}
	if got := h.expect(200, "GET", "/v1/nodes/withports/ports", latest, nil).json(t)["ports"].([]any); len(got) != 1 {
		t.Fatalf("node ports %v", got)
	}
	if got := h.expect(200, "GET", "/v1/ports?address=52:54:00:AA:BB:02", latest, nil).json(t)["ports"].([]any); len(got) != 1 {
		t.Fatalf("address filter %v", got)
	}
	if got := h.expect(200, "GET", "/v1/ports/detail?node="+other, latest, nil).json(t)["ports"].([]any); len(got) != 1 || got[0].(map[string]any)["node_uuid"] != other {
		t.Fatalf("node filter %v", got)
	}
	pp := h.expect(200, "PATCH", "/v1/ports/"+pid, latest, []any{
		map[string]any{"op": "replace", "path": "/pxe_enabled", "value": false},
		map[string]any{"op": "add", "path": "/extra/rack", "value": "r1"},
	}).json(t)
	if pp["pxe_enabled"] != false || pp["extra"].(map[string]any)["rack"] != "r1" {
		t.Fatalf("patched port %v", pp)
	}
	h.expect(400, "PATCH", "/v1/ports/"+pid, latest, []any{map[string]any{"op": "replace", "path": "/uuid", "value": "x"}})
	h.expect(409, "PATCH", "/v1/ports/"+pid, latest, []any{map[string]any{"op": "replace", "path": "/address", "value": "52:54:00:aa:bb:02"}})
	h.expect(204, "DELETE", "/v1/ports/"+pid, latest, nil)
	h.expect(404, "GET", "/v1/ports/"+pid, latest, nil)
	// Deleting a node deletes its ports.
	h.expect(204, "DELETE", "/v1/nodes/"+other, latest, nil)
	if got := len(h.expect(200, "GET", "/v1/ports", latest, nil).json(t)["ports"].([]any)); got != 0 {
		t.Fatalf("%d ports left", got)
	}
}

func TestConductorsAndDrivers(t *testing.T) {
	h := newAPI(t)
	cs := h.expect(200, "GET", "/v1/conductors", latest, nil).json(t)["conductors"].([]any)
	if len(cs) != 1 || cs[0].(map[string]any)["hostname"] != "test-conductor" || cs[0].(map[string]any)["alive"] != true {
		t.Fatalf("conductors %v", cs)
	}
	c := h.expect(200, "GET", "/v1/conductors/test-conductor", latest, nil).json(t)
	if c["drivers"] == nil || c["conductor_group"] != "" {
		t.Fatalf("conductor %v", c)
	}
	h.expect(404, "GET", "/v1/conductors/nope", latest, nil)
	// The conductors' list reads fields before detail.
	for q, want := range map[string]string{
		"fields=nope&detail=maybe":     `Field(s) "nope" are not valid`,
		"fields=hostname&detail=maybe": "Invalid value for detail: maybe",
		"fields=hostname&detail=True":  "Can not specify ?detail=True and fields in the same request.",
	} {
		if got := h.expect(400, "GET", "/v1/conductors?"+q, latest, nil).faultstring(t); got != want {
			t.Errorf("?%s: %q, want %q", q, got, want)
		}
	}
	id := h.createNode(map[string]any{})["uuid"].(string)
	if got := h.expect(200, "GET", "/v1/nodes/"+id+"/conductor", latest, nil).json(t)["hostname"]; got != "test-conductor" {
		t.Fatalf("node conductor %v", got)
	}
	ds := h.expect(200, "GET", "/v1/drivers", latest, nil).json(t)["drivers"].([]any)
	if len(ds) != 2 {
		t.Fatalf("drivers %v", ds)
	}
	d := h.expect(200, "GET", "/v1/drivers/fake-hardware", latest, nil).json(t)
	if d["default_deploy_interface"] != "fake" || d["type"] != "dynamic" {
		t.Fatalf("driver %v", d)
	}
	h.expect(404, "GET", "/v1/drivers/nope", latest, nil)
	// Every hardware type lists the driver_info keys of its interfaces.
	for name, keys := range map[string][]string{"fake-hardware": {"B1", "B2"}, "manual-management": {"inspect_wait_timeout"}} {
		props := h.expect(200, "GET", "/v1/drivers/"+name+"/properties", latest, nil).json(t)
		for _, k := range keys {
			if _, ok := props[k]; !ok {
				t.Errorf("%s properties %v lack %s", name, props, k)
			}
		}
	}
	h.expect(404, "GET", "/v1/drivers/nope/properties", latest, nil)
}

func TestHTTPBasicAuth(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	file := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(file, []byte("admin:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := LoadHTPasswd(file)
	if err != nil {
		t.Fatal(err)
	}
	h := newAPI(t, func(o *Options) { o.Auth = auth })
	h.expect(401, "GET", "/v1/nodes", latest, nil)
	h.expect(200, "GET", "/", "", nil) // the version documents are public
	h.expect(200, "GET", "/v1", latest, nil)
	h.expect(401, "GET", "/v1/drivers", latest, nil)
	for _, pw := range []string{"pw", "wrong", "pw"} {
		req, _ := newRequest(h, "GET", "/v1/nodes")
		req.SetBasicAuth("admin", pw)
		res, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want := 200
		if pw != "pw" {
			want = 401
		}
		if res.StatusCode != want {
			t.Fatalf("password %q: %d, want %d", pw, res.StatusCode, want)
		}
	}
	bad := filepath.Join(t.TempDir(), "md5")
	_ = os.WriteFile(bad, []byte("admin:$apr1$abc$def\n"), 0o600)
	if _, err := LoadHTPasswd(bad); err == nil {
		t.Fatal("non-bcrypt htpasswd accepted")
	}
}
