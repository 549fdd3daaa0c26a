package httpapi

// What a request asks for, read from its body and path, for the rules
// that depend on it (Ironic's per-path PATCH rules, provision verbs,
// runbook use and ownership): split from access.go, which enforces them.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"castiron/httpapi/identity"
	"castiron/httpapi/policy"
	"castiron/storage"
)

// peekBody reads the request body and puts it back for the handler (the
// body is already capped at MaxBodyBytes).
func peekBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	rest := io.Reader(bytes.NewReader(data))
	if err != nil {
		rest = io.MultiReader(rest, errReader{err})
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{rest, r.Body}
	return data, err
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// peekJSON is peekBody decoded as a JSON object.
func peekJSON(r *http.Request) (map[string]any, error) {
	data, err := peekBody(r)
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, err
	}
	return body, nil
}

// nodePatchPaths are Ironic's _authorize_patch_and_get_node path rules,
// in its order (a path takes the first prefix it starts with).
var nodePatchPaths = []struct{ prefix, rule string }{
	{"/instance_info", "baremetal:node:update_instance_info"},
	{"/extra", "baremetal:node:update_extra"},
	{"/driver_info", "baremetal:node:update:driver_info"},
	{"/properties", "baremetal:node:update:properties"},
	{"/chassis_uuid", "baremetal:node:update:chassis_uuid"},
	{"/instance_uuid", "baremetal:node:update:instance_uuid"},
	{"/instance_name", "baremetal:node:update_instance_info"},
	{"/lessee", "baremetal:node:update:lessee"},
	{"/owner", "baremetal:node:update:owner"},
	{"/driver", "baremetal:node:update:driver_interfaces"},
	{"/network_data", "baremetal:node:update:network_data"},
	{"/conductor_group", "baremetal:node:update:conductor_group"},
	{"/name", "baremetal:node:update:name"},
	{"/retired", "baremetal:node:update:retired"},
	{"/shard", "baremetal:node:update:shard"},
	{"/parent_node", "baremetal:node:update:parent_node"},
	{"/disable_power_off", "baremetal:node:update:disable_power_off"},
}

// nodeInterfaces are driver_base.ALL_INTERFACES: a /<iface>_interface
// path needs update:driver_interfaces.
var nodeInterfaces = map[string]bool{"bios": true, "boot": true, "console": true, "deploy": true, "firmware": true,
	"inspect": true, "management": true, "network": true, "power": true, "raid": true, "rescue": true,
	"storage": true, "vendor": true}

// nodePatchRules are the rules a node PATCH needs, first the one whose
// refusal Ironic reports (check_multiple_node_policies_and_retrieve).
func nodePatchRules(r *http.Request) ([]string, error) {
	data, err := peekBody(r)
	if err != nil {
		return nil, err
	}
	var ops []map[string]any
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, err
	}
	var rules []string
	generic := false
	for _, op := range ops {
		path, _ := op["path"].(string)
		found := false
		for _, p := range nodePatchPaths {
			if strings.HasPrefix(path, p.prefix) {
				rules, found = append(rules, p.rule), true
				break
			}
		}
		if !found {
			name := strings.TrimLeft(path, "/")
			if i := strings.LastIndex(name, "_"); i > 0 && name[i+1:] == "interface" && nodeInterfaces[name[:i]] {
				rules, found = append(rules, "baremetal:node:update:driver_interfaces"), true
			} else if strings.HasPrefix(path, "/automated_clean") && isFalse(op["value"]) {
				rules, found = append(rules, "baremetal:node:disable_cleaning"), true
			}
		}
		if !found {
			generic = true
		}
	}
	if generic || len(rules) == 0 {
		rules = append(rules, "baremetal:node:update")
	}
	return rules, nil
}

// isFalse is strutils.bool_from_string(v, default=None) is False.
func isFalse(v any) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "0", "f", "false", "off", "n", "no":
			return true
		}
	}
	return false
}

// provisionRules are the secondary rules of PUT /states/provision: steps
// given without a runbook need the steps' own rules.
func provisionRules(r *http.Request) ([]string, error) {
	body, err := peekJSON(r)
	if err != nil {
		return nil, err
	}
	if rb, _ := body["runbook"].(string); rb != "" {
		return nil, nil
	}
	var rules []string
	if steps, ok := body["clean_steps"].([]any); ok && len(steps) > 0 {
		rules = append(rules, "baremetal:node:set_provision_state:clean_steps")
	}
	if steps, ok := body["service_steps"].([]any); ok && len(steps) > 0 {
		rules = append(rules, "baremetal:node:set_provision_state:service_steps")
	}
	return rules, nil
}

// runbookPatchRules is _authorize_patch_and_get_runbook: update:owner for
// a path under /owner, update:public under /public, and update for any
// other path (or a patch that cannot be read: the handler refuses it).
func runbookPatchRules(r *http.Request) []string {
	var rules []string
	generic := false
	b, err := peekBody(r)
	var ops []map[string]any
	if err == nil {
		err = json.Unmarshal(b, &ops)
	}
	if err != nil {
		return []string{"baremetal:runbook:update"}
	}
	for _, op := range ops {
		path, _ := op["path"].(string)
		switch {
		case strings.HasPrefix(path, "/owner"):
			rules = append(rules, "baremetal:runbook:update:owner")
		case strings.HasPrefix(path, "/public"):
			rules = append(rules, "baremetal:runbook:update:public")
		default:
			generic = true
		}
	}
	if generic || len(rules) == 0 {
		rules = append(rules, "baremetal:runbook:update")
	}
	return rules
}

// runbookUse is _handle_runbook's check_runbook_policy_and_retrieve with
// baremetal:runbook:use for the caller of r, judged by the runbook's owner
// alone (no public fallback: a public runbook has no owner, so only
// callers the rule admits without one, system members by default, may
// use it). Nil for callers policy does not restrict.
func (a *API) runbookUse(r *http.Request) func(*storage.Runbook) error {
	id := identity.From(r.Context())
	if id == nil || id.Unrestricted {
		return nil
	}
	e := a.enforcer()
	return func(rb *storage.Runbook) error {
		return forbidden(e.Authorize("baremetal:runbook:use", policy.Target{"runbook.owner": strOrNil(rb.Owner)}, id.Creds))
	}
}

// runbookCreateOwner is RunbooksController.post for a caller that is not
// system-scoped: an owner other than its project and public are 400s, and
// the runbook is its project's (none without a project).
func runbookCreateOwner(r *http.Request, body map[string]any) error {
	id := identity.From(r.Context())
	if id == nil || id.Unrestricted || id.Creds.System {
		return nil
	}
	p := id.Creds.ProjectID
	if o, _ := body["owner"].(string); o != "" && o != p {
		return errInvalid("Cannot create a runbook as a project scoped admin with an owner other than your own project.")
	}
	if pub, _ := body["public"].(bool); p != "" && pub {
		return errInvalid("Cannot create a public runbook as a project scoped admin.")
	}
	if p == "" {
		body["owner"] = nil
	} else {
		body["owner"] = p
	}
	return nil
}
