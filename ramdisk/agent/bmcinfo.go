package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"castiron/ramdisk/agent/bmc"
	"castiron/ramdisk/agent/inventory"
	"castiron/ramdisk/agent/runloop"
	"castiron/ramdisk/protocol"
)

const (
	// bmcDeviceWait: /dev/ipmi0 appears about a second after ipmi_si
	// binds; under emulation it takes longer.
	bmcDeviceWait = 15 * time.Second
	// bmcTimeout bounds one IPMI command on the system interface.
	bmcTimeout = 5 * time.Second
)

// openBMC waits for the IPMI device (when the firmware describes one) and
// opens it; ErrNoDevice when the machine has none.
func openBMC(ctx context.Context, root inventory.Root, wait time.Duration) (*bmc.Device, error) {
	if !bmc.Hardware(root.Sys) {
		wait = 0
	}
	if _, err := bmc.WaitDevice(ctx, root.Dev, wait); err != nil {
		return nil, err
	}
	return bmc.OpenDevice(ctx, bmcTimeout)
}

// readBMC fills the inventory's BMC addresses in-band. A machine without
// an IPMI system interface keeps bmc_address null, as with
// ironic-python-agent.
func readBMC(ctx context.Context, log *slog.Logger, root inventory.Root, inv *protocol.Inventory) {
	start := time.Now()
	dev, err := openBMC(ctx, root, bmcDeviceWait)
	if err != nil {
		if bmc.Hardware(root.Sys) {
			log.Warn("BMC not readable in-band", "err", err)
		}
		return
	}
	defer dev.Close(context.WithoutCancel(ctx))
	info := bmc.Read(ctx, dev)
	inv.BMCAddress, inv.BMCV6Address, inv.BMCMAC = info.Address, info.V6Address, info.MAC
	log.Info("BMC read in-band", "bmc", info.String(), "took", time.Since(start).Round(time.Millisecond))
}

// withBMCUserStep adds castiron's castiron_bmc_user step to a step
// runner: create or reset the named IPMI user in-band. The password goes
// back in the step result only, never to the log.
func withBMCUserStep(next runloop.StepRunner, root inventory.Root, log *slog.Logger) runloop.StepRunner {
	return func(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
		if step.Name != protocol.StepBMCUser {
			return next(ctx, step, inv, progress)
		}
		name, _ := step.Args[protocol.ArgUsername].(string)
		dev, err := openBMC(ctx, root, bmcDeviceWait)
		if err != nil {
			return nil, fmt.Errorf("IPMI system interface: %w", err)
		}
		defer dev.Close(context.WithoutCancel(ctx))
		info := bmc.Read(ctx, dev)
		creds, err := bmc.EnsureUser(ctx, dev, info.Channel, name)
		if err != nil {
			return nil, err
		}
		log.Info("BMC user set up", "user", creds.Username, "user_id", creds.UserID, "channel", creds.Channel)
		return map[string]any{
			protocol.ArgUsername:    creds.Username,
			protocol.ResultPassword: creds.Password,
			protocol.ResultUserID:   int(creds.UserID),
			protocol.ResultChannel:  int(creds.Channel),
		}, nil
	}
}
