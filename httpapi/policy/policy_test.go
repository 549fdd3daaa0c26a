package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseGood(t *testing.T) {
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Creds{ProjectID: "p1", Roles: []string{"Member"}}
	cases := []struct {
		rule   string
		target Target
		want   bool
	}{
		{"", nil, true},
		{"@", nil, true},
		{"!", nil, false},
		{"role:member", nil, true}, // roles compare case-insensitively
		{"role:admin", nil, false},
		{"not role:admin", nil, true},
		{"role:admin or role:member", nil, true},
		{"role:admin and role:member", nil, false},
		{"not (role:admin or role:member)", nil, false},
		{"(role:member) and ((project_id:p1))", nil, true},
		{"role:member and project_id:%(node.owner)s", Target{"node.owner": "p1"}, true},
		{"role:member and project_id:%(node.owner)s", Target{"node.owner": "p2"}, false},
		{"project_id:%(node.owner)s", nil, false}, // missing target key: False
		{"project_id:%(node.lessee)s", Target{"node.lessee": nil}, false},
		{"system_scope:all", nil, false},
		{"'p1':%(node.owner)s", Target{"node.owner": "p1"}, true}, // literal kind
		{"True:%(flag)s", Target{"flag": true}, true},
		{"is_public_api:True", nil, false},
		{"rule:admin_api", nil, false},
		{"role:reader or not role:reader and role:member", nil, true}, // not > and > or
		{"ROLE:member", nil, false},                                   // kinds are case-sensitive: a generic check on creds "ROLE"
	}
	for _, tc := range cases {
		chk, err := Parse(tc.rule)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.rule, err)
			continue
		}
		tgt := c.values()
		for k, v := range tc.target {
			tgt[k] = v
		}
		if got := chk.eval(tgt, c.values(), e, 0); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.rule, got, tc.want)
		}
	}
	// A system-scoped caller has project_id None, which matches a None
	// owner, as in oslo.policy (Python's str(None) on both sides).
	sys := Creds{System: true, Roles: []string{"reader"}}
	chk, _ := Parse("project_id:%(node.owner)s")
	tgt := sys.values()
	tgt["node.owner"] = nil
	if !chk.eval(tgt, sys.values(), e, 0) {
		t.Error("None owner should match a None project_id as oslo.policy does")
	}
}

func TestParseBad(t *testing.T) {
	for _, rule := range []string{
		"role:admin and", "or role:admin", "(role:admin", "role:admin)", "admin", "role:admin role:member",
		"not", "()", "rule:", ":x", "project_id:%(node.owner", "project_id:%x", "http://example/check",
	} {
		if _, err := Parse(rule); err == nil {
			t.Errorf("Parse(%q) accepted", rule)
		} else if !strings.Contains(err.Error(), rule) {
			t.Errorf("Parse(%q): error %q does not name the rule", rule, err)
		}
	}
}

func TestDefaultsParse(t *testing.T) {
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.Rules()); n != len(Defaults) || n < 130 {
		t.Fatalf("%d rules", n)
	}
	for _, r := range e.Rules() {
		if r.check.String() == "" {
			t.Errorf("%s: empty", r.Name)
		}
	}
}

// Personas over a node owned by project "owner" and leased to "lessee".
var personas = map[string]Creds{
	"system-admin":   {System: true, Roles: []string{"admin", "member", "reader"}},
	"system-member":  {System: true, Roles: []string{"member", "reader"}},
	"system-reader":  {System: true, Roles: []string{"reader"}},
	"owner-admin":    {ProjectID: "owner", Roles: []string{"admin", "manager", "member", "reader"}},
	"owner-manager":  {ProjectID: "owner", Roles: []string{"manager", "member", "reader"}},
	"owner-member":   {ProjectID: "owner", Roles: []string{"member", "reader"}},
	"owner-reader":   {ProjectID: "owner", Roles: []string{"reader"}},
	"lessee-admin":   {ProjectID: "lessee", Roles: []string{"admin", "manager", "member", "reader"}},
	"lessee-member":  {ProjectID: "lessee", Roles: []string{"member", "reader"}},
	"lessee-reader":  {ProjectID: "lessee", Roles: []string{"reader"}},
	"other-admin":    {ProjectID: "other", Roles: []string{"admin", "member", "reader"}},
	"domain-admin":   {DomainID: "default", Roles: []string{"admin", "member", "reader"}},
	"system-no-role": {System: true},
}

func TestPersonas(t *testing.T) {
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	node := Target{"node.owner": "owner", "node.lessee": "lessee"}
	alloc := Target{"allocation.owner": "owner"}
	runbook := Target{"runbook.owner": "owner"}
	cases := []struct {
		rule   string
		target Target
		allow  string // space-separated personas allowed; all others refused
	}{
		// node: read, change, operate, create/delete, secrets
		{"baremetal:node:get", node, "system-admin system-member system-reader owner-admin owner-manager owner-member owner-reader lessee-admin lessee-member lessee-reader"},
		{"baremetal:node:list", nil, "system-admin system-member system-reader owner-admin owner-manager owner-member owner-reader lessee-admin lessee-member lessee-reader other-admin"},
		{"baremetal:node:list_all", nil, "system-admin system-member system-reader"},
		{"baremetal:node:update", node, "system-admin system-member owner-admin owner-manager owner-member lessee-admin lessee-member"},
		{"baremetal:node:update:owner", node, "system-admin system-member"},
		{"baremetal:node:update:driver_interfaces", node, "system-admin system-member owner-admin owner-manager"},
		{"baremetal:node:set_provision_state", node, "system-admin system-member owner-admin owner-manager owner-member lessee-admin"},
		{"baremetal:node:set_power_state", node, "system-admin system-member owner-admin owner-manager owner-member lessee-admin lessee-member"},
		{"baremetal:node:set_boot_mode", node, "system-admin system-member owner-admin owner-manager owner-member lessee-admin lessee-member"},
		{"baremetal:node:create", nil, "system-admin"},
		{"baremetal:node:create:self_owned_node", nil, "system-admin owner-admin lessee-admin other-admin"},
		{"baremetal:node:delete", node, "system-admin"},
		{"baremetal:node:delete:self_owned_node", node, "owner-admin"},
		{"baremetal:node:get:driver_info", node, "system-admin system-member system-reader owner-admin owner-manager owner-member owner-reader"},
		{"baremetal:node:get:last_error", node, "system-admin system-member system-reader owner-admin owner-manager owner-member owner-reader"},
		{"show_password", node, ""},
		// ports, portgroups
		{"baremetal:port:create", node, "system-admin owner-admin owner-manager"},
		{"baremetal:port:update", node, "system-admin system-member owner-admin owner-manager"},
		{"baremetal:port:get", node, "system-admin system-member system-reader owner-admin owner-manager owner-member owner-reader lessee-admin lessee-member lessee-reader"},
		{"baremetal:portgroup:delete", node, "system-admin owner-admin owner-manager"},
		// system-only resources: a project token has the wrong scope
		{"baremetal:chassis:get", nil, "system-admin system-member system-reader"},
		{"baremetal:chassis:create", nil, "system-admin"},
		{"baremetal:driver:get", nil, "system-admin system-member system-reader"},
		{"baremetal:conductor:get", nil, "system-admin system-member system-reader"},
		{"baremetal:deploy_template:create", nil, "system-admin"},
		{"baremetal:events:post", nil, "system-admin"},
		// allocations and runbooks by owner
		{"baremetal:allocation:get", alloc, "system-admin system-member system-reader owner-admin owner-manager owner-member owner-reader"},
		{"baremetal:allocation:create", nil, "system-admin system-member owner-admin owner-manager owner-member lessee-admin lessee-member other-admin"},
		{"baremetal:allocation:delete", alloc, "system-admin system-member owner-admin owner-manager owner-member"},
		{"baremetal:runbook:update", runbook, "system-admin system-member owner-admin owner-manager"},
		{"baremetal:runbook:create", nil, "system-admin system-member owner-admin owner-manager lessee-admin"},
		// volume
		{"baremetal:volume:create", node, "system-admin system-member owner-admin owner-manager lessee-admin"},
		{"baremetal:volume:view_target_properties", node, "system-admin system-member system-reader owner-admin lessee-admin other-admin"},
	}
	for _, tc := range cases {
		allowed := map[string]bool{}
		for _, p := range strings.Fields(tc.allow) {
			if _, ok := personas[p]; !ok {
				t.Fatalf("unknown persona %s", p)
			}
			allowed[p] = true
		}
		for name, c := range personas {
			err := e.Authorize(tc.rule, tc.target, c)
			if (err == nil) != allowed[name] {
				t.Errorf("%s for %s: allowed=%v, want %v (%v)", tc.rule, name, err == nil, allowed[name], err)
			}
			var d *Denied
			if err != nil && (!errors.As(err, &d) || d.Rule != tc.rule) {
				t.Errorf("%s for %s: error %v", tc.rule, name, err)
			}
		}
	}
	// Scope: a project-scoped admin is refused a system-only rule for its
	// scope, a domain token everything that takes system or project.
	var d *Denied
	if err := e.Authorize("baremetal:chassis:get", nil, personas["owner-admin"]); !errors.As(err, &d) || !d.Scope {
		t.Errorf("chassis:get by project admin: %v, want a scope refusal", err)
	}
	if err := e.Authorize("baremetal:node:list", nil, personas["domain-admin"]); !errors.As(err, &d) || !d.Scope {
		t.Errorf("node:list by domain admin: %v, want a scope refusal", err)
	}
	if err := e.Authorize("baremetal:no:such", nil, personas["system-admin"]); err == nil {
		t.Error("an unknown rule was allowed")
	}
}

func TestPolicyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A NOC role may power nodes; the node delete rule goes through a
	// helper rule the file defines.
	e, err := Load(write(`
"baremetal:node:set_power_state": "role:noc or rule:power_default"
"power_default": "(role:member and system_scope:all)"
"baremetal:node:delete": "rule:is_admin"
"show_password": "role:admin and system_scope:all"
`))
	if err != nil {
		t.Fatal(err)
	}
	noc := Creds{System: true, Roles: []string{"noc"}}
	node := Target{"node.owner": nil}
	if !e.Allowed("baremetal:node:set_power_state", node, noc) {
		t.Error("noc refused power")
	}
	if e.Allowed("baremetal:node:set_power_state", node, personas["owner-member"]) {
		t.Error("owner member allowed power after the override")
	}
	if !e.Allowed("baremetal:node:delete", node, personas["other-admin"]) {
		t.Error("is_admin (role:admin) should allow delete")
	}
	if !e.Allowed("show_password", nil, personas["system-admin"]) {
		t.Error("show_password override ignored")
	}
	var overridden int
	for _, r := range e.Rules() {
		if r.Overridden {
			overridden++
		}
	}
	if overridden != 4 {
		t.Errorf("%d overridden rules, want 4", overridden)
	}
	out := e.Format()
	for _, want := range []string{"baremetal:node:set_power_state: role:noc or rule:power_default", "power_default:", "# scope: system, project"} {
		if !strings.Contains(out, want) {
			t.Errorf("Format lacks %q", want)
		}
	}

	for body, want := range map[string]string{
		`"baremetal:node:gett": "role:admin"`:                                              "baremetal:node:gett: unknown rule name",
		`"baremetal:node:get": "role:admin and"`:                                           "rule baremetal:node:get",
		`"baremetal:node:get": "rule:nope"`:                                                "rule:nope is not defined",
		`"baremetal:node:get": ["role:admin"]`:                                             "want a check string",
		`"a": "rule:b"` + "\n" + `"b": "rule:a"` + "\n" + `"baremetal:node:get": "rule:a"`: "refers to itself",
		`: [`: "policy file",
	} {
		_, err := Load(write(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing policy file was accepted")
	}
}
