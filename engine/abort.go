package engine

import (
	"context"
	"fmt"

	"castiron/fault"
	"castiron/storage"
)

// Aborts: what a provision abort does in each state (abortTask), its
// last_error (abortMessage), and the abort of a running step, kept until
// a step that may not be interrupted ends (AbortRunning).

func abortMessage(from State, n *storage.Node) string {
	switch from {
	case InspectWait:
		return "Inspection was aborted by request."
	case CleanWait, CleanHold:
		step := n.CleanStep["step"]
		if step == nil {
			return fmt.Sprintf("Clean operation aborted for node %s.", n.UUID)
		}
		return fmt.Sprintf("Clean operation aborted for node %s on step %v.", n.UUID, step)
	case DeployWait:
		// Ironic's do_node_deploy_abort (API 1.110).
		msg := "By request, the deploy operation was aborted"
		if iface, step := n.DeployStep["interface"], n.DeployStep["step"]; iface != nil && step != nil {
			msg += fmt.Sprintf(" during or after the completion of step \"%v.%v\"", iface, step)
		}
		return msg
	case DeployHold:
		return "Deployment was aborted by request."
	case RescueWait:
		return "Rescue operation was aborted by request."
	case ServiceWait, ServiceHold:
		return "Service operation was aborted by request."
	}
	return fmt.Sprintf("Operation aborted by request in state %s.", from)
}

func abortTask(from State) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		stop := powerOff
		if states[from].WaitsForCallback || from == InspectWait {
			// An abort by request: where Ironic powers off it reboots a
			// disable_power_off node (inspection clean_up,
			// tear_down_inband_cleaning); after a failure it leaves it.
			stop = powerOffOrReboot
		}
		if err := stop(ctx, c, n); err != nil {
			c.log.WarnContext(ctx, "power off after abort failed", "node", n.UUID, "state", string(from), "err", err)
		}
		return outcome{}
	}
}

// AbortRunning is DELETE /v1/nodes/{id}/states/provision (the deploy-abort
// blueprint): 202 when the running task is aborted or marked for abort, 403
// when the current step is not interruptible, 404 when nothing is running.
func (c *Conductor) AbortRunning(ctx context.Context, ident string) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	st := State(n.ProvisionState)
	if step := currentStep(n); step != nil {
		if ab, ok := step["abortable"].(bool); ok && !ab {
			if err := c.markAbortAfterStep(ctx, n.UUID); err != nil {
				return err
			}
			return fault.New(fault.Forbidden, "The current step %v of node %s is not interruptible; the node will be aborted once it ends.", step["step"], n.UUID)
		}
	}
	if Actionable(st, EvAbort) && n.Reservation == nil {
		return c.Provision(ctx, n.UUID, ProvisionRequest{Target: "abort"})
	}
	if n.Reservation != nil && *n.Reservation == c.cfg.Hostname && !states[st].Stable {
		c.aborts.set(n.UUID)
		return nil
	}
	return fault.New(fault.NotFound, "Node %s has no provision task running.", n.UUID)
}

func currentStep(n *storage.Node) map[string]any {
	for _, s := range []storage.JSONObject{n.DeployStep, n.CleanStep, n.ServiceStep} {
		if len(s) > 0 {
			return s
		}
	}
	return nil
}

func (c *Conductor) markAbortAfterStep(ctx context.Context, uuid string) error {
	_, err := c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
		cur.DriverInternalInfo[diiAbortAfter] = true
		c.log.InfoContext(ctx, "abort deferred until the current step ends", "node", cur.UUID, "state", cur.ProvisionState, "verb", "abort")
		return nil, nil
	})
	return err
}
