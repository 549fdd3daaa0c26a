package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/inspectrules"
)

// Rules run after every inspection: through the API they change the node,
// its ports, traits and the stored plugin data, the history says what they
// did (never the values), and a failing rule fails the inspection.
func TestInspectionRulesAppliedAfterInspection(t *testing.T) {
	builtin := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(builtin, []byte(`
- description: built-in
  priority: -10
  actions:
    - op: set-attribute
      args: {path: /extra/last_rule, value: built-in}
`), 0o644)
	rules, err := inspectrules.LoadBuiltIn(builtin)
	if err != nil {
		t.Fatal(err)
	}
	rec := &storeRecorder{}
	h := newAPIWith(t, func(c *engine.Config) {
		c.AgentPowerOffWait = 50 * time.Millisecond
		c.BuiltInRules = rules
	}, ceiling(96), func(o *Options) { o.BootRecorder = rec })
	rec.st = h.store
	const bootMAC, otherMAC = "52:54:00:aa:10:01", "52:54:00:aa:10:02"
	id := agentNode(h, bootMAC)

	post := func(rule map[string]any) string {
		return h.expect(http.StatusCreated, "POST", "/v1/inspection_rules", v96, rule).json(t)["uuid"].(string)
	}
	qemu := post(map[string]any{"description": "QEMU machines", "priority": 100,
		"conditions": []any{
			map[string]any{"op": "contains", "args": map[string]any{"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)qemu"}},
			map[string]any{"op": "!is-empty", "args": map[string]any{"value": "{inventory[interfaces]}"}},
		},
		"actions": []any{
			map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/console_port", "value": "{inventory[cpu][count]}"}},
			map[string]any{"op": "set-capability", "args": map[string]any{"name": "cpu_arch", "value": "{inventory[cpu][architecture]}"}},
			map[string]any{"op": "add-trait", "args": map[string]any{"name": "CUSTOM_QEMU"}},
			map[string]any{"op": "set-port-attribute", "args": map[string]any{"port_id": otherMAC, "path": "/physical_network", "value": "physnet1"}},
			map[string]any{"op": "set-plugin-data", "args": map[string]any{"path": "rules.qemu", "value": "{node.uuid}"}},
			map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/extra/last_rule", "value": "qemu"}},
		}})
	secret := post(map[string]any{"description": "site credentials", "priority": 50, "sensitive": true,
		"actions": []any{map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_password", "value": "s3cret"}}}})
	post(map[string]any{"description": "never", "conditions": []any{map[string]any{"op": "eq", "args": map[string]any{"values": []any{1, 2}}}},
		"actions": []any{map[string]any{"op": "fail", "args": map[string]any{"msg": "should not run"}}}})

	h.moveTo(id, "inspect", "inspect wait")
	h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "", inventoryBody(bootMAC, otherMAC))
	n := h.waitState(id, "manageable")
	di := n["driver_info"].(map[string]any)
	props := n["properties"].(map[string]any)
	if di["console_port"] != "2" || di["ipmi_password"] != "******" || props["capabilities"] != "boot_mode:bios,cpu_arch:x86_64" ||
		n["extra"].(map[string]any)["last_rule"] != "built-in" {
		t.Errorf("node after rules: driver_info %v properties %v extra %v", di, props, n["extra"])
	}
	traits := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/traits", latest, nil).json(t)["traits"].([]any)
	if len(traits) != 1 || traits[0] != "CUSTOM_QEMU" {
		t.Errorf("traits %v", traits)
	}
	stored, _ := h.store.GetNode(t.Context(), id)
	if stored.DriverInfo["ipmi_password"] != "s3cret" {
		t.Errorf("stored ipmi_password %v", stored.DriverInfo["ipmi_password"])
	}
	ports := h.expect(http.StatusOK, "GET", "/v1/ports/detail?node="+id, latest, nil).json(t)["ports"].([]any)
	for _, p := range ports {
		pm := p.(map[string]any)
		if want := map[bool]any{true: "physnet1", false: nil}[pm["address"] == otherMAC]; pm["physical_network"] != want {
			t.Errorf("port %v physical_network %v", pm["address"], pm["physical_network"])
		}
	}
	inv := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/inventory", latest, nil).json(t)
	if got := inv["plugin_data"].(map[string]any)["rules"].(map[string]any)["qemu"]; got != id {
		t.Errorf("plugin_data.rules.qemu = %v", got)
	}
	hist := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/history", latest, nil).json(t)["history"].([]any)
	var applied []string
	for _, e := range hist {
		ev := e.(map[string]any)["event"].(string)
		if strings.HasPrefix(ev, "Inspection ") && strings.Contains(ev, "applied") {
			applied = append(applied, ev)
		}
		if strings.Contains(ev, "s3cret") {
			t.Errorf("history shows a secret: %s", ev)
		}
	}
	if len(applied) != 3 || !strings.Contains(applied[0], qemu+" (QEMU machines) applied: set-attribute /driver_info/console_port; set-capability cpu_arch; add-trait CUSTOM_QEMU; set-port-attribute "+otherMAC+" /physical_network") ||
		!strings.Contains(applied[1], secret) || !strings.Contains(applied[2], "built-in rule 00000000-0000-0000-0000-000000000000") {
		t.Errorf("history of rules: %q", applied)
	}

	// A rule that fails fails the inspection, with Ironic's last_error.
	post(map[string]any{"priority": 9999, "actions": []any{map[string]any{"op": "fail", "args": map[string]any{"msg": "unsupported model"}}}})
	h.moveTo(id, "inspect", "inspect wait")
	h.expect(http.StatusAccepted, "POST", "/v1/continue_inspection", "", inventoryBody(bootMAC, otherMAC))
	n = h.waitState(id, "inspect failed")
	if n["last_error"] != "Failed to finish inspection: Failed to inspect hardware. Reason: unsupported model" {
		t.Errorf("last_error %v", n["last_error"])
	}
}
