package storage

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func TestInspectionRules(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)

	full := &InspectionRule{
		UUID: uuid.NewString(), Description: ptr("BMC credentials"), Priority: 100, Sensitive: true, Phase: "main",
		Conditions: []map[string]any{{"op": "contains", "args": map[string]any{"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}}},
		Actions: []map[string]any{{"op": "set-attribute", "args": map[string]any{"path": "/driver_info/ipmi_port", "value": json.Number("623")},
			"loop": []any{json.Number("1.5")}}},
		CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreateInspectionRule, full)
	wantStored(t, s.GetInspectionRule, full, full.UUID)
	minimal := &InspectionRule{Actions: []map[string]any{{"op": "log", "args": map[string]any{"msg": "x"}}}}
	mustCreate(t, s.CreateInspectionRule, minimal)
	wantStored(t, s.GetInspectionRule, minimal, minimal.UUID)
	if minimal.Phase != "main" || minimal.Conditions == nil {
		t.Fatalf("minimal round trip: %+v", minimal)
	}
	wantUUIDRefusals(t, "inspection_rules", s.CreateInspectionRule, s.GetInspectionRule,
		&InspectionRule{UUID: full.UUID}, &InspectionRule{UUID: "not-a-uuid"})

	list, err := s.ListInspectionRules(ctx, InspectionRuleQuery{Page: Page{SortKey: "priority", SortDir: Desc}})
	if err != nil || len(list) != 2 || list[0].UUID != full.UUID {
		t.Fatalf("list by priority: %v %v", list, err)
	}
	other := "other"
	if list, err := s.ListInspectionRules(ctx, InspectionRuleQuery{Phase: &other}); err != nil || len(list) != 0 {
		t.Fatalf("phase filter: %v %v", list, err)
	}
	if _, err := s.ListInspectionRules(ctx, InspectionRuleQuery{Page: Page{SortKey: "actions"}}); err == nil {
		t.Error("sort by actions accepted")
	}

	up, err := s.UpdateInspectionRule(ctx, minimal.UUID, func(r *InspectionRule) error {
		r.Priority = 7
		r.Conditions = []map[string]any{{"op": "is-true", "args": map[string]any{"value": true}}}
		return nil
	})
	if err != nil || up.Priority != 7 || up.UpdatedAt == nil {
		t.Fatalf("update: %+v %v", up, err)
	}
	if got, _ := s.GetInspectionRule(ctx, minimal.UUID); !reflect.DeepEqual(got, up) {
		t.Fatalf("after update:\n got %+v\nwant %+v", got, up)
	}
	if err := s.DeleteInspectionRule(ctx, minimal.UUID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.DeleteInspectionRule(ctx, minimal.UUID), fault.NotFound, "storage: no inspection_rules row "+minimal.UUID)
}
