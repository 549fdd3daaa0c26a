package httpapi

import (
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/storage"
)

// settable is a node field an operator may set on create or by PATCH.
type settable struct {
	minMinor int
	onCreate bool // accepted in POST /v1/nodes
	onPatch  bool // accepted in PATCH
	set      func(n *storage.Node, v any) error
}

func typeErr(field string, v any, want string) error {
	return errInvalid("Invalid value for %s: %s is not of type '%s'", field, pyRepr(v), want)
}

func setStrPtr(field string, dst func(n *storage.Node) **string, maxLen int) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		if v == nil {
			*dst(n) = nil
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return typeErr(field, v, "string")
		}
		if maxLen > 0 && len(s) > maxLen {
			return errInvalid("Invalid value for %s: '%s' is too long (maximum %d characters)", field, s, maxLen)
		}
		*dst(n) = &s
		return nil
	}
}

func setBoolField(field string, dst func(n *storage.Node) *bool) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		switch t := v.(type) {
		case nil:
			*dst(n) = false
		case bool:
			*dst(n) = t
		case string:
			b, err := parseBoolString(t)
			if err != nil {
				return typeErr(field, v, "boolean")
			}
			*dst(n) = b
		default:
			return typeErr(field, v, "boolean")
		}
		return nil
	}
}

func parseBoolString(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on", "t", "y":
		return true, nil
	case "false", "0", "no", "off", "f", "n":
		return false, nil
	}
	return false, errInvalid("Invalid boolean %q", s)
}

func setObject(field string, dst func(n *storage.Node) *storage.JSONObject) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		if v == nil {
			*dst(n) = storage.JSONObject{}
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return typeErr(field, v, "object")
		}
		*dst(n) = m
		return nil
	}
}

func setInterface(kind string) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		s, ok := v.(string)
		if v != nil && !ok {
			return typeErr(kind+"_interface", v, "string")
		}
		*engine.InterfaceField(n, kind) = s // "" = default of the hardware type
		return nil
	}
}

func setUUIDPtr(field string, dst func(n *storage.Node) **string) func(*storage.Node, any) error {
	return func(n *storage.Node, v any) error {
		if v == nil {
			*dst(n) = nil
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return typeErr(field, v, "string")
		}
		if _, err := uuid.Parse(s); err != nil {
			return errInvalid("Expected a UUID for %s but received %s.", field, s)
		}
		s = strings.ToLower(s)
		*dst(n) = &s
		return nil
	}
}

// nameRE is RFC 3986 unreserved characters (API >= 1.10).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`)

var nodeSettable = map[string]settable{
	"automated_clean": {47, true, true, func(n *storage.Node, v any) error {
		if v == nil {
			n.AutomatedClean = nil
			return nil
		}
		var b bool
		if err := setBoolField("automated_clean", func(*storage.Node) *bool { return &b })(n, v); err != nil {
			return err
		}
		n.AutomatedClean = &b
		return nil
	}},
	"chassis_uuid":    {1, true, true, setUUIDPtr("chassis_uuid", func(n *storage.Node) **string { return &n.ChassisUUID })},
	"conductor_group": {46, true, true, setConductorGroup},
	"description":     {51, true, true, setStrPtr("description", func(n *storage.Node) **string { return &n.Description }, 4096)},
	"driver": {1, true, true, func(n *storage.Node, v any) error {
		s, ok := v.(string)
		if !ok || s == "" {
			return typeErr("driver", v, "string")
		}
		n.Driver = s
		return nil
	}},
	"driver_info":        {1, true, true, setObject("driver_info", func(n *storage.Node) *storage.JSONObject { return &n.DriverInfo })},
	"extra":              {1, true, true, setObject("extra", func(n *storage.Node) *storage.JSONObject { return &n.Extra })},
	"instance_info":      {1, true, true, setObject("instance_info", func(n *storage.Node) *storage.JSONObject { return &n.InstanceInfo })},
	"instance_uuid":      {1, true, true, setUUIDPtr("instance_uuid", func(n *storage.Node) **string { return &n.InstanceUUID })},
	"lessee":             {65, true, true, setStrPtr("lessee", func(n *storage.Node) **string { return &n.Lessee }, 255)},
	"maintenance":        {1, false, true, setBoolField("maintenance", func(n *storage.Node) *bool { return &n.Maintenance })},
	"name":               {5, true, true, setName},
	"network_data":       {66, true, true, setObject("network_data", func(n *storage.Node) *storage.JSONObject { return &n.NetworkData })},
	"owner":              {50, true, true, setStrPtr("owner", func(n *storage.Node) **string { return &n.Owner }, 255)},
	"parent_node":        {83, true, true, setStrPtr("parent_node", func(n *storage.Node) **string { return &n.ParentNode }, 255)},
	"properties":         {1, true, true, setObject("properties", func(n *storage.Node) *storage.JSONObject { return &n.Properties })},
	"protected":          {48, true, true, setBoolField("protected", func(n *storage.Node) *bool { return &n.Protected })},
	"protected_reason":   {48, true, true, setStrPtr("protected_reason", func(n *storage.Node) **string { return &n.ProtectedReason }, 255)},
	"resource_class":     {21, true, true, setStrPtr("resource_class", func(n *storage.Node) **string { return &n.ResourceClass }, 80)},
	"retired":            {61, true, true, setBoolField("retired", func(n *storage.Node) *bool { return &n.Retired })},
	"retired_reason":     {61, true, true, setStrPtr("retired_reason", func(n *storage.Node) **string { return &n.RetiredReason }, 255)},
	"shard":              {82, true, true, setStrPtr("shard", func(n *storage.Node) **string { return &n.Shard }, 255)},
	"uuid":               {1, true, false, nil}, // handled by create
	"network_interface":  {20, true, true, setInterface("network")},
	"storage_interface":  {33, true, true, setInterface("storage")},
	"rescue_interface":   {38, true, true, setInterface("rescue")},
	"bios_interface":     {40, true, true, setInterface("bios")},
	"firmware_interface": {86, true, true, setInterface("firmware")},
}

func init() {
	for _, k := range []string{"boot", "console", "deploy", "inspect", "management", "power", "raid", "vendor"} {
		nodeSettable[k+"_interface"] = settable{31, true, true, setInterface(k)}
	}
}

func setConductorGroup(n *storage.Node, v any) error {
	if v == nil {
		n.ConductorGroup = ""
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return typeErr("conductor_group", v, "string")
	}
	if len(s) > 255 || (s != "" && !regexp.MustCompile(`^[a-zA-Z0-9_\-\.]*$`).MatchString(s)) {
		return errInvalid("Invalid conductor_group %q: it must be at most 255 characters of a-z, 0-9, _, - and .", s)
	}
	n.ConductorGroup = strings.ToLower(s)
	return nil
}

func setName(n *storage.Node, v any) error {
	if v == nil {
		n.Name = nil
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return typeErr("name", v, "string")
	}
	if len(s) > 255 || !nameRE.MatchString(s) {
		return errInvalid("Cannot use name %s: a node name may only contain the RFC 3986 unreserved characters A-Z a-z 0-9 - . _ ~ (at most 255)", s)
	}
	if _, err := uuid.Parse(s); err == nil {
		return errInvalid("Cannot use name %s: it is a UUID.", s)
	}
	n.Name = &s
	return nil
}

// patchableAt lists the fields a PATCH may touch at ver, sorted (for
// Ironic's "Only the following can be updated" message).
func patchableAt(ver Version) []string {
	var out []string
	for name, s := range nodeSettable {
		if s.onPatch && ver.AtLeast(s.minMinor) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
