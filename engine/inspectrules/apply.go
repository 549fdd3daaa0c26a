package inspectrules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// Target is what rules read and change: the node and its ports as field
// maps (the API's field names; actions write into them), and the
// inspection data (set-plugin-data writes into PluginData).
type Target struct {
	Node       map[string]any
	Ports      []map[string]any
	Inventory  map[string]any
	PluginData map[string]any
}

// Mask modes of the secrets in the inspection data (Ironic's
// [inspection_rules]mask_secrets).
const (
	MaskAlways    = "always"
	MaskNever     = "never"
	MaskSensitive = "sensitive"
)

// Options tune Apply.
type Options struct {
	// MaskSecrets: always (default), never, or sensitive (rules marked
	// sensitive see the secrets).
	MaskSecrets string
	// Log gets the log action's messages and the rules' warnings.
	Log *slog.Logger
	// HTTP serves the api-call action; nil uses http.DefaultClient's
	// transport with the action's timeout.
	HTTP *http.Client
}

// Applied is one rule whose conditions held and whose actions ran, with
// what each action touched (operation and path or name, never values).
type Applied struct {
	Rule    *Rule
	Actions []string
}

// Error is a rule failure, with the message Ironic puts into the node's
// last_error after "Failed to finish inspection: ".
type Error struct {
	Msg string
	// Failed is true for the fail action (the rule asked for it).
	Failed bool
}

func (e *Error) Error() string { return e.Msg }

// ironicErr is an Ironic exception raised inside an operation; anything
// else (a Python TypeError, ...) is reported as "Failed to apply rule".
type ironicErr struct {
	msg    string
	failed bool
}

func (e *ironicErr) Error() string { return e.msg }

func actionFailure(reason string) error {
	return &ironicErr{msg: "Inspection rule action execution failed. Reason: " + reason}
}

func conditionFailure(reason string) error {
	return &ironicErr{msg: "Inspection rule condition check failed. Reason: " + reason}
}

// executionFailure is InspectionRuleExecutionFailure raised with a plain
// message (Ironic then shows the message alone).
func executionFailure(format string, a ...any) error {
	return &ironicErr{msg: fmt.Sprintf(format, a...)}
}

// Sorted returns rules highest priority first; equal priorities keep their
// order (API rules by creation, then built-in rules), as Ironic's stable
// sort does.
func Sorted(rules []*Rule) []*Rule {
	out := slices.Clone(rules)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out
}

// Apply checks each rule of the main phase in priority order and runs the
// actions of those whose conditions hold. The first error stops it; what
// earlier actions changed stays changed (Ironic saves after each action).
func Apply(ctx context.Context, rules []*Rule, t *Target, o Options) ([]Applied, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaskSecrets == "" {
		o.MaskSecrets = MaskAlways
	}
	if t.PluginData == nil {
		t.PluginData = map[string]any{}
	}
	if t.Inventory == nil {
		t.Inventory = map[string]any{}
	}
	var applied []Applied
	node := &object{class: "Node", fields: t.Node}
	nodeUUID, _ := t.Node["uuid"].(string)
	for _, r := range Sorted(rules) {
		if r.Phase != "" && r.Phase != PhaseMain {
			continue
		}
		mask := o.MaskSecrets == MaskAlways || (o.MaskSecrets == MaskSensitive && !r.Sensitive)
		ev := &evaluator{ctx: ctx, rule: r, node: node, target: t, opts: o,
			inventory: &masked{v: t.Inventory, on: mask}, pluginData: &masked{v: t.PluginData, on: mask}}
		ok, err := ev.conditions()
		if err == nil && ok {
			o.Log.Info("applying actions of inspection rule", "rule", r.UUID)
			err = ev.actions()
			applied = append(applied, Applied{Rule: r, Actions: ev.touched})
		}
		if err != nil {
			var ie *ironicErr
			if errors.As(err, &ie) {
				o.Log.Error("error applying inspection rule", "rule", r.UUID, "err", ie.msg)
				return applied, &Error{Msg: ie.msg, Failed: ie.failed}
			}
			msg := fmt.Sprintf("Failed to apply rule %s to node %s: %v", r.UUID, nodeUUID, err)
			o.Log.Error("inspection rule failed", "rule", r.UUID, "err", err)
			return applied, &Error{Msg: msg}
		}
	}
	return applied, nil
}

// evaluator runs one rule.
type evaluator struct {
	ctx        context.Context
	rule       *Rule
	node       *object
	target     *Target
	opts       Options
	inventory  *masked
	pluginData *masked
	touched    []string
}

func (ev *evaluator) conditions() (bool, error) {
	for _, c := range ev.rule.Conditions {
		raw, _ := c["op"].(string)
		op, inverted, err := parseInverted(raw)
		if err != nil {
			return false, err
		}
		sig, ok := conditionSigs[op]
		if !ok {
			return false, fmt.Errorf("Unsupported operator: '%s'. Supported operators are: %s.", op, strings.Join(ConditionOps, ", "))
		}
		var result bool
		if loop := c["loop"]; truthy(loop) {
			result, err = ev.conditionLoop(op, sig, c, loop)
		} else {
			result, err = ev.condition(op, sig, c, nil)
		}
		if err != nil {
			return false, err
		}
		if inverted && !truthy(c["loop"]) {
			result = !result
		}
		if !result {
			if !ev.rule.Sensitive {
				ev.opts.Log.Debug("inspection rule skipped: condition failed", "rule", ev.rule.UUID, "op", raw)
			}
			return false, nil
		}
	}
	return true, nil
}

// conditionLoop is check_with_loop: the condition once per item, the
// results combined as "multiple" says (any, all, first, last).
func (ev *evaluator) conditionLoop(op string, sig signature, c map[string]any, loop any) (bool, error) {
	multiple, _ := c["multiple"].(string)
	if multiple == "" {
		multiple = "any"
	}
	_, inverted, _ := parseInverted(c["op"].(string))
	check := func(item any) (bool, error) {
		r, err := ev.condition(op, sig, c, map[string]any{"item": item})
		if inverted {
			r = !r
		}
		return r, err
	}
	var results []bool
	switch items := loop.(type) {
	case map[string]any:
		r, err := check(items)
		if err != nil || multiple == "first" || multiple == "last" {
			return r, err
		}
		results = append(results, r)
	case []any:
		for _, item := range items {
			r, err := check(item)
			if err != nil {
				return false, err
			}
			switch {
			case multiple == "first" && r:
				return true, nil
			case multiple == "last":
				results = []bool{r}
			default:
				results = append(results, r)
			}
		}
	default:
		r, err := ev.condition(op, sig, c, nil)
		return r != inverted, err
	}
	switch multiple {
	case "any":
		return slices.Contains(results, true), nil
	case "all":
		return !slices.Contains(results, false), nil
	}
	return len(results) > 0 && results[0], nil
}

// condition evaluates one condition (not inverted).
func (ev *evaluator) condition(op string, sig signature, c map[string]any, loop map[string]any) (bool, error) {
	args, err := ev.processArgs(op, sig, c, loop)
	if err != nil {
		return false, err
	}
	if loop != nil && slices.Contains(sig.optional, "force_strings") {
		args["force_strings"] = true
	}
	if err := checkCall(sig, args); err != nil {
		return false, err
	}
	return checkCondition(op, args)
}

func (ev *evaluator) actions() error {
	for _, a := range ev.rule.Actions {
		op, _ := a["op"].(string)
		sig, ok := actionSigs[op]
		if !ok {
			return fmt.Errorf("Unsupported action: '%s'. Supported actions are: %s.", op, strings.Join(ActionOps, ", "))
		}
		run := func(loop map[string]any) error {
			args, err := ev.processArgs(op, sig, a, loop)
			if err != nil {
				return err
			}
			if err := checkCall(sig, args); err != nil {
				return err
			}
			return ev.action(op, args)
		}
		var err error
		switch items := a["loop"].(type) {
		case map[string]any:
			if len(items) > 0 {
				err = run(map[string]any{"item": items})
			} else {
				err = run(nil)
			}
		case []any:
			if len(items) == 0 {
				err = run(nil)
			}
			for _, item := range items {
				if err = run(map[string]any{"item": item}); err != nil {
					break
				}
			}
		default:
			// A loop that is neither a list nor a dict runs nothing.
			if !truthy(items) {
				err = run(nil)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// processArgs is _process_args: keyword arguments (from a list if need
// be), the plugin data for the actions that take it, and interpolation of
// the formatted arguments (of all of them inside a loop).
func (ev *evaluator) processArgs(op string, sig signature, doc map[string]any, loop map[string]any) (map[string]any, error) {
	raw, has := doc["args"]
	if !has {
		raw = map[string]any{}
	}
	// Work on a copy: the stored rule stays as it is.
	var cp any
	switch a := raw.(type) {
	case map[string]any:
		m := make(map[string]any, len(a))
		for k, v := range a {
			m[k] = v
		}
		cp = m
	case []any:
		cp = slices.Clone(a)
	default:
		cp = raw
	}
	kw, _, err := normalizeArgs(sig, cp)
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return nil, &ironicErr{msg: ve.Msg}
		}
		return nil, err
	}
	if sig.pluginData {
		kw["plugin_data"] = ev.pluginData
	}
	out := make(map[string]any, len(kw))
	for k, v := range kw {
		if loop != nil || slices.Contains(sig.formatted, k) {
			v = ev.interpolate(v, loop, op)
		}
		out[k] = v
	}
	return out, nil
}

// checkCall is Python's call of the plugin with keyword arguments.
func checkCall(sig signature, args map[string]any) error {
	for _, r := range sig.required {
		if _, ok := args[r]; !ok {
			return typeErr("__call__() missing 1 required positional argument: '%s'", r)
		}
	}
	for k := range args {
		if !slices.Contains(sig.required, k) && !slices.Contains(sig.optional, k) {
			return typeErr("__call__() got an unexpected keyword argument '%s'", k)
		}
	}
	return nil
}

// interpolate is interpolate_variables: strings are formatted with node,
// inventory, plugin_data (and item in a loop, where a string is formatted
// twice so that an item can carry a "{inventory[...]}" of its own); dict
// keys and values and list elements are formatted too. A field that does
// not resolve leaves the text as it was, except for is-empty, where a
// missing key reads as None.
func (ev *evaluator) interpolate(v any, loop map[string]any, op string) any {
	ctx := map[string]any{"node": ev.node, "inventory": ev.inventory, "plugin_data": ev.pluginData}
	for k, x := range loop {
		ctx[k] = x
	}
	safe := func(x any) any {
		s, ok := x.(string)
		if !ok {
			return x
		}
		out, err := pyFormat(s, ctx)
		if err == nil {
			return out
		}
		var pe *pyError
		if errors.As(err, &pe) && pe.Type == "KeyError" && op == "is-empty" {
			return nil
		}
		if !ev.rule.Sensitive {
			ev.opts.Log.Warn("inspection rule interpolation failed", "rule", ev.rule.UUID, "value", s, "error_class", errClass(err), "err", err)
		}
		return s
	}
	if loop != nil {
		v = safe(v)
	}
	switch x := v.(type) {
	case string:
		return safe(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			key := pyStr(safe(k))
			out[key] = ev.interpolate(val, loop, op)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if s, ok := e.(string); ok {
				out[i] = safe(s)
			} else {
				out[i] = ev.interpolate(e, loop, op)
			}
		}
		return out
	}
	return v
}

func errClass(err error) string {
	var pe *pyError
	if errors.As(err, &pe) {
		return pe.Type
	}
	return "Exception"
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := unwrap(v).(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	if n, ok := numberOf(unwrap(v)); ok {
		return !n.isZero()
	}
	return true
}
