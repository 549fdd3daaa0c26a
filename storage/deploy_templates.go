package storage

import (
	"context"
	"encoding/json"
	"time"
)

// DeployStep is one step of a deploy template, as Ironic stores it.
type DeployStep struct {
	Interface string     `json:"interface"`
	Step      string     `json:"step"`
	Args      JSONObject `json:"args"`
	Priority  int64      `json:"priority"`
}

// DeployTemplate is a named set of deploy steps (API 1.55). The name is a
// trait: a node whose instance_info traits name the template runs its steps
// during deployment.
type DeployTemplate struct {
	ID        int64
	UUID      string
	Name      string
	Steps     []DeployStep // in the order given; never nil once loaded
	Extra     JSONObject
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// DeployTemplateStore keeps deploy templates. Names and UUIDs are unique
// (DuplicateErrors).
type DeployTemplateStore interface {
	CreateDeployTemplate(ctx context.Context, t *DeployTemplate) error
	// GetDeployTemplate finds a template by UUID, or by name when ident is
	// not a UUID.
	GetDeployTemplate(ctx context.Context, ident string) (*DeployTemplate, error)
	ListDeployTemplates(ctx context.Context, page Page) ([]*DeployTemplate, error)
	// UpdateDeployTemplate reads the template, applies fn and writes the
	// changed columns back atomically, setting UpdatedAt.
	UpdateDeployTemplate(ctx context.Context, ident string, fn func(t *DeployTemplate) error) (*DeployTemplate, error)
	DeleteDeployTemplate(ctx context.Context, ident string) error
}

// deploySteps is the JSON array column of a template's steps.
type deploySteps = jsonCol[[]DeployStep, stepsKind]

type stepsKind struct{ arrayKind[DeployStep] }

func (stepsKind) what() string { return "deploy steps" }
func (stepsKind) load(b []byte) ([]DeployStep, error) {
	steps, err := loadArray[DeployStep](b, json.Unmarshal)
	for i := range steps {
		if steps[i].Args == nil {
			steps[i].Args = JSONObject{}
		}
	}
	return steps, err
}

var templateTable = resourceTable("deploy_templates", func(t *DeployTemplate) (*int64, *string, *time.Time, **time.Time) {
	return &t.ID, &t.UUID, &t.CreatedAt, &t.UpdatedAt
}, []column[DeployTemplate]{
	strCol("name", func(t *DeployTemplate) *string { return &t.Name }),
	{name: "steps", ref: func(t *DeployTemplate) codec { return deploySteps{&t.Steps} }, unsortable: true},
	objectCol("extra", func(t *DeployTemplate) *JSONObject { return &t.Extra }),
}, record[DeployTemplate]{
	normalize: normalizeDeployTemplate,
	unique: map[string]func(*DeployTemplate) []string{
		"name": one(func(t *DeployTemplate) string { return t.Name }),
	},
	named: true,
})

func normalizeDeployTemplate(t *DeployTemplate) {
	orEmpty(&t.Extra)
	if t.Steps == nil {
		t.Steps = []DeployStep{}
	}
	for i := range t.Steps {
		if t.Steps[i].Args == nil {
			t.Steps[i].Args = JSONObject{}
		}
	}
}

// CreateDeployTemplate inserts t and fills t.ID (and UUID and CreatedAt
// when empty).
func (s *DB) CreateDeployTemplate(ctx context.Context, t *DeployTemplate) error {
	return s.write(ctx, func(r runner) error { return templateTable.create(ctx, r, t) })
}

// GetDeployTemplate finds a template by UUID or name.
func (s *DB) GetDeployTemplate(ctx context.Context, ident string) (*DeployTemplate, error) {
	return templateTable.get(ctx, s.reader(), ident)
}

// ListDeployTemplates returns one page of templates.
func (s *DB) ListDeployTemplates(ctx context.Context, page Page) ([]*DeployTemplate, error) {
	return templateTable.list(ctx, s.reader(), &filter{}, page)
}

// UpdateDeployTemplate reads the template, applies fn and writes it back in
// one write transaction. An error from fn is returned unchanged.
func (s *DB) UpdateDeployTemplate(ctx context.Context, ident string, fn func(t *DeployTemplate) error) (*DeployTemplate, error) {
	return templateTable.update(ctx, s, ident, fn)
}

// DeleteDeployTemplate removes a template by UUID or name.
func (s *DB) DeleteDeployTemplate(ctx context.Context, ident string) error {
	return s.write(ctx, func(r runner) error { return templateTable.remove(ctx, r, ident) })
}
