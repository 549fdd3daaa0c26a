// Package policy is Ironic's authorization policy: the oslo.policy rule
// language subset Ironic's defaults use, Ironic's default rules as data
// (defaults.go), an oslo.policy YAML file that overrides them by name, and
// the enforcer that checks a caller's credentials against a rule and a
// target (the node's owner and lessee, an allocation's or runbook's owner).
//
// Semantics are oslo.policy's with enforce_scope and enforce_new_defaults
// set: a rule accepts only the token scopes Ironic declares for it, and
// only the new (secure RBAC) check strings apply.
//
// Hand-written rather than a library: there is no maintained Go
// implementation of oslo.policy's language, and the subset is small.
package policy
