package steps

import (
	"errors"
	"fmt"
	"strings"

	"castiron/ramdisk/protocol"
)

func argString(args map[string]any, key string) (string, error) {
	switch v := args[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("argument %s must be a string, not %T", key, args[key])
}

func argBool(args map[string]any, key string, def bool) (bool, error) {
	switch v := args[key].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		switch strings.ToLower(v) {
		case "true", "1", "yes", "on":
			return true, nil
		case "false", "0", "no", "off":
			return false, nil
		}
	}
	return false, fmt.Errorf("argument %s must be a Boolean, not %v", key, args[key])
}

// targetDevices: the "devices" argument, else every disk of the inventory.
func targetDevices(args map[string]any, inv *protocol.Inventory) ([]string, error) {
	switch v := args["devices"].(type) {
	case nil:
	case []string:
		return v, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, d := range v {
			s, ok := d.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("argument devices must list device paths, got %v", d)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("argument devices must be a list of device paths, not %T", v)
	}
	if inv == nil {
		return nil, errors.New("no inventory: the disks to erase are unknown")
	}
	out := make([]string, 0, len(inv.Disks))
	for _, d := range inv.Disks {
		out = append(out, d.Name)
	}
	return out, nil
}
