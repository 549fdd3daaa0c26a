package engine

import (
	"context"

	"castiron/storage"
)

// Deploy templates (API 1.55) hold no node state; the API validates them
// (name is a trait, steps are deploy steps) and these write them, so every
// write still goes through the conductor.

// CreateDeployTemplate stores a new template.
func (c *Conductor) CreateDeployTemplate(ctx context.Context, t *storage.DeployTemplate) error {
	t.CreatedAt = c.now()
	if err := c.store.CreateDeployTemplate(ctx, t); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "deploy template created", "verb", "deploy-template-create", "template", t.UUID, "name", t.Name)
	return nil
}

// UpdateDeployTemplate applies change to the template named by ident (UUID
// or name) atomically.
func (c *Conductor) UpdateDeployTemplate(ctx context.Context, ident string, change func(t *storage.DeployTemplate) error) (*storage.DeployTemplate, error) {
	t, err := c.store.UpdateDeployTemplate(ctx, ident, change)
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "deploy template updated", "verb", "deploy-template-update", "template", t.UUID, "name", t.Name)
	return t, nil
}

// DeleteDeployTemplate removes the template named by ident.
func (c *Conductor) DeleteDeployTemplate(ctx context.Context, ident string) error {
	if err := c.store.DeleteDeployTemplate(ctx, ident); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "deploy template deleted", "verb", "deploy-template-delete", "template", ident)
	return nil
}
