package engine

import (
	"context"

	"castiron/fault"
	"castiron/storage"
)

// ConsoleInfo is GET /v1/nodes/{id}/states/console: whether the console is
// enabled and, when it is, the console interface's connection information
// (the fake console's is {} as Ironic's FakeConsole.get_console). As in
// Ironic, a disabled console answers (false, nil) before the interface is
// validated, so a no-console node answers too.
func (c *Conductor) ConsoleInfo(ctx context.Context, ident string) (bool, map[string]any, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return false, nil, err
	}
	if !n.ConsoleEnabled {
		return false, nil, nil
	}
	if InterfaceOf(n, "console") == "no-console" {
		return false, nil, unsupported(n, "console")
	}
	return true, map[string]any{}, nil
}

// SetConsole is PUT /v1/nodes/{id}/states/console: start or stop the node's
// console. The fake console starts and stops at once, so console_enabled is
// set before the API answers 202. Asking for the current mode changes
// nothing (and needs no exclusive lock), as in Ironic.
func (c *Conductor) SetConsole(ctx context.Context, ident string, enabled bool) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if InterfaceOf(n, "console") == "no-console" {
		return unsupported(n, "console")
	}
	if n.ConsoleEnabled == enabled {
		c.log.InfoContext(ctx, "no console action was triggered", "node", n.UUID, "verb", "console", "enabled", enabled)
		return nil
	}
	_, err = c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		n.ConsoleEnabled = enabled
		n.LastError = nil
		c.log.InfoContext(ctx, "console set", "node", n.UUID, "state", n.ProvisionState, "verb", "console", "enabled", enabled)
		return nil, nil
	})
	return err
}
