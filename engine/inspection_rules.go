package engine

import (
	"context"
	"errors"

	"castiron/engine/inspectrules"
	"castiron/fault"
	"castiron/storage"
)

// Inspection rules (API 1.96) hold no node state; the API checks their
// shape against Ironic's schema, these check their operations and write
// them, and applyRules (inspection_apply.go) runs them after every
// inspection together with the built-in rules of Config.BuiltInRules.

// ruleOf is the evaluator's view of a stored rule; its operation
// documents are shared, so Validate's normalization lands in r.
func ruleOf(r *storage.InspectionRule) *inspectrules.Rule {
	return &inspectrules.Rule{
		UUID: r.UUID, Description: r.Description, Priority: r.Priority, Sensitive: r.Sensitive,
		Phase: r.Phase, Conditions: r.Conditions, Actions: r.Actions,
	}
}

// checkRule is Ironic's validate_rule after the schema.
func checkRule(r *storage.InspectionRule) error {
	ir := ruleOf(r)
	if err := inspectrules.Validate(ir); err != nil {
		var ve *inspectrules.ValidationError
		if errors.As(err, &ve) {
			return fault.New(fault.Invalid, "%s", ve.Msg)
		}
		return err
	}
	r.Phase = ir.Phase
	return nil
}

// CreateInspectionRule checks and stores a new rule.
func (c *Conductor) CreateInspectionRule(ctx context.Context, r *storage.InspectionRule) error {
	if err := checkRule(r); err != nil {
		return err
	}
	r.CreatedAt = c.now()
	if err := c.store.CreateInspectionRule(ctx, r); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "inspection rule created", "verb", "inspection-rule-create", "rule", r.UUID, "priority", r.Priority)
	return nil
}

// UpdateInspectionRule applies change to the rule atomically and checks
// the result.
func (c *Conductor) UpdateInspectionRule(ctx context.Context, uuid string, change func(r *storage.InspectionRule) error) (*storage.InspectionRule, error) {
	r, err := c.store.UpdateInspectionRule(ctx, uuid, func(r *storage.InspectionRule) error {
		if err := change(r); err != nil {
			return err
		}
		return checkRule(r)
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "inspection rule updated", "verb", "inspection-rule-update", "rule", r.UUID)
	return r, nil
}

// DeleteInspectionRule removes a rule.
func (c *Conductor) DeleteInspectionRule(ctx context.Context, uuid string) error {
	if err := c.store.DeleteInspectionRule(ctx, uuid); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "inspection rule deleted", "verb", "inspection-rule-delete", "rule", uuid)
	return nil
}

// DeleteAllInspectionRules is DELETE /v1/inspection_rules (the api-ref's
// "Delete All Inspection Rules"): every stored rule goes; the built-in ones
// (Config.BuiltInRules) are not stored and stay.
func (c *Conductor) DeleteAllInspectionRules(ctx context.Context) error {
	rules, err := c.store.ListInspectionRules(ctx, storage.InspectionRuleQuery{})
	if err != nil {
		return err
	}
	for _, r := range rules {
		if err := c.store.DeleteInspectionRule(ctx, r.UUID); err != nil && !fault.Is(err, fault.NotFound) {
			return err
		}
	}
	c.log.InfoContext(ctx, "inspection rules deleted", "verb", "inspection-rule-delete-all", "count", len(rules))
	return nil
}

// inspectionRules are the rules of the main phase: the stored ones (in
// creation order), then the built-in ones.
func (c *Conductor) inspectionRules(ctx context.Context) ([]*inspectrules.Rule, error) {
	main := inspectrules.PhaseMain
	stored, err := c.store.ListInspectionRules(ctx, storage.InspectionRuleQuery{Phase: &main})
	if err != nil {
		return nil, err
	}
	rules := make([]*inspectrules.Rule, 0, len(stored)+len(c.cfg.BuiltInRules))
	for _, r := range stored {
		rules = append(rules, ruleOf(r))
	}
	return append(rules, c.cfg.BuiltInRules...), nil
}
