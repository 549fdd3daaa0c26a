package engine

import (
	"context"

	"castiron/storage"
)

// Runbooks (API 1.92) hold no node state: the API validates them and these
// write them, so every write still goes through the conductor. Using one
// is a provision request (clean or service) whose steps are the runbook's;
// the API resolves it (ProvisionRequest.Prepare) and the steps then run as
// the explicit steps would.

// CreateRunbook stores a new runbook.
func (c *Conductor) CreateRunbook(ctx context.Context, r *storage.Runbook) error {
	r.CreatedAt = c.now()
	if err := c.store.CreateRunbook(ctx, r); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "runbook created", "verb", "runbook-create", "runbook", r.UUID, "name", r.Name)
	return nil
}

// UpdateRunbook applies change to the runbook named by ident (UUID or name)
// atomically.
func (c *Conductor) UpdateRunbook(ctx context.Context, ident string, change func(r *storage.Runbook) error) (*storage.Runbook, error) {
	r, err := c.store.UpdateRunbook(ctx, ident, change)
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "runbook updated", "verb", "runbook-update", "runbook", r.UUID, "name", r.Name)
	return r, nil
}

// DeleteRunbook removes the runbook named by ident.
func (c *Conductor) DeleteRunbook(ctx context.Context, ident string) error {
	if err := c.store.DeleteRunbook(ctx, ident); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "runbook deleted", "verb", "runbook-delete", "runbook", ident)
	return nil
}
