// Package steps runs the agent's clean and deploy steps on this machine.
package steps

import (
	"context"
	"fmt"

	"castiron/ramdisk/protocol"
)

// Run executes one step on this machine's disks, reporting progress as it
// goes, and returns the step's result. inv is the inventory collected at
// start (disks for root device hints). ctx is cancelled on abort.
func Run(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
	return nil, fmt.Errorf("step %s.%s is not implemented by this agent", step.Interface, step.Name)
}
