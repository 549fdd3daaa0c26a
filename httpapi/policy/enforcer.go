package policy

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Default is one of Ironic's rules: its name, check string, the token
// scopes it accepts (nil: any) and what it guards.
type Default struct {
	Name, Check string
	Scope       []string
	Description string
}

// Rule is an effective rule: a default, perhaps overridden by the policy
// file, or a helper rule the file defines.
type Rule struct {
	Default
	// Overridden is set when the policy file gave the check string.
	Overridden bool
	check      check
}

// Creds are a caller's credentials as oslo.context's to_policy_values
// gives them to the rules.
type Creds struct {
	UserID, UserName, UserDomainID       string
	ProjectID, ProjectName, ProjectDomID string
	DomainID                             string
	// System is a system-scoped token (system_scope:all).
	System bool
	Roles  []string
}

// Scope is the token's scope as oslo.policy's enforce_scope sees it.
func (c Creds) Scope() string {
	switch {
	case c.System:
		return "system"
	case c.DomainID != "":
		return "domain"
	}
	return "project"
}

// none is Python's None for an empty credential.
func none(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// values are the credentials as the rules see them (the creds dict), and
// the base of every target (Ironic's target is the creds dict plus the
// object's fields).
func (c Creds) values() map[string]any {
	system := any(nil)
	if c.System {
		system = "all"
	}
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	return map[string]any{
		"user_id": none(c.UserID), "user_domain_id": none(c.UserDomainID),
		"project_id": none(c.ProjectID), "project_name": none(c.ProjectName),
		"project_domain_id": none(c.ProjectDomID), "domain_id": none(c.DomainID),
		"system_scope": system, "roles": roles,
		"is_admin_project": true, "is_public_api": false,
	}
}

// Target is what a rule is checked against beyond the credentials:
// "node.owner", "node.lessee", "allocation.owner", "runbook.owner".
// A key given with a nil value reads as Python's None.
type Target map[string]any

// Denied is a refusal: the rule, and whether it was the token's scope
// that the rule does not accept.
type Denied struct {
	Rule  string
	Scope bool
}

func (d *Denied) Error() string {
	if d.Scope {
		return fmt.Sprintf("%s does not accept a token of this scope", d.Rule)
	}
	return "Access was denied to the following resource: " + d.Rule
}

// Enforcer holds the effective rules.
type Enforcer struct {
	rules map[string]*Rule
	order []string
}

// New returns the enforcer of Ironic's defaults overridden by overrides
// (rule name -> check string). An override of a name that is neither a
// default nor referred to by another rule (rule:NAME), a check string that
// does not parse, and a rule:NAME no rule defines are errors naming the
// rule.
func New(overrides map[string]string) (*Enforcer, error) {
	e := &Enforcer{rules: map[string]*Rule{}}
	for _, d := range Defaults {
		c, err := Parse(d.Check)
		if err != nil {
			return nil, fmt.Errorf("default rule %s: %w", d.Name, err)
		}
		e.rules[d.Name] = &Rule{Default: d, check: c}
		e.order = append(e.order, d.Name)
	}
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	var helpers []string
	for _, n := range names {
		c, err := Parse(overrides[n])
		if err != nil {
			errs = append(errs, fmt.Errorf("rule %s: %w", n, err))
			continue
		}
		if r, ok := e.rules[n]; ok {
			r.Check, r.check, r.Overridden = overrides[n], c, true
			continue
		}
		e.rules[n] = &Rule{Default: Default{Name: n, Check: overrides[n], Description: "defined by the policy file"}, Overridden: true, check: c}
		helpers = append(helpers, n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	referred := map[string]bool{}
	for _, n := range append(slices.Clone(e.order), helpers...) {
		for _, ref := range refs(e.rules[n].check, nil) {
			referred[ref] = true
			if _, ok := e.rules[ref]; !ok {
				errs = append(errs, fmt.Errorf("rule %s: rule:%s is not defined", n, ref))
			}
		}
	}
	for _, n := range helpers {
		if !referred[n] {
			errs = append(errs, fmt.Errorf("rule %s: unknown rule name (not one of Ironic's rules, and no rule refers to it)", n))
		}
	}
	for _, n := range append(slices.Clone(e.order), helpers...) {
		if loops(e, n, n, map[string]bool{}) {
			errs = append(errs, fmt.Errorf("rule %s: refers to itself through rule: checks", n))
		}
	}
	e.order = append(e.order, helpers...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// loops reports whether rule at reaches start again.
func loops(e *Enforcer, start, at string, seen map[string]bool) bool {
	r, ok := e.rules[at]
	if !ok {
		return false
	}
	for _, ref := range refs(r.check, nil) {
		if ref == start {
			return true
		}
		if !seen[ref] {
			seen[ref] = true
			if loops(e, start, ref, seen) {
				return true
			}
		}
	}
	return false
}

// Load reads an oslo.policy YAML file (rule name: check string) and
// returns the enforcer of the defaults it overrides; path "" is the
// defaults alone.
func Load(path string) (*Enforcer, error) {
	if path == "" {
		return New(nil)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	overrides := map[string]string{}
	var errs []error
	for k, v := range doc {
		s, ok := v.(string)
		if !ok {
			if v != nil {
				errs = append(errs, fmt.Errorf("rule %s: want a check string, got %v", k, v))
				continue
			}
			s = "" // "name:" alone is an empty rule: everyone
		}
		overrides[k] = s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	e, err := New(overrides)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return e, nil
}

// Rules are the effective rules in Ironic's order, the file's own helper
// rules last.
func (e *Enforcer) Rules() []Rule {
	out := make([]Rule, 0, len(e.order))
	for _, n := range e.order {
		out = append(out, *e.rules[n])
	}
	return out
}

// Known reports whether name is a rule.
func (e *Enforcer) Known(name string) bool {
	_, ok := e.rules[name]
	return ok
}

// Authorize checks rule for c against target (nil: the credentials
// alone): nil when allowed, else a *Denied. An unknown rule is refused
// (a programming error the route table's test catches).
func (e *Enforcer) Authorize(rule string, target Target, c Creds) error {
	r, ok := e.rules[rule]
	if !ok {
		return &Denied{Rule: rule}
	}
	if r.Scope != nil && !slices.Contains(r.Scope, c.Scope()) {
		return &Denied{Rule: rule, Scope: true}
	}
	creds := c.values()
	t := c.values()
	for k, v := range target {
		t[k] = v
	}
	if !r.check.eval(t, creds, e, 0) {
		return &Denied{Rule: rule}
	}
	return nil
}

// Never reports whether rule refuses every caller (its check is "!", as
// show_password's default): callers may skip evaluating it.
func (e *Enforcer) Never(rule string) bool {
	r, ok := e.rules[rule]
	if !ok {
		return true
	}
	_, never := r.check.(falseCheck)
	return never
}

// Allowed is Authorize as a boolean (oslo.policy's enforce without raise).
func (e *Enforcer) Allowed(rule string, target Target, c Creds) bool {
	return e.Authorize(rule, target, c) == nil
}

// Format prints the rules as an oslo.policy YAML file: the effective
// check string of each, its description and scopes as comments.
func (e *Enforcer) Format() string {
	var b strings.Builder
	for _, r := range e.Rules() {
		fmt.Fprintf(&b, "# %s\n", r.Description)
		if r.Scope != nil {
			fmt.Fprintf(&b, "# scope: %s\n", strings.Join(r.Scope, ", "))
		}
		if r.Overridden {
			b.WriteString("# (from the policy file)\n")
		}
		q, _ := yaml.Marshal(map[string]string{r.Name: r.Check})
		b.Write(q)
		b.WriteString("\n")
	}
	return b.String()
}
