package inspectrules

import (
	"fmt"
	"sort"
	"strings"

	"castiron/fault/pyrepr"
)

// kind is how an object field takes a value (the oslo field types Ironic's
// Node and Port objects use).
type kind int

const (
	kString kind = iota
	kNullString
	kBool
	kNullBool
	kDict
)

// nodeFields are the node fields rules may change, with their kinds. The
// rest (uuid, states, timestamps, reservation, traits: use add-trait) are
// read-only to rules.
var nodeFields = map[string]kind{
	"name": kNullString, "description": kNullString, "driver": kString,
	"bios_interface": kString, "boot_interface": kString, "console_interface": kString,
	"deploy_interface": kString, "firmware_interface": kString, "inspect_interface": kString,
	"management_interface": kString, "network_interface": kString, "power_interface": kString,
	"raid_interface": kString, "rescue_interface": kString, "storage_interface": kString,
	"vendor_interface": kString,
	"driver_info":      kDict, "properties": kDict, "extra": kDict, "instance_info": kDict, "network_data": kDict,
	"resource_class": kNullString, "owner": kNullString, "lessee": kNullString,
	"automated_clean": kNullBool, "maintenance": kBool, "maintenance_reason": kNullString,
	"retired": kBool, "retired_reason": kNullString, "conductor_group": kString, "shard": kNullString,
}

// portFields are the port fields rules may change.
var portFields = map[string]kind{
	"name": kNullString, "pxe_enabled": kBool, "physical_network": kNullString,
	"extra": kDict, "local_link_connection": kDict, "is_smartnic": kBool,
}

// WritableNodeFields are the node fields rules may change, sorted.
func WritableNodeFields() []string {
	out := make([]string, 0, len(nodeFields))
	for k := range nodeFields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// splitPath is normalize_path: "/a/b" or "a.b".
func splitPath(raw any) ([]string, error) {
	p, ok := raw.(string)
	if !ok {
		return nil, typeErr("argument of type '%s' is not iterable", pyTypeName(raw))
	}
	if strings.Contains(p, "/") {
		return strings.Split(strings.Trim(p, "/"), "/"), nil
	}
	return strings.Split(p, "."), nil
}

// coerce converts v for a field of kind k as the object fields do.
func coerce(field string, k kind, v any) (any, error) {
	v = unwrap(v)
	switch k {
	case kString, kNullString:
		switch x := v.(type) {
		case nil:
			if k == kNullString {
				return nil, nil
			}
			return nil, &pyError{"ValueError", fmt.Sprintf("Field `%s' cannot be None", field)}
		case string:
			return x, nil
		case bool:
			return pyStr(x), nil
		}
		if _, ok := numberOf(v); ok {
			return pyStr(v), nil
		}
		return nil, &pyError{"ValueError", fmt.Sprintf("A string is required in field %s, not a %s", field, pyTypeName(v))}
	case kBool, kNullBool:
		switch x := v.(type) {
		case nil:
			if k == kNullBool {
				return nil, nil
			}
		case bool:
			return x, nil
		case string:
			if b, ok := pyrepr.BoolFromString(x); ok {
				return b, nil
			}
		}
		if n, ok := numberOf(v); ok {
			return !n.isZero(), nil
		}
		return nil, &pyError{"ValueError", fmt.Sprintf("Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", pyStr(v))}
	case kDict:
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
		return nil, &pyError{"ValueError", fmt.Sprintf("A dict is required in field %s, not a %s", field, pyTypeName(v))}
	}
	return v, nil
}

// zero is what deleting a field leaves.
func zero(k kind) any {
	switch k {
	case kString:
		return ""
	case kBool:
		return false
	case kDict:
		return map[string]any{}
	}
	return nil
}

// field returns the object's field and its kind; read-only fields are an
// error.
func field(o *object, writable map[string]kind, name string) (any, kind, error) {
	v, exists := o.fields[name]
	k, ok := writable[name]
	if !ok {
		if exists {
			return nil, 0, &pyError{"AttributeError", fmt.Sprintf("field '%s' of %s cannot be changed by a rule", name, o.class)}
		}
		return nil, 0, &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute %s", o.class, pyrepr.Quote(name))}
	}
	return v, k, nil
}

// walk descends dict keys below a field, creating missing dicts.
func walk(cur any, keys []string) (map[string]any, error) {
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'setdefault'", pyTypeName(cur))}
	}
	for _, k := range keys {
		next, has := m[k]
		if !has {
			n := map[string]any{}
			m[k] = n
			m = n
			continue
		}
		if m, ok = next.(map[string]any); !ok {
			return nil, &pyError{"AttributeError", fmt.Sprintf("'%s' object has no attribute 'setdefault'", pyTypeName(next))}
		}
	}
	return m, nil
}

// resolve splits the path and finds the object's field it starts at.
func resolve(o *object, writable map[string]kind, rawPath any) ([]string, any, kind, error) {
	parts, err := splitPath(rawPath)
	if err != nil {
		return nil, nil, 0, err
	}
	cur, k, err := field(o, writable, parts[0])
	return parts, cur, k, err
}

func setPath(o *object, writable map[string]kind, rawPath, value any) error {
	parts, cur, k, err := resolve(o, writable, rawPath)
	if err != nil {
		return err
	}
	if len(parts) == 1 {
		v, err := coerce(parts[0], k, value)
		if err != nil {
			return err
		}
		o.fields[parts[0]] = v
		return nil
	}
	if cur == nil && k == kDict {
		cur = map[string]any{}
		o.fields[parts[0]] = cur
	}
	parent, err := walk(cur, parts[1:len(parts)-1])
	if err != nil {
		return err
	}
	parent[parts[len(parts)-1]] = unwrap(value)
	return nil
}

func extendPath(o *object, writable map[string]kind, rawPath, value any, unique bool) error {
	parts, cur, _, err := resolve(o, writable, rawPath)
	if err != nil {
		return err
	}
	var parent map[string]any
	var list any = cur
	if len(parts) > 1 {
		if parent, err = walk(cur, parts[1:len(parts)-1]); err != nil {
			return err
		}
		last := parts[len(parts)-1]
		if _, has := parent[last]; !has {
			parent[last] = []any{}
		}
		list = parent[last]
	}
	l, ok := list.([]any)
	if !ok {
		return fmt.Errorf("Inspection rule action execution failed. Reason: Cannot extend non-list attribute %s with value %s", pyStr(rawPath), pyStr(value))
	}
	if !unique || !containsEqual(l, value) {
		l = append(l, unwrap(value))
	}
	if parent != nil {
		parent[parts[len(parts)-1]] = l
	} else {
		o.fields[parts[0]] = l
	}
	return nil
}

// delPath deletes a field (back to its empty value) or a key below it. A
// key that is not there is no error (Ironic's documented behaviour).
func delPath(o *object, writable map[string]kind, rawPath any) error {
	parts, cur, k, err := resolve(o, writable, rawPath)
	if err != nil {
		return err
	}
	if len(parts) == 1 {
		o.fields[parts[0]] = zero(k)
		return nil
	}
	for _, p := range parts[1 : len(parts)-1] {
		switch m := cur.(type) {
		case map[string]any:
			next, has := m[p]
			if !has {
				return nil
			}
			cur = next
		case nil:
			return nil
		default:
			return typeErr("'%s' object is not subscriptable", pyTypeName(cur))
		}
	}
	switch m := cur.(type) {
	case map[string]any:
		delete(m, parts[len(parts)-1])
	case nil:
	default:
		return typeErr("'%s' object doesn't support item deletion", pyTypeName(cur))
	}
	return nil
}
