package inspectrules

import (
	"fmt"
	"log/slog"
	"strings"
)

// action runs one action operator on its processed arguments.
func (ev *evaluator) action(op string, args map[string]any) error {
	path := pyStr(args["path"])
	switch op {
	case "fail":
		return &ironicErr{msg: "Failed to inspect hardware. Reason: " + pyStr(args["msg"]), failed: true}
	case "log":
		return ev.log(args)
	case "set-attribute":
		ev.touch(op, path)
		if err := setPath(ev.node, nodeFields, args["path"], args["value"]); err != nil {
			return actionFailure(fmt.Sprintf("Failed to set attribute %s with value %s: %s", path, pyStr(args["value"]), err))
		}
	case "extend-attribute":
		ev.touch(op, path)
		if err := extendPath(ev.node, nodeFields, args["path"], args["value"], truthy(args["unique"])); err != nil {
			return actionFailure(fmt.Sprintf("Failed to extend attribute %s: %s", path, err))
		}
	case "del-attribute":
		ev.touch(op, path)
		if err := delPath(ev.node, nodeFields, args["path"]); err != nil {
			return actionFailure(fmt.Sprintf("Failed to delete attribute at %s: %s", path, err))
		}
	case "set-capability", "unset-capability":
		name := pyStr(args["name"])
		ev.touch(op, name)
		if err := ev.capability(op == "set-capability", args["name"], args["value"]); err != nil {
			verb := map[bool]string{true: "set", false: "unset"}[op == "set-capability"]
			return actionFailure(fmt.Sprintf("Failed to %s capability %s: %s", verb, name, err))
		}
	case "add-trait", "remove-trait":
		ev.touch(op, pyStr(args["name"]))
		return ev.trait(op == "add-trait", args["name"])
	case "set-plugin-data", "extend-plugin-data", "unset-plugin-data":
		ev.touch(op, path)
		return ev.pluginDataAction(op, args)
	case "set-port-attribute", "extend-port-attribute", "del-port-attribute":
		return ev.portAction(op, args)
	case "api-call":
		ev.touch(op, pyStr(args["url"]))
		return ev.apiCall(args)
	default:
		return executionFailure("Unsupported action '%s'.", op)
	}
	return nil
}

// touch notes what an action changed, for the node's history.
func (ev *evaluator) touch(op, what string) {
	ev.touched = append(ev.touched, op+" "+what)
}

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warning": slog.LevelWarn, "error": slog.LevelError, "critical": slog.LevelError + 4}

func (ev *evaluator) log(args map[string]any) error {
	level := "info"
	if l, has := args["level"]; has {
		s, ok := l.(string)
		if !ok {
			return &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'lower'", pyTypeName(l))}
		}
		level = strings.ToLower(s)
	}
	lv, ok := logLevels[level]
	if !ok {
		return executionFailure("Invalid log level: %s. Choose from {'debug', 'info', 'warning', 'error', 'critical'}", level)
	}
	nodeUUID, _ := ev.node.fields["uuid"].(string)
	ev.opts.Log.Log(ev.ctx, lv, pyStr(args["msg"]), "node", nodeUUID, "rule", ev.rule.UUID)
	return nil
}

// capability sets (replacing an earlier value) or removes name in
// properties.capabilities ("k1:v1,k2:v2").
func (ev *evaluator) capability(set bool, rawName, rawValue any) error {
	props, ok := ev.node.fields["properties"].(map[string]any)
	if !ok {
		return typeErr("'NoneType' object is not subscriptable")
	}
	name, ok := rawName.(string)
	if !ok {
		return typeErr("sequence item 0: expected str instance, %s found", pyTypeName(rawName))
	}
	caps := ""
	if c, has := props["capabilities"]; has && truthy(c) {
		s, ok := c.(string)
		if !ok {
			if set {
				return typeErr("sequence item 0: expected str instance, %s found", pyTypeName(c))
			}
			return &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'split'", pyTypeName(c))}
		}
		caps = s
	}
	var kept []string
	for _, c := range strings.Split(caps, ",") {
		if !strings.HasPrefix(c, name+":") && !(set && c == "") {
			kept = append(kept, c)
		}
	}
	if set {
		value, ok := rawValue.(string)
		if !ok {
			return typeErr("sequence item 1: expected str instance, %s found", pyTypeName(rawValue))
		}
		kept = append(kept, name+":"+value)
	}
	props["capabilities"] = strings.Join(kept, ",")
	return nil
}

func (ev *evaluator) trait(add bool, raw any) error {
	name, ok := raw.(string)
	if !ok || name == "" {
		if add {
			return actionFailure(fmt.Sprintf("Failed to add new trait %s: a trait is a non-empty string", pyStr(raw)))
		}
		return actionFailure(fmt.Sprintf("Failed to remove trait %s: a trait is a non-empty string", pyStr(raw)))
	}
	traits, _ := ev.node.fields["traits"].([]any)
	for i, t := range traits {
		if t == name {
			if !add {
				ev.node.fields["traits"] = append(traits[:i:i], traits[i+1:]...)
			}
			return nil
		}
	}
	if add {
		ev.node.fields["traits"] = append(traits, name)
		return nil
	}
	ev.opts.Log.Warn("inspection rule: trait to remove is not set", "rule", ev.rule.UUID, "trait", name)
	return nil
}

func (ev *evaluator) pluginDataAction(op string, args map[string]any) error {
	data := ev.target.PluginData
	rawPath := args["path"]
	path, ok := rawPath.(string)
	if !ok {
		err := &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'split'", pyTypeName(rawPath))}
		return actionFailure(fmt.Sprintf("Failed to %s plugin data at %s: %s", strings.TrimSuffix(op, "-plugin-data"), pyStr(rawPath), err))
	}
	keys := strings.Split(path, ".")
	switch op {
	case "set-plugin-data":
		if err := setNested(data, keys, args["value"]); err != nil {
			return actionFailure(fmt.Sprintf("Failed to set plugin data at %s: %s", path, err))
		}
	case "extend-plugin-data":
		current := getNested(data, keys)
		if !truthy(current) {
			current = []any{}
		}
		list, isList := unwrap(current).([]any)
		if !isList {
			err := &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'append'", pyTypeName(current))}
			return actionFailure(fmt.Sprintf("Failed to extend plugin data at %s: %s", path, err))
		}
		if !truthy(args["unique"]) || !containsEqual(list, args["value"]) {
			list = append(list, args["value"])
		}
		if err := setNested(data, keys, list); err != nil {
			return actionFailure(fmt.Sprintf("Failed to extend plugin data at %s: %s", path, err))
		}
	case "unset-plugin-data":
		if !unsetNested(data, keys) {
			ev.opts.Log.Warn("inspection rule: plugin data path not found", "rule", ev.rule.UUID, "path", path)
		}
	}
	return nil
}

func containsEqual(list []any, v any) bool {
	for _, e := range list {
		if pyEqual(e, v) {
			return true
		}
	}
	return false
}

// getNested reads d[k1][k2]...; nil when any step is missing.
func getNested(d map[string]any, keys []string) any {
	var cur any = d
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[k]; !ok {
			return nil
		}
	}
	return cur
}

// setNested is update_nested_dict: missing dicts on the way are created.
func setNested(d map[string]any, keys []string, value any) error {
	cur := d
	for _, k := range keys[:len(keys)-1] {
		next, has := cur[k]
		if !has {
			m := map[string]any{}
			cur[k] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'setdefault'", pyTypeName(next))}
		}
		cur = m
	}
	cur[keys[len(keys)-1]] = value
	return nil
}

// unsetNested removes the key; a dict left empty by it goes too.
func unsetNested(d map[string]any, keys []string) bool {
	parents := []map[string]any{d}
	cur := d
	for _, k := range keys[:len(keys)-1] {
		m, ok := cur[k].(map[string]any)
		if !ok {
			return false
		}
		parents = append(parents, m)
		cur = m
	}
	last := keys[len(keys)-1]
	if _, has := cur[last]; !has {
		return false
	}
	delete(cur, last)
	for i := len(parents) - 1; i > 0 && len(parents[i]) == 0; i-- {
		delete(parents[i-1], keys[i-1])
	}
	return true
}

func (ev *evaluator) portAction(op string, args map[string]any) error {
	id := pyStr(args["port_id"])
	path := pyStr(args["path"])
	ev.touch(op, id+" "+path)
	var port *object
	for _, p := range ev.target.Ports {
		if p["uuid"] == id || strings.EqualFold(fmt.Sprint(p["address"]), id) {
			port = &object{class: "Port", fields: p}
			break
		}
	}
	if port == nil {
		return &ironicErr{msg: fmt.Sprintf("Port %s could not be found.", id)}
	}
	var err error
	var what string
	switch op {
	case "set-port-attribute":
		err, what = setPath(port, portFields, args["path"], args["value"]), "set"
	case "extend-port-attribute":
		err, what = extendPath(port, portFields, args["path"], args["value"], truthy(args["unique"])), "extend"
	default:
		err, what = delPath(port, portFields, args["path"]), "delete"
	}
	if err != nil {
		return actionFailure(fmt.Sprintf("Failed to %s attribute %s for port %s: %s", what, path, id, err))
	}
	return nil
}
