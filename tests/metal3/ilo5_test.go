package metal3

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"castiron/engine/driver/bmcsim/redfishsim"
)

// TestILO5Node: a node enrolled as for Ironic's ilo5 type (Metal3's
// ilo5:// hosts: ilo_address/ilo_username/ilo_password, client_port,
// ilo_verify_ca) gets Ironic's ilo5 interface names and is driven through
// the iLO's Redfish service (castiron's emulator, iLO 5 flavour, over
// HTTPS): manage checks the credentials, agent inspection boots castiron's
// ISO from the iLO's virtual CD (slot 2, under the Manager), out-of-band
// inspection ("ilo") reads the hardware from Redfish.
func TestILO5Node(t *testing.T) {
	c := startCastiron(t)
	mac := "94:40:c9:aa:bb:01"
	sim, err := redfishsim.New(redfishsim.Config{Flavour: redfishsim.ILO, MACs: []string{mac}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(sim)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	sim.SetBaseURL(srv.URL)
	iloHost, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	n := c.must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
		"name": "ilo5-0", "driver": "ilo5", "inspect_interface": "agent",
		"driver_info": map[string]any{"ilo_address": iloHost, "client_port": port, "ilo_username": sim.User(),
			"ilo_password": sim.Password(), "ilo_verify_ca": false},
	})
	for k, want := range map[string]string{"boot_interface": "ilo-virtual-media", "power_interface": "ilo", "management_interface": "ilo5", "raid_interface": "no-raid"} {
		if n[k] != want {
			t.Fatalf("%s = %v, want %s (Ironic's ilo5 defaults)", k, n[k], want)
		}
	}
	uuid := n["uuid"].(string)
	props := c.must(http.StatusOK, "GET", "/v1/drivers/ilo5/properties", nil)
	if _, ok := props["ilo_address"]; !ok {
		t.Fatalf("ilo5 properties %v lack ilo_address", props)
	}
	c.must(http.StatusCreated, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": uuid, "pxe_enabled": true})
	c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "manage"})
	c.waitState(uuid, "manageable")

	h := &host{bmcType: "ilo5", mac: mac, rf: sim, boot: "ilo-virtual-media"}
	c.inspect(h, uuid)
	var cd *redfishsim.Media
	for _, m := range sim.Media() {
		if m.ID == "2" {
			cd = &m
		}
	}
	if cd == nil || !strings.HasPrefix(cd.Path, "/redfish/v1/Managers/1/VirtualMedia/") {
		t.Fatalf("iLO CD slot: %+v", sim.Media())
	}
	if st := sim.Snapshot(); st.Stats.Inserts == 0 || st.Stats.Ejects == 0 {
		t.Fatalf("ISO inserted %d, ejected %d times: want both", st.Stats.Inserts, st.Stats.Ejects)
	}

	c.must(http.StatusOK, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "replace", "path": "/inspect_interface", "value": "ilo"}})
	c.must(http.StatusAccepted, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "inspect"})
	c.waitState(uuid, "manageable")
	inv := c.must(http.StatusOK, "GET", "/v1/nodes/"+uuid+"/inventory", nil)
	if raw := inv["_raw"].(string); !strings.Contains(raw, "ProLiant DL360 Gen10") {
		t.Fatalf("inventory after out-of-band inspection is not the iLO's: %.600s", raw)
	}
}
