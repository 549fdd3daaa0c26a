package engine

import (
	"slices"
	"testing"

	"castiron/engine/inspectrules"
)

// The fields the evaluator lets rules write are the ones engine writes back.
func TestRuleFieldsAgree(t *testing.T) {
	var ours []string
	for _, f := range ruleNodeFields {
		ours = append(ours, f.name)
	}
	slices.Sort(ours)
	if theirs := inspectrules.WritableNodeFields(); !slices.Equal(ours, theirs) {
		t.Errorf("engine writes %v, rules may set %v", ours, theirs)
	}
}
