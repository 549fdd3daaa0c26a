package workflow

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"castiron/client"
)

// Refusal says why a command will not touch a node; nothing was changed.
type Refusal struct{ Reasons []string }

func (e *Refusal) Error() string {
	return "refused, no node was touched:\n  " + strings.Join(e.Reasons, "\n  ")
}

// Select reads the named nodes, or every node in state when names is empty
// and all is set.
func (r *Runner) Select(ctx context.Context, names []string, all bool, state string) ([]*client.Node, error) {
	if all && len(names) > 0 {
		return nil, fmt.Errorf("give node names or --all-manageable, not both")
	}
	if all {
		list, err := r.Client.ListNodes(ctx, url.Values{"provision_state": {state}})
		if err != nil {
			return nil, err
		}
		out := make([]*client.Node, 0, len(list))
		for i := range list {
			if list[i].ProvisionState == state { // a server may ignore the filter
				out = append(out, &list[i])
			}
		}
		return out, nil
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("name the nodes or give --all-manageable")
	}
	out := make([]*client.Node, 0, len(names))
	var missing []string
	for _, name := range names {
		n, err := r.Client.GetNode(ctx, name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s: %s", name, faultOf(err)))
			continue
		}
		out = append(out, n)
	}
	if len(missing) > 0 {
		return nil, &Refusal{missing}
	}
	return out, nil
}

// refuse checks every node before anything is changed.
func refuse(nodes []*client.Node, why func(*client.Node) string) error {
	var reasons []string
	for _, n := range nodes {
		if r := why(n); r != "" {
			reasons = append(reasons, fmt.Sprintf("%s is %s: %s", n.Label(), n.ProvisionState, r))
		}
	}
	if len(reasons) > 0 {
		return &Refusal{reasons}
	}
	return nil
}

// Introspect inspects manageable (or inspect failed) nodes and, with
// provide, makes them available afterwards. Nodes in any other state are
// refused up front: available and active nodes are in the deployment pool
// and are never taken out of it implicitly.
func (r *Runner) Introspect(ctx context.Context, nodes []*client.Node, provide bool) ([]Result, error) {
	err := refuse(nodes, func(n *client.Node) string {
		switch n.ProvisionState {
		case "manageable", "inspect failed":
			return ""
		case "available", "active":
			return fmt.Sprintf("it is in the deployment pool; introspection would take it out. "+
				"If that is what you want, run `castiron manage %s` first", n.Label())
		case "enroll":
			return fmt.Sprintf("its BMC credentials are not verified yet; run `castiron manage %s` first", n.Label())
		}
		return "only manageable or inspect failed nodes can be introspected"
	})
	if err != nil {
		return nil, err
	}
	return r.bulk(ctx, nodes, steps{inspect: true, provide: provide}), nil
}

// Provide makes manageable nodes available; available ones are left alone.
func (r *Runner) Provide(ctx context.Context, nodes []*client.Node) ([]Result, error) {
	err := refuse(nodes, func(n *client.Node) string {
		switch n.ProvisionState {
		case "manageable", "available":
			return ""
		case "enroll":
			return fmt.Sprintf("run `castiron manage %s` first", n.Label())
		}
		return "only manageable nodes can be provided"
	})
	if err != nil {
		return nil, err
	}
	return r.bulk(ctx, nodes, steps{provide: true}), nil
}

// Manage moves nodes to manageable: enroll (verifying the BMC credentials),
// or back from available, inspect failed, clean failed, ... as the operator
// explicitly asks.
func (r *Runner) Manage(ctx context.Context, nodes []*client.Node) []Result {
	labels := labelsOf(nodes)
	return r.each(ctx, labels, func(ctx context.Context, i int, t Task) Result {
		n := nodes[i]
		res := Result{Label: n.Label(), UUID: n.UUID, State: n.ProvisionState, OK: true, Action: "unchanged"}
		if n.ProvisionState == "manageable" {
			return res
		}
		m, err := r.move(ctx, t, n.UUID, "manage")
		if err == nil {
			err = expect(m, "manageable")
		}
		res.Action = "manage"
		if m != nil {
			res.State = m.ProvisionState
		}
		if err != nil {
			res.OK, res.LastError = false, err.Error()
		}
		return res
	})
}

// Abort stops what a node is doing (inspect wait, clean wait, ...).
func (r *Runner) Abort(ctx context.Context, nodes []*client.Node) []Result {
	return r.each(ctx, labelsOf(nodes), func(ctx context.Context, i int, t Task) Result {
		n := nodes[i]
		res := Result{Label: n.Label(), UUID: n.UUID, Action: "abort", State: n.ProvisionState}
		m, err := r.move(ctx, t, n.UUID, "abort")
		if m != nil {
			res.State = m.ProvisionState
		}
		if err != nil {
			res.LastError = err.Error()
			return res
		}
		res.OK = true
		return res
	})
}

func (r *Runner) bulk(ctx context.Context, nodes []*client.Node, s steps) []Result {
	return r.each(ctx, labelsOf(nodes), func(ctx context.Context, i int, t Task) Result {
		res := Result{Label: nodes[i].Label()}
		r.advance(ctx, t, nodes[i], s, &res)
		if res.Action == "" {
			res.Action = "unchanged"
		}
		return res
	})
}

func labelsOf(nodes []*client.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Label()
	}
	return out
}
