package engine

import (
	"context"
	"fmt"

	"castiron/storage"
)

type actorKey struct{}

// WithActor tags ctx with who asks (an API user, "agent"), for node history.
func WithActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

type projectKey struct{}

// WithProject tags ctx with the project the caller's token is scoped to,
// which node history records beside the user (Ironic's node_history
// project column).
func WithProject(ctx context.Context, project string) context.Context {
	return context.WithValue(ctx, projectKey{}, project)
}

func projectOf(ctx context.Context) string {
	s, _ := ctx.Value(projectKey{}).(string)
	return s
}

func actorOf(ctx context.Context) string {
	if s, ok := ctx.Value(actorKey{}).(string); ok && s != "" {
		return s
	}
	return "conductor"
}

// fire moves n along the edge ev (which the caller has checked exists) and
// returns the history event describing it. target overrides the table's
// target state (manual cleaning returns to manageable, not available).
// Ironic's rule: the new state's target from the table, none once stable.
func (c *Conductor) fire(ctx context.Context, n *storage.Node, ev Event, target State, lastError *string) *storage.Event {
	from := State(n.ProvisionState)
	to, ok := Next(from, ev)
	if !ok {
		// Callers check Actionable first; reaching here is a bug in engine.
		panic(fmt.Sprintf("engine: no edge %q --%s-->", from, ev))
	}
	n.ProvisionState = string(to)
	switch {
	case target != noTargetState && !states[to].Stable:
		n.TargetProvisionState = strp(string(target))
	case states[to].Target != noTargetState:
		n.TargetProvisionState = strp(string(states[to].Target))
	default:
		n.TargetProvisionState = nil
	}
	now := c.now()
	n.ProvisionUpdatedAt = &now
	n.LastError = lastError
	severity, msg := "INFO", fmt.Sprintf("%s: %s -> %s", ev, from, to)
	if lastError != nil {
		severity, msg = "ERROR", *lastError
	}
	c.log.InfoContext(ctx, "provision state change", "node", n.UUID, "verb", string(ev),
		"from", string(from), "state", string(to), "target", deref(n.TargetProvisionState))
	return &storage.Event{
		NodeUUID:  n.UUID,
		CreatedAt: now,
		Conductor: c.cfg.Hostname,
		EventType: "provisioning",
		Severity:  severity,
		Event:     msg,
		User:      actorOf(ctx),
		Project:   projectOf(ctx),
		Verb:      string(ev),
		FromState: string(from),
		ToState:   string(to),
	}
}

func strp(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
