package main

import (
	"context"
	"log/slog"
	"time"

	"castiron/ramdisk/agent/bmc"
	"castiron/ramdisk/agent/inventory"
	"castiron/ramdisk/protocol"
)

const (
	// bmcDeviceWait: /dev/ipmi0 appears about a second after ipmi_si
	// binds; under emulation it takes longer.
	bmcDeviceWait = 15 * time.Second
	// bmcTimeout bounds one IPMI command on the system interface.
	bmcTimeout = 5 * time.Second
)

// readBMC fills the inventory's BMC addresses in-band and, when user is
// set, creates or resets that IPMI user. A machine without an IPMI system
// interface keeps bmc_address null, as with ironic-python-agent.
func readBMC(ctx context.Context, log *slog.Logger, root inventory.Root, inv *protocol.Inventory, user string) *protocol.BMCUser {
	var result *protocol.BMCUser
	if user != "" {
		result = &protocol.BMCUser{Username: user}
	}
	fail := func(msg string, err error) *protocol.BMCUser {
		log.Warn(msg, "err", err)
		if result != nil {
			result.Error = msg + ": " + err.Error()
		}
		return result
	}
	wait := time.Duration(0)
	if bmc.Hardware(root.Sys) {
		wait = bmcDeviceWait
	}
	start := time.Now()
	if _, err := bmc.WaitDevice(ctx, root.Dev, wait); err != nil {
		if wait > 0 || user != "" {
			return fail("no IPMI device", err)
		}
		return nil
	}
	dev, err := bmc.OpenDevice(ctx, bmcTimeout)
	if err != nil {
		return fail("IPMI system interface", err)
	}
	defer dev.Close(context.WithoutCancel(ctx))
	info := bmc.Read(ctx, dev)
	inv.BMCAddress, inv.BMCV6Address, inv.BMCMAC = info.Address, info.V6Address, info.MAC
	log.Info("BMC read in-band", "bmc", info.String(), "took", time.Since(start).Round(time.Millisecond))
	if user == "" {
		return nil
	}
	creds, err := bmc.EnsureUser(ctx, dev, info.Channel, user)
	if err != nil {
		return fail("BMC user not set up", err)
	}
	// The password goes to castiron with the inventory, never to the log.
	log.Info("BMC user set up", "user", creds.Username, "user_id", creds.UserID, "channel", creds.Channel)
	result.Password, result.UserID, result.Channel = creds.Password, int(creds.UserID), int(creds.Channel)
	return result
}
