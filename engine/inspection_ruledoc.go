package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"castiron/engine/inspectrules"
	"castiron/storage"
)

// The node and its ports as inspection rules see them: field maps under
// the API's field names ({node.driver_info[ipmi_address]}), and back.

// ruleField is one node field a rule can change.
type ruleField struct {
	name string
	get  func(n *storage.Node) any
	set  func(n *storage.Node, v any) error
}

func strField(name string, p func(*storage.Node) *string) ruleField {
	return ruleField{name, func(n *storage.Node) any { return *p(n) }, func(n *storage.Node, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s must be a string", name)
		}
		*p(n) = s
		return nil
	}}
}

func nullStrField(name string, p func(*storage.Node) **string) ruleField {
	return ruleField{name, func(n *storage.Node) any { return strOrNilPtr(*p(n)) }, func(n *storage.Node, v any) error {
		switch s := v.(type) {
		case nil:
			*p(n) = nil
		case string:
			*p(n) = &s
		default:
			return fmt.Errorf("%s must be a string or null", name)
		}
		return nil
	}}
}

func boolField(name string, p func(*storage.Node) *bool) ruleField {
	return ruleField{name, func(n *storage.Node) any { return *p(n) }, func(n *storage.Node, v any) error {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%s must be a boolean", name)
		}
		*p(n) = b
		return nil
	}}
}

func dictField(name string, p func(*storage.Node) *storage.JSONObject) ruleField {
	return ruleField{name, func(n *storage.Node) any { return *p(n) }, func(n *storage.Node, v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be an object", name)
		}
		*p(n) = PlainNumbers(m).(map[string]any)
		return nil
	}}
}

func strOrNilPtr(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// ruleNodeFields are the node fields rules may write (inspectrules'
// writable set; TestRuleFieldsAgree keeps the two lists equal).
var ruleNodeFields = func() []ruleField {
	f := []ruleField{
		nullStrField("name", func(n *storage.Node) **string { return &n.Name }),
		nullStrField("description", func(n *storage.Node) **string { return &n.Description }),
		strField("driver", func(n *storage.Node) *string { return &n.Driver }),
		dictField("driver_info", func(n *storage.Node) *storage.JSONObject { return &n.DriverInfo }),
		dictField("properties", func(n *storage.Node) *storage.JSONObject { return &n.Properties }),
		dictField("extra", func(n *storage.Node) *storage.JSONObject { return &n.Extra }),
		dictField("instance_info", func(n *storage.Node) *storage.JSONObject { return &n.InstanceInfo }),
		dictField("network_data", func(n *storage.Node) *storage.JSONObject { return &n.NetworkData }),
		nullStrField("resource_class", func(n *storage.Node) **string { return &n.ResourceClass }),
		nullStrField("owner", func(n *storage.Node) **string { return &n.Owner }),
		nullStrField("lessee", func(n *storage.Node) **string { return &n.Lessee }),
		{"automated_clean", func(n *storage.Node) any {
			if n.AutomatedClean == nil {
				return nil
			}
			return *n.AutomatedClean
		}, func(n *storage.Node, v any) error {
			switch b := v.(type) {
			case nil:
				n.AutomatedClean = nil
			case bool:
				n.AutomatedClean = &b
			default:
				return fmt.Errorf("automated_clean must be a boolean or null")
			}
			return nil
		}},
		boolField("maintenance", func(n *storage.Node) *bool { return &n.Maintenance }),
		nullStrField("maintenance_reason", func(n *storage.Node) **string { return &n.MaintenanceReason }),
		boolField("retired", func(n *storage.Node) *bool { return &n.Retired }),
		nullStrField("retired_reason", func(n *storage.Node) **string { return &n.RetiredReason }),
		strField("conductor_group", func(n *storage.Node) *string { return &n.ConductorGroup }),
		nullStrField("shard", func(n *storage.Node) **string { return &n.Shard }),
	}
	for _, kind := range InterfaceKinds() {
		f = append(f, strField(kind+"_interface", func(n *storage.Node) *string { return InterfaceField(n, kind) }))
	}
	return f
}()

// ruleNodeDoc is the node's field map for rules: every field (read-only
// ones included), numbers as json.Number. The stored inspection data and
// the agent token are left out of driver_internal_info.
func ruleNodeDoc(n *storage.Node) (map[string]any, error) {
	dii := map[string]any{}
	for k, v := range n.DriverInternalInfo {
		if k != InventoryKey && k != diiAgentToken {
			dii[k] = v
		}
	}
	doc := map[string]any{
		"id": n.ID, "uuid": n.UUID, "provision_state": n.ProvisionState, "target_provision_state": strOrNilPtr(n.TargetProvisionState),
		"power_state": strOrNilPtr(n.PowerState), "target_power_state": strOrNilPtr(n.TargetPowerState),
		"last_error": strOrNilPtr(n.LastError), "reservation": strOrNilPtr(n.Reservation), "fault": strOrNilPtr(n.Fault),
		"console_enabled": n.ConsoleEnabled, "instance_uuid": strOrNilPtr(n.InstanceUUID), "chassis_uuid": strOrNilPtr(n.ChassisUUID),
		"allocation_uuid": strOrNilPtr(n.AllocationUUID), "protected": n.Protected, "protected_reason": strOrNilPtr(n.ProtectedReason),
		"boot_mode": strOrNilPtr(n.BootMode), "parent_node": strOrNilPtr(n.ParentNode),
		"driver_internal_info": dii, "clean_step": n.CleanStep, "deploy_step": n.DeployStep, "service_step": n.ServiceStep,
		"raid_config": n.RAIDConfig, "target_raid_config": n.TargetRAIDConfig, "traits": n.Traits,
		"created_at": n.CreatedAt.Format(time.RFC3339Nano),
	}
	if n.SecureBoot != nil {
		doc["secure_boot"] = *n.SecureBoot
	} else {
		doc["secure_boot"] = nil
	}
	for _, f := range ruleNodeFields {
		doc[f.name] = f.get(n)
	}
	v, err := inspectrules.Normalize(doc)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// applyRuleChanges writes into n the writable fields that differ between
// the node maps before and after the rules ran, and the traits.
func applyRuleChanges(n *storage.Node, before, after map[string]any) ([]string, error) {
	var changed []string
	for _, f := range ruleNodeFields {
		if reflect.DeepEqual(before[f.name], after[f.name]) {
			continue
		}
		if err := f.set(n, PlainNumbers(after[f.name])); err != nil {
			return changed, err
		}
		changed = append(changed, f.name)
	}
	if !reflect.DeepEqual(before["traits"], after["traits"]) {
		list, _ := after["traits"].([]any)
		traits := make([]string, 0, len(list))
		for _, t := range list {
			if s, ok := t.(string); ok {
				traits = append(traits, s)
			}
		}
		if err := checkTraits(traits); err != nil {
			return changed, err
		}
		n.Traits = traits
		changed = append(changed, "traits")
	}
	return changed, nil
}

// rulePortDoc is a port's field map for rules.
func rulePortDoc(p *storage.Port) (map[string]any, error) {
	v, err := inspectrules.Normalize(map[string]any{
		"id": p.ID, "uuid": p.UUID, "address": p.Address, "node_uuid": p.NodeUUID, "name": strOrNilPtr(p.Name),
		"pxe_enabled": p.PXEEnabled, "physical_network": strOrNilPtr(p.PhysicalNetwork), "extra": p.Extra,
		"local_link_connection": p.LocalLinkConnection, "is_smartnic": p.IsSmartNIC, "internal_info": p.InternalInfo,
		"portgroup_uuid": strOrNilPtr(p.PortgroupUUID),
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// applyPortChanges writes the changed writable port fields into p.
func applyPortChanges(p *storage.Port, before, after map[string]any) (bool, error) {
	changed := false
	for _, name := range []string{"name", "pxe_enabled", "physical_network", "extra", "local_link_connection", "is_smartnic"} {
		if reflect.DeepEqual(before[name], after[name]) {
			continue
		}
		changed = true
		v := PlainNumbers(after[name])
		var ok bool
		switch name {
		case "name", "physical_network":
			var s *string
			if str, isStr := v.(string); isStr {
				s, ok = &str, true
			} else {
				ok = v == nil
			}
			if name == "name" {
				p.Name = s
			} else {
				p.PhysicalNetwork = s
			}
		case "pxe_enabled":
			p.PXEEnabled, ok = v.(bool)
		case "is_smartnic":
			p.IsSmartNIC, ok = v.(bool)
		case "extra":
			p.Extra, ok = v.(map[string]any)
		case "local_link_connection":
			p.LocalLinkConnection, ok = v.(map[string]any)
		}
		if !ok {
			return changed, fmt.Errorf("port %s: %s cannot be %v", p.UUID, name, v)
		}
	}
	return changed, nil
}

// PlainNumbers turns json.Number into int64 (integral) or float64, the
// numbers the rest of castiron stores and reads.
func PlainNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = PlainNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = PlainNumbers(e)
		}
		return out
	}
	return v
}
