package ipmi

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/ipmi/ipmisim"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// TestDiscoveryBMCUser: a discovered ipmi node's agent is asked (on its
// heartbeat) to create the --discovery-bmc-user user in-band; the
// credentials it reports become driver_info, and the node goes to manage,
// which verifies them against the BMC (ipmi_sim). Here the test creates
// the user on the BMC out of band, as the agent does in-band.
func TestDiscoveryBMCUser(t *testing.T) {
	sim := ipmisim.StartSim(t)
	ctx := context.Background()
	c, st := simConductor(t, engine.Config{AgentHeartbeatInterval: 10 * time.Millisecond,
		Discovery: true, DiscoveryDriver: "ipmi", DiscoveryBMCUser: "castiron"})
	// The site's network reaches the BMC on loopback here: a rule says so.
	rule := &storage.InspectionRule{Actions: []map[string]any{
		{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_address", "value": "127.0.0.1"}},
		{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_port", "value": sim.Port}},
		{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_cipher_suite", "value": 3}},
	}}
	if err := c.CreateInspectionRule(ctx, rule); err != nil {
		t.Fatal(err)
	}

	discover := func(mac, serial string) (string, string) {
		bmc := "10.205.9." + mac[len(mac)-1:]
		t.Helper()
		body, _ := json.Marshal(map[string]any{"inventory": map[string]any{
			"interfaces":    []any{map[string]any{"name": "eth0", "mac_address": mac}},
			"bmc_address":   bmc,
			"system_vendor": map[string]any{"serial_number": serial},
			"boot":          map[string]any{"pxe_interface": mac},
		}})
		in, err := engine.ParseInspection(body)
		if err != nil {
			t.Fatal(err)
		}
		in.WantToken = true
		n, token, err := c.ContinueInspection(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return n.UUID, token
	}
	heartbeat := func(id, token string, step *protocol.StepReport) protocol.Instruction {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			instr, err := c.AgentHeartbeat(ctx, id, protocol.Heartbeat{AgentToken: token, Step: step})
			if err != nil {
				t.Fatal(err)
			}
			if instr.Command != protocol.CmdWait || time.Now().After(deadline) {
				return instr
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait := func(id string, state string) *storage.Node {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, _ := st.GetNode(ctx, id)
			if n.Reservation == nil && n.ProvisionState == state {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s in %s (last_error %v), want %s", id, n.ProvisionState, n.LastError, state)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	id, token := discover("52:54:00:e1:00:01", "SRV-IPMI-1")
	instr := heartbeat(id, token, nil)
	if instr.Command != protocol.CmdRunStep || instr.Step.Name != protocol.StepBMCUser || instr.Step.Args[protocol.ArgUsername] != "castiron" {
		t.Fatalf("first heartbeat: %+v", instr)
	}
	// What the agent does in-band: user 3 named castiron, admin, enabled.
	const password = "Kq7dZp2Wx9bRt4Ys"
	sim.Ipmitool(t, "user", "set", "name", "3", "castiron")
	sim.Ipmitool(t, "user", "set", "password", "3", password)
	sim.Ipmitool(t, "channel", "setaccess", "1", "3", "link=on", "ipmi=on", "callin=on", "privilege=4")
	sim.Ipmitool(t, "user", "enable", "3")
	running := &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepRunning}
	if again := heartbeat(id, token, running); again.Command != protocol.CmdRunStep {
		t.Fatalf("while running: %+v", again)
	}
	done := &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepSucceeded, Result: map[string]any{
		protocol.ArgUsername: "castiron", protocol.ResultPassword: password, protocol.ResultUserID: 3, protocol.ResultChannel: 1}}
	if last := heartbeat(id, token, done); last.Command != protocol.CmdPowerOff {
		t.Fatalf("after the step: %+v", last)
	}
	n := wait(id, "manageable")
	if n.DriverInfo["ipmi_username"] != "castiron" || n.DriverInfo["ipmi_password"] != password || n.DriverInfo["ipmi_address"] != "127.0.0.1" {
		t.Errorf("driver_info %v", n.DriverInfo)
	}
	if strings.Contains(strconv.Quote(sim.Ipmitool(t, "user", "list", "1")), "castiron") == false {
		t.Error("the BMC has no castiron user")
	}
	hist, _ := st.ListEvents(ctx, id, storage.Page{})
	recorded := false
	for _, e := range hist {
		if strings.Contains(e.Event, password) {
			t.Errorf("history shows the password: %s", e.Event)
		}
		recorded = recorded || e.Event == "BMC user castiron set up in-band (user id 3, LAN channel 1); its credentials are in driver_info"
	}
	if !recorded {
		t.Errorf("history does not show the BMC user: %+v", hist)
	}

	// Credentials the BMC does not take: manage fails verification, the
	// node stays in enroll with the reason.
	id2, token2 := discover("52:54:00:e1:00:02", "SRV-IPMI-2")
	instr = heartbeat(id2, token2, nil)
	bad := &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepSucceeded, Result: map[string]any{
		protocol.ArgUsername: "castiron", protocol.ResultPassword: "not-the-password"}}
	heartbeat(id2, token2, bad)
	time.Sleep(100 * time.Millisecond)
	n2 := wait(id2, "enroll")
	if n2.LastError == nil || !strings.Contains(*n2.LastError, "Failed to verify BMC credentials") {
		t.Errorf("last_error %v", n2.LastError)
	}

	// A failed step: no credentials, a last_error, the agent powers off.
	id3, token3 := discover("52:54:00:e1:00:03", "SRV-IPMI-3")
	instr = heartbeat(id3, token3, nil)
	failed := &protocol.StepReport{ID: instr.Step.ID, Status: protocol.StepFailed, Error: "all 10 user slots are taken"}
	if last := heartbeat(id3, token3, failed); last.Command != protocol.CmdPowerOff {
		t.Fatalf("after a failed step: %+v", last)
	}
	n3 := wait(id3, "enroll")
	if n3.LastError == nil || *n3.LastError != "BMC user castiron not set up in-band: all 10 user slots are taken" {
		t.Errorf("last_error %v", n3.LastError)
	}
	hist, _ = st.ListEvents(ctx, id3, storage.Page{})
	if last := hist[len(hist)-1]; last.Severity != "ERROR" || last.Event != *n3.LastError {
		t.Errorf("history ends with %+v, want the failure", last)
	}
}
