package engine

import (
	"context"
	"fmt"

	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// The BMC user of --discovery-bmc-user (beyond Ironic, as MAAS
// enlistment): once castiron has made a node of a discovered machine, the
// agent's next heartbeat is told to create or reset the user in-band with
// a new random password; its step result puts the credentials into
// driver_info (the password nowhere else: no history, no log, no step
// results), then the node goes on to manage, which verifies them out of
// band. castiron asks only for nodes it just discovered, so a known
// machine's BMC accounts are never touched.

const (
	// diiBMCUser tracks the step: pending, done, or failed.
	diiBMCUser       = "castiron_bmc_user"
	bmcUserPending   = "pending"
	bmcUserDone      = "done"
	bmcUserFailed    = "failed"
	bmcUserStepID    = "discovery-bmc-user"
	bmcUserInterface = "management"
)

// bmcUserDrivers are the hardware types whose credentials an IPMI user
// gives (BMCs share accounts between IPMI and Redfish).
var bmcUserDrivers = map[string]bool{"ipmi": true, "redfish": true}

// bmcUserStep answers a heartbeat of a discovered node whose BMC user is
// pending: run the step, or take its report. It returns the history event
// of the outcome and the work to run once the heartbeat is recorded
// (manage), nil otherwise.
func (c *Conductor) bmcUserStep(n *storage.Node, rep *protocol.StepReport, instr *protocol.Instruction) (*storage.Event, func(ctx context.Context, n *storage.Node)) {
	if rep == nil || rep.ID != bmcUserStepID || rep.Status == protocol.StepRunning {
		*instr = protocol.Instruction{Command: protocol.CmdRunStep, HeartbeatInterval: c.cfg.AgentHeartbeatInterval.Seconds(),
			Step: &protocol.Step{ID: bmcUserStepID, Interface: bmcUserInterface, Name: protocol.StepBMCUser,
				Args: map[string]any{protocol.ArgUsername: c.cfg.DiscoveryBMCUser}}}
		return nil, nil
	}
	user, _ := rep.Result[protocol.ArgUsername].(string)
	password, _ := rep.Result[protocol.ResultPassword].(string)
	if rep.Status != protocol.StepSucceeded || user == "" || password == "" {
		reason := rep.Error
		if reason == "" {
			reason = "the agent reported no credentials"
		}
		n.DriverInternalInfo[diiBMCUser] = bmcUserFailed
		n.LastError = strp(fmt.Sprintf("BMC user %s not set up in-band: %s", c.cfg.DiscoveryBMCUser, reason))
		c.log.Warn("discovery: BMC user not set up", "node", n.UUID, "state", n.ProvisionState, "err", reason)
		*instr = protocol.Instruction{Command: protocol.CmdPowerOff, Reason: "BMC user not set up"}
		return c.discoveryEvent(n, "ERROR", *n.LastError), nil
	}
	prefix := "ipmi"
	if n.Driver == "redfish" {
		prefix = "redfish"
	}
	n.DriverInfo[prefix+"_username"], n.DriverInfo[prefix+"_password"] = user, password
	n.DriverInternalInfo[diiBMCUser] = bmcUserDone
	c.log.Info("discovery: BMC user set up in-band", "node", n.UUID, "state", n.ProvisionState, "user", user,
		"user_id", rep.Result[protocol.ResultUserID], "channel", rep.Result[protocol.ResultChannel])
	*instr = protocol.Instruction{Command: protocol.CmdPowerOff, Reason: "discovered; BMC user set up"}
	return c.discoveryEvent(n, "INFO", fmt.Sprintf("BMC user %s set up in-band (user id %v, LAN channel %v); its credentials are in driver_info",
		user, rep.Result[protocol.ResultUserID], rep.Result[protocol.ResultChannel])), c.autoManage
}
