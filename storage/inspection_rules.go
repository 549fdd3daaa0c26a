package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// InspectionRule is a rule applied to the inspection data of every node
// (API 1.96). Conditions and Actions are the documents the API accepted
// ({"op", "args", ...}), numbers as json.Number.
type InspectionRule struct {
	ID          int64
	UUID        string
	Description *string
	Priority    int64
	Sensitive   bool
	Phase       string
	Conditions  []map[string]any // never nil once loaded
	Actions     []map[string]any // never nil once loaded
	CreatedAt   time.Time
	UpdatedAt   *time.Time
}

// InspectionRuleQuery filters a rule list.
type InspectionRuleQuery struct {
	Page
	Phase *string
}

// InspectionRuleStore keeps inspection rules; UUIDs are unique
// (fault.Conflict with Ironic's wording).
type InspectionRuleStore interface {
	CreateInspectionRule(ctx context.Context, r *InspectionRule) error
	GetInspectionRule(ctx context.Context, uuid string) (*InspectionRule, error)
	ListInspectionRules(ctx context.Context, q InspectionRuleQuery) ([]*InspectionRule, error)
	// UpdateInspectionRule reads the rule, applies fn and writes the changed
	// columns back atomically, setting UpdatedAt.
	UpdateInspectionRule(ctx context.Context, uuid string, fn func(r *InspectionRule) error) (*InspectionRule, error)
	DeleteInspectionRule(ctx context.Context, uuid string) error
}

// ruleOps is a JSON array column of operation documents, numbers as
// json.Number.
type ruleOps = jsonCol[[]map[string]any, opsKind]

type opsKind struct{ arrayKind[map[string]any] }

func (opsKind) what() string { return "rule operations" }
func (opsKind) load(b []byte) ([]map[string]any, error) {
	return loadArray[map[string]any](b, func(b []byte, v any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		return dec.Decode(v)
	})
}

var ruleTable = resourceTable("inspection_rules", func(r *InspectionRule) (*int64, *string, *time.Time, **time.Time) {
	return &r.ID, &r.UUID, &r.CreatedAt, &r.UpdatedAt
}, []column[InspectionRule]{
	nullStrCol("description", func(r *InspectionRule) **string { return &r.Description }),
	intCol("priority", func(r *InspectionRule) *int64 { return &r.Priority }),
	boolCol("sensitive", func(r *InspectionRule) *bool { return &r.Sensitive }),
	strCol("phase", func(r *InspectionRule) *string { return &r.Phase }),
	{name: "conditions", ref: func(r *InspectionRule) codec { return ruleOps{&r.Conditions} }, unsortable: true},
	{name: "actions", ref: func(r *InspectionRule) codec { return ruleOps{&r.Actions} }, unsortable: true},
}, record[InspectionRule]{
	normalize: normalizeInspectionRule,
})

func normalizeInspectionRule(r *InspectionRule) {
	if r.Phase == "" {
		r.Phase = "main"
	}
	if r.Conditions == nil {
		r.Conditions = []map[string]any{}
	}
	if r.Actions == nil {
		r.Actions = []map[string]any{}
	}
}

// CreateInspectionRule inserts r and fills r.ID (and UUID and CreatedAt
// when empty).
func (s *DB) CreateInspectionRule(ctx context.Context, r *InspectionRule) error {
	return s.write(ctx, func(w runner) error { return ruleTable.create(ctx, w, r) })
}

// GetInspectionRule finds a rule by UUID.
func (s *DB) GetInspectionRule(ctx context.Context, uuid string) (*InspectionRule, error) {
	return ruleTable.get(ctx, s.reader(), uuid)
}

// ListInspectionRules returns one page of rules.
func (s *DB) ListInspectionRules(ctx context.Context, q InspectionRuleQuery) ([]*InspectionRule, error) {
	f := &filter{}
	f.eq("phase", q.Phase, nil)
	return ruleTable.list(ctx, s.reader(), f, q.Page)
}

// UpdateInspectionRule reads the rule, applies fn and writes it back in one
// write transaction. An error from fn is returned unchanged.
func (s *DB) UpdateInspectionRule(ctx context.Context, uuid string, fn func(r *InspectionRule) error) (*InspectionRule, error) {
	return ruleTable.update(ctx, s, uuid, fn)
}

// DeleteInspectionRule removes a rule.
func (s *DB) DeleteInspectionRule(ctx context.Context, uuid string) error {
	return s.write(ctx, func(r runner) error { return ruleTable.remove(ctx, r, uuid) })
}
