package storage

import (
	"context"
	"encoding/json"
	"time"
)

// RunbookStep is one step of a runbook, as Ironic stores it: a clean or
// service step with its place (order) in the runbook.
type RunbookStep struct {
	Interface string     `json:"interface"`
	Step      string     `json:"step"`
	Args      JSONObject `json:"args"`
	Order     int64      `json:"order"`
}

// Runbook is a named list of steps a node may run in manual cleaning or
// servicing (API 1.92). Before 1.112 a node may use it when one of its
// traits equals the name; from 1.112 when it shares one of Traits.
type Runbook struct {
	ID             int64
	UUID           string
	Name           string
	Description    *string
	Steps          []RunbookStep // in the order given; never nil once loaded
	DisableRamdisk bool
	Extra          JSONObject
	Public         bool
	Owner          *string
	Traits         []string // never nil once loaded
	CreatedAt      time.Time
	UpdatedAt      *time.Time
}

// RunbookQuery filters a runbook list.
type RunbookQuery struct {
	Page
	// PublicOnly keeps public runbooks only.
	PublicOnly bool
	// Project keeps the runbooks it owns and the public ones (Ironic's
	// project filter).
	Project *string
}

// RunbookStore keeps runbooks. Names and UUIDs are unique
// (DuplicateErrors).
type RunbookStore interface {
	CreateRunbook(ctx context.Context, r *Runbook) error
	// GetRunbook finds a runbook by UUID, or by name when ident is not a
	// UUID.
	GetRunbook(ctx context.Context, ident string) (*Runbook, error)
	ListRunbooks(ctx context.Context, q RunbookQuery) ([]*Runbook, error)
	// UpdateRunbook reads the runbook, applies fn and writes the changed
	// columns back atomically, setting UpdatedAt.
	UpdateRunbook(ctx context.Context, ident string, fn func(r *Runbook) error) (*Runbook, error)
	DeleteRunbook(ctx context.Context, ident string) error
}

// runbookSteps is the JSON array column of a runbook's steps.
type runbookSteps = jsonCol[[]RunbookStep, runbookStepsKind]

type runbookStepsKind struct{ arrayKind[RunbookStep] }

func (runbookStepsKind) what() string { return "runbook steps" }
func (runbookStepsKind) load(b []byte) ([]RunbookStep, error) {
	steps, err := loadArray[RunbookStep](b, json.Unmarshal)
	for i := range steps {
		if steps[i].Args == nil {
			steps[i].Args = JSONObject{}
		}
	}
	return steps, err
}

var runbookTable = resourceTable("runbooks", func(r *Runbook) (*int64, *string, *time.Time, **time.Time) {
	return &r.ID, &r.UUID, &r.CreatedAt, &r.UpdatedAt
}, []column[Runbook]{
	strCol("name", func(r *Runbook) *string { return &r.Name }),
	nullStrCol("description", func(r *Runbook) **string { return &r.Description }),
	{name: "steps", ref: func(r *Runbook) codec { return runbookSteps{&r.Steps} }, unsortable: true},
	boolCol("disable_ramdisk", func(r *Runbook) *bool { return &r.DisableRamdisk }),
	objectCol("extra", func(r *Runbook) *JSONObject { return &r.Extra }),
	boolCol("public", func(r *Runbook) *bool { return &r.Public }),
	nullStrCol("owner", func(r *Runbook) **string { return &r.Owner }),
	listCol("traits", func(r *Runbook) *[]string { return &r.Traits }),
}, record[Runbook]{
	normalize: normalizeRunbook,
	unique: map[string]func(*Runbook) []string{
		"name": one(func(r *Runbook) string { return r.Name }),
	},
	named: true,
})

func normalizeRunbook(r *Runbook) {
	orEmpty(&r.Extra)
	if r.Steps == nil {
		r.Steps = []RunbookStep{}
	}
	for i := range r.Steps {
		if r.Steps[i].Args == nil {
			r.Steps[i].Args = JSONObject{}
		}
	}
	if r.Traits == nil {
		r.Traits = []string{}
	}
}

// CreateRunbook inserts r and fills r.ID (and UUID and CreatedAt when
// empty).
func (s *DB) CreateRunbook(ctx context.Context, r *Runbook) error {
	return s.write(ctx, func(w runner) error { return runbookTable.create(ctx, w, r) })
}

// GetRunbook finds a runbook by UUID or name.
func (s *DB) GetRunbook(ctx context.Context, ident string) (*Runbook, error) {
	return runbookTable.get(ctx, s.reader(), ident)
}

// ListRunbooks returns one page of runbooks.
func (s *DB) ListRunbooks(ctx context.Context, q RunbookQuery) ([]*Runbook, error) {
	f := &filter{}
	if q.PublicOnly {
		f.add("public = ?", true)
	}
	if q.Project != nil {
		f.add("(owner = ? OR public = ?)", *q.Project, true)
	}
	return runbookTable.list(ctx, s.reader(), f, q.Page)
}

// UpdateRunbook reads the runbook, applies fn and writes it back in one
// write transaction. An error from fn is returned unchanged.
func (s *DB) UpdateRunbook(ctx context.Context, ident string, fn func(r *Runbook) error) (*Runbook, error) {
	return runbookTable.update(ctx, s, ident, fn)
}

// DeleteRunbook removes a runbook by UUID or name.
func (s *DB) DeleteRunbook(ctx context.Context, ident string) error {
	return s.write(ctx, func(w runner) error { return runbookTable.remove(ctx, w, ident) })
}
