// Package inspectrules evaluates Ironic's inspection rules (API 1.96):
// conditions checked against the inspection data and actions run on the
// node when they all hold, with Python-style "{inventory[...]}"
// interpolation, loops and secret masking, as ironic/common/
// inspection_rules does. Where Ironic's documentation and its code differ,
// the documented behaviour wins (see the table tests).
//
// The package knows nothing of storage: the engine hands it the node, its
// ports and the inspection data as JSON-like trees and persists what the
// actions changed.
package inspectrules

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Rule is one inspection rule. Conditions and Actions are kept as the
// documents the user sent ({"op", "args", "loop", "multiple", ...}),
// normalized by Validate as Ironic stores them.
type Rule struct {
	UUID        string
	Description *string
	Priority    int64
	Sensitive   bool
	Phase       string
	Conditions  []map[string]any
	Actions     []map[string]any
	// BuiltIn rules come from the rules file, not the API.
	BuiltIn bool
}

// PhaseMain is the only inspection phase Ironic has.
const PhaseMain = "main"

// signature is an operation's keyword arguments, as Ironic reads them off
// the plugin's __call__.
type signature struct {
	required []string
	optional []string
	// pluginData: the action gets the plugin data as an argument.
	pluginData bool
	// formatted arguments are interpolated (all are, inside a loop).
	formatted []string
}

// ConditionOps are Ironic's condition operators, in its order.
var ConditionOps = []string{"eq", "lt", "gt", "is-empty", "in-net", "matches", "contains", "one-of", "is-none", "is-true", "is-false"}

// ActionOps are Ironic's actions, in its order.
var ActionOps = []string{"fail", "log", "set-attribute", "extend-attribute", "del-attribute", "set-capability",
	"unset-capability", "add-trait", "remove-trait", "set-plugin-data", "extend-plugin-data", "unset-plugin-data",
	"set-port-attribute", "extend-port-attribute", "del-port-attribute", "api-call"}

var (
	compare = signature{required: []string{"values"}, optional: []string{"force_strings"}, formatted: []string{"values"}}
	oneVal  = signature{required: []string{"value"}, formatted: []string{"value"}}
	regex   = signature{required: []string{"value", "regex"}, formatted: []string{"value"}}

	conditionSigs = map[string]signature{
		"eq": compare, "lt": compare, "gt": compare,
		"is-empty": oneVal, "is-none": oneVal, "is-true": oneVal, "is-false": oneVal,
		"in-net":   {required: []string{"address", "subnet"}, formatted: []string{"address", "subnet"}},
		"matches":  regex,
		"contains": regex,
		"one-of":   {required: []string{"value"}, optional: []string{"values"}, formatted: []string{"value"}},
	}
	actionSigs = map[string]signature{
		"fail":                  {required: []string{"msg"}},
		"log":                   {required: []string{"msg"}, optional: []string{"level"}, formatted: []string{"msg"}},
		"set-attribute":         {required: []string{"path", "value"}, formatted: []string{"value"}},
		"extend-attribute":      {required: []string{"path", "value"}, optional: []string{"unique"}, formatted: []string{"value"}},
		"del-attribute":         {required: []string{"path"}},
		"set-capability":        {required: []string{"name", "value"}, formatted: []string{"value"}},
		"unset-capability":      {required: []string{"name"}},
		"add-trait":             {required: []string{"name"}},
		"remove-trait":          {required: []string{"name"}},
		"set-plugin-data":       {required: []string{"path", "value", "plugin_data"}, pluginData: true, formatted: []string{"value"}},
		"extend-plugin-data":    {required: []string{"path", "value", "plugin_data"}, optional: []string{"unique"}, pluginData: true, formatted: []string{"value"}},
		"unset-plugin-data":     {required: []string{"path", "plugin_data"}, pluginData: true},
		"set-port-attribute":    {required: []string{"port_id", "path", "value"}, formatted: []string{"value"}},
		"extend-port-attribute": {required: []string{"port_id", "path", "value"}, optional: []string{"unique"}, formatted: []string{"value"}},
		"del-port-attribute":    {required: []string{"port_id", "path"}},
		"api-call":              {required: []string{"url"}, optional: []string{"headers", "proxies", "timeout", "retries", "backoff_factor"}, formatted: []string{"url"}},
	}
)

// ValidationError is a rule Ironic refuses, with Ironic's message. The API
// answers it with 400.
type ValidationError struct{ Msg string }

func (e *ValidationError) Error() string { return e.Msg }

func invalid(format string, a ...any) error { return &ValidationError{fmt.Sprintf(format, a...)} }

// parseInverted is Ironic's parse_inverted_operator: "!eq" is eq inverted.
func parseInverted(op string) (string, bool, error) {
	op = strings.TrimSpace(op)
	if strings.Count(op, "!") > 1 {
		return "", false, invalid("Multiple exclamation marks are not allowed. To apply the invert of an operation, simply add an exclamation mark (with an optional space) before the operator, e.g. eq - !eq.")
	}
	inv := strings.HasPrefix(op, "!")
	return strings.TrimSpace(strings.TrimLeft(op, "!")), inv, nil
}

// normalizeArgs turns list arguments (deprecated in Ironic) into keyword
// arguments and adds the plugin_data placeholder, changing args in place
// as Ironic does (so a stored rule shows "plugin_data": {}). It returns the
// keyword form.
func normalizeArgs(sig signature, args any) (map[string]any, any, error) {
	switch a := args.(type) {
	case map[string]any:
		if sig.pluginData {
			a["plugin_data"] = map[string]any{}
		}
		return a, a, nil
	case []any:
		if sig.pluginData {
			a = append(a, map[string]any{})
		}
		if len(a) < len(sig.required) {
			return nil, a, invalid("Not enough arguments provided. Missing: %s", strings.Join(sig.required[len(a):], ", "))
		}
		kw := map[string]any{}
		for i, name := range sig.required {
			kw[name] = a[i]
		}
		for i, name := range sig.optional {
			if len(sig.required)+i < len(a) {
				kw[name] = a[len(sig.required)+i]
			}
		}
		return kw, a, nil
	}
	return nil, args, invalid("args must be either a list or dictionary")
}

// checkArgs is the plugins' validate(): required present, nothing unknown.
func checkArgs(sig signature, doc map[string]any) error {
	args, ok := doc["args"]
	if !ok {
		args = map[string]any{}
	}
	kw, stored, err := normalizeArgs(sig, args)
	if _, has := doc["args"]; has {
		doc["args"] = stored
	}
	if err != nil {
		return err
	}
	var missing, unexpected []string
	for _, r := range sig.required {
		if _, has := kw[r]; !has {
			missing = append(missing, r)
		}
	}
	for k := range kw {
		if !slices.Contains(sig.required, k) && !slices.Contains(sig.optional, k) {
			unexpected = append(unexpected, k)
		}
	}
	sort.Strings(unexpected)
	var msg []string
	if len(missing) > 0 {
		msg = append(msg, "missing required argument(s): "+strings.Join(missing, ", "))
	}
	if len(unexpected) > 0 {
		msg = append(msg, "unexpected argument(s): "+strings.Join(unexpected, ", "))
	}
	if len(msg) > 0 {
		return invalid("%s", strings.Join(msg, "; "))
	}
	return nil
}

// Validate is Ironic's validate_rule after its JSON schema: phase,
// priority bounds (built-in rules may go outside 0-9999) and each
// operation's arguments. It normalizes the argument lists in place.
func Validate(r *Rule) error {
	var errs []string
	if r.Phase == "" {
		r.Phase = PhaseMain
	}
	if r.Phase != PhaseMain {
		errs = append(errs, fmt.Sprintf("Invalid phase: %s. Valid phases are: %s", r.Phase, PhaseMain))
	}
	if r.Priority < 0 && !r.BuiltIn {
		errs = append(errs, "Priority cannot be negative for user-defined rules.")
	}
	if r.Priority > 9999 && !r.BuiltIn {
		errs = append(errs, "Priority must be between 0 and 9999 for user-defined rules.")
	}
	for _, c := range r.Conditions {
		raw, _ := c["op"].(string)
		op, _, err := parseInverted(raw)
		if err != nil {
			return err
		}
		sig, ok := conditionSigs[op]
		if !ok {
			return invalid("Unsupported operator '%s'.", op)
		}
		if err := checkArgs(sig, c); err != nil {
			return err
		}
	}
	for _, a := range r.Actions {
		op, _ := a["op"].(string)
		sig, ok := actionSigs[op]
		if !ok {
			return invalid("Unsupported action '%s'.", op)
		}
		if err := checkArgs(sig, a); err != nil {
			return err
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return invalid("%s", errs[0])
	}
	return invalid("Multiple validation errors occurred: %s", strings.Join(errs, "; "))
}

// CheckShape checks a rule document's structure the way Ironic's create
// schema does (for rules that do not come through the API, whose handler
// has the schema with Ironic's exact messages).
func CheckShape(doc map[string]any) error {
	bad := func(format string, a ...any) error {
		return invalid("Validation failed for inspection rule: "+format, a...)
	}
	allowed := []string{"uuid", "description", "priority", "sensitive", "phase", "conditions", "actions"}
	for k := range doc {
		if !slices.Contains(allowed, k) {
			return bad("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	actions, ok := doc["actions"].([]any)
	if !ok {
		if _, has := doc["actions"]; !has {
			return bad("'actions' is a required property")
		}
		return bad("%s is not of type 'array'", pyRepr(doc["actions"]))
	}
	if len(actions) == 0 {
		return bad("[] should be non-empty")
	}
	var conds []any
	if c, has := doc["conditions"]; has {
		if conds, ok = c.([]any); !ok {
			return bad("%s is not of type 'array'", pyRepr(c))
		}
	}
	check := func(items []any, ops []string, inverted bool) error {
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return bad("%s is not of type 'object'", pyRepr(it))
			}
			for _, req := range []string{"op", "args"} {
				if _, has := m[req]; !has {
					return bad("'%s' is a required property", req)
				}
			}
			op, _ := m["op"].(string)
			known := slices.Contains(ops, op) || (inverted && strings.HasPrefix(op, "!") && slices.Contains(ops, op[1:]))
			if !known {
				return bad("%s is not one of %s", pyRepr(m["op"]), pyRepr(stringsAny(ops, inverted)))
			}
			for _, k := range []string{"args", "loop"} {
				if v, has := m[k]; has {
					switch v.(type) {
					case []any, map[string]any:
					default:
						return bad("%s is not of type 'array', 'object'", pyRepr(v))
					}
				}
			}
			if v, has := m["multiple"]; has && inverted {
				if s, _ := v.(string); !slices.Contains([]string{"any", "all", "first", "last"}, s) {
					return bad("%s is not one of ['any', 'all', 'first', 'last']", pyRepr(v))
				}
			}
		}
		return nil
	}
	if err := check(actions, ActionOps, false); err != nil {
		return err
	}
	if err := check(conds, ConditionOps, true); err != nil {
		return err
	}
	for _, k := range []string{"description", "phase", "uuid"} {
		if v, has := doc[k]; has && v != nil {
			s, ok := v.(string)
			if !ok {
				return bad("%s is not of type 'string', 'null'", pyRepr(v))
			}
			if k == "description" && len([]rune(s)) > 255 || k == "phase" && len([]rune(s)) > 16 {
				return bad("%s is too long", pyRepr(v))
			}
		}
	}
	if v, has := doc["sensitive"]; has && v != nil {
		if _, ok := v.(bool); !ok {
			return bad("%s is not of type 'boolean', 'null'", pyRepr(v))
		}
	}
	if v, has := doc["priority"]; has {
		n, ok := numberOf(v)
		if _, isBool := v.(bool); !ok || n.isFloat || isBool {
			return bad("%s is not of type 'integer'", pyRepr(v))
		}
	}
	return nil
}

func stringsAny(ops []string, inverted bool) []any {
	out := make([]any, 0, 2*len(ops))
	for _, o := range ops {
		out = append(out, o)
	}
	if inverted {
		for _, o := range ops {
			out = append(out, "!"+o)
		}
	}
	return out
}

// FromDocument builds a rule from a checked document (CheckShape or the
// API's schema), then validates it.
func FromDocument(doc map[string]any, builtIn bool) (*Rule, error) {
	r := &Rule{BuiltIn: builtIn, Phase: PhaseMain}
	r.UUID, _ = doc["uuid"].(string)
	if s, ok := doc["description"].(string); ok {
		r.Description = &s
	}
	if n, ok := numberOf(doc["priority"]); ok && !n.isFloat && n.i.IsInt64() {
		r.Priority = n.i.Int64()
	}
	r.Sensitive, _ = doc["sensitive"].(bool)
	if p, ok := doc["phase"].(string); ok {
		r.Phase = p
	}
	r.Conditions = opList(doc["conditions"])
	r.Actions = opList(doc["actions"])
	if err := Validate(r); err != nil {
		return nil, err
	}
	return r, nil
}

func opList(v any) []map[string]any {
	items, _ := v.([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// Normalize turns decoded JSON or YAML into the trees rules work on:
// numbers become json.Number, maps map[string]any, lists []any.
func Normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return DecodeJSON(b)
}

// DecodeJSON decodes with json.Number for numbers.
func DecodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// syntheticUUID names the n-th built-in rule that has no uuid.
func syntheticUUID(n int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012x", n) }

// LoadBuiltIn reads the built-in rules file: a YAML (or JSON) list of
// rules with the API's fields. Rules without a uuid get
// 00000000-0000-0000-0000-00000000000N, as Ironic numbers them.
func LoadBuiltIn(path string) ([]*Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("built-in inspection rules: %w", err)
	}
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("built-in inspection rules %s: %w", path, err)
	}
	norm, err := Normalize(raw)
	if err != nil {
		return nil, fmt.Errorf("built-in inspection rules %s: %w", path, err)
	}
	list, ok := norm.([]any)
	if !ok {
		return nil, fmt.Errorf("Built-in rules file (%s) should contain a list of rules", path)
	}
	var rules []*Rule
	synthetic := 0
	for i, item := range list {
		doc, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("built-in inspection rules %s: rule %d is not a mapping", path, i)
		}
		if doc["uuid"] == nil {
			doc["uuid"] = syntheticUUID(synthetic)
			synthetic++
		}
		if err := CheckShape(doc); err != nil {
			return nil, fmt.Errorf("built-in inspection rules %s: rule %d: %w", path, i, err)
		}
		r, err := FromDocument(doc, true)
		if err != nil {
			return nil, fmt.Errorf("built-in inspection rules %s: rule %d: %w", path, i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}
