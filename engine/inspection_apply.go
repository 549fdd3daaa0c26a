package engine

import (
	"context"
	"fmt"
	"strings"

	"castiron/engine/inspectrules"
	"castiron/storage"
)

// inspectedNode is the second half of every inspection (known and
// discovered nodes alike), Ironic's continue_inspection after its hooks:
// the properties the inventory gives, then the inspection rules, written
// in one node update; ports the rules changed are written before it. It
// returns the plugin data as the rules left it, to be stored with the
// inventory.
//
// A rule that fails ("fail", a bad path, an unknown port) keeps what the
// earlier actions changed, as Ironic saves after each action; the error
// message is Ironic's last_error.
func (c *Conductor) inspectedNode(ctx context.Context, uuid string, in Inspection, overwrite bool) (map[string]any, error) {
	n, err := c.store.GetNode(ctx, uuid)
	if err != nil {
		return nil, err
	}
	work := *n
	work.Properties = cloneObject(n.Properties)
	setInspectedProperties(&work, in.Data.Inventory, overwrite)
	before, err := ruleNodeDoc(&work)
	if err != nil {
		return nil, err
	}
	after, err := ruleNodeDoc(&work)
	if err != nil {
		return nil, err
	}
	ports, err := c.store.ListPorts(ctx, storage.PortQuery{NodeUUID: &uuid})
	if err != nil {
		return nil, err
	}
	portsBefore := make([]map[string]any, len(ports))
	portsAfter := make([]map[string]any, len(ports))
	for i, p := range ports {
		if portsBefore[i], err = rulePortDoc(p); err != nil {
			return nil, err
		}
		portsAfter[i], _ = rulePortDoc(p)
	}
	inv, err := inspectrules.Normalize(in.Inventory)
	if err != nil {
		return nil, err
	}
	hooked := make(map[string]any, len(in.PluginData)+6)
	for k, v := range in.PluginData {
		hooked[k] = v
	}
	inspectionHooks(&work, in, hooked)
	pd, err := inspectrules.Normalize(hooked)
	if err != nil {
		return nil, err
	}
	target := &inspectrules.Target{Node: after, Ports: portsAfter, Inventory: inv.(map[string]any), PluginData: pd.(map[string]any)}
	rules, err := c.inspectionRules(ctx)
	if err != nil {
		return nil, err
	}
	log := c.log.With("node", uuid, "state", n.ProvisionState, "verb", "inspection-rules")
	applied, ruleErr := inspectrules.Apply(ctx, rules, target, inspectrules.Options{MaskSecrets: c.cfg.RulesMaskSecrets, Log: log})

	for i, p := range ports {
		changed, err := applyPortChanges(p, portsBefore[i], portsAfter[i])
		if err != nil {
			return nil, err
		}
		if !changed {
			continue
		}
		if _, err := c.store.UpdatePort(ctx, p.UUID, func(cur *storage.Port) error {
			_, err := applyPortChanges(cur, portsBefore[i], portsAfter[i])
			return err
		}); err != nil {
			return nil, fmt.Errorf("port %s: %w", p.Address, err)
		}
	}
	_, err = c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
		setInspectedProperties(cur, in.Data.Inventory, overwrite)
		oldDriver := cur.Driver
		changed, err := applyRuleChanges(cur, before, after)
		if err != nil {
			return nil, err
		}
		if cur.Driver != oldDriver {
			hw, ok := c.hw.Get(cur.Driver)
			if !ok {
				return nil, unknownDriver(cur.Driver, cur.ConductorGroup)
			}
			// A new driver starts from its default interfaces unless the
			// rules chose some.
			reset := true
			for _, f := range changed {
				reset = reset && !strings.HasSuffix(f, "_interface")
			}
			if err := fillInterfaces(cur, hw, reset); err != nil {
				return nil, err
			}
		}
		if cur.ConductorGroup != n.ConductorGroup && cur.ConductorGroup != c.cfg.ConductorGroup {
			return nil, fmt.Errorf("No conductor service registered which supports conductor group %q.", cur.ConductorGroup)
		}
		ensureMaps(cur)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	c.recordRules(ctx, n, applied)
	if ruleErr != nil {
		return nil, ruleErr
	}
	if err := c.store.SetIdentities(ctx, uuid, identities(in.Data.Inventory)); err != nil {
		c.log.Warn("recording the hardware's identities failed", "node", uuid, "err", err)
	}
	plugin := target.PluginData
	delete(plugin, "logs") // Ironic keeps the ramdisk logs elsewhere
	return plugin, nil
}

// recordRules puts each applied rule into the node's history: its UUID,
// description and what each action touched (never values: a rule may set
// passwords).
func (c *Conductor) recordRules(ctx context.Context, n *storage.Node, applied []inspectrules.Applied) {
	for _, a := range applied {
		what := "no actions"
		if len(a.Actions) > 0 {
			what = strings.Join(a.Actions, "; ")
		}
		desc := ""
		if a.Rule.Description != nil && *a.Rule.Description != "" {
			desc = fmt.Sprintf(" (%s)", *a.Rule.Description)
		}
		kind := "rule"
		if a.Rule.BuiltIn {
			kind = "built-in rule"
		}
		e := &storage.Event{
			NodeUUID: n.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
			EventType: "inspection", Severity: "INFO", User: "conductor", Verb: "inspection-rule",
			Event:     fmt.Sprintf("Inspection %s %s%s applied: %s", kind, a.Rule.UUID, desc, what),
			FromState: n.ProvisionState, ToState: n.ProvisionState,
		}
		if err := c.store.AddEvent(ctx, e); err != nil {
			c.log.WarnContext(ctx, "recording an applied inspection rule failed", "node", n.UUID, "rule", a.Rule.UUID, "err", err)
		}
	}
}

func cloneObject(m storage.JSONObject) storage.JSONObject {
	out := make(storage.JSONObject, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
