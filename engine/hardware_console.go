package engine

import (
	"slices"

	"castiron/engine/driver"
)

// WithSerialConsoles gives a Redfish-family type (redfish, idrac, ilo5) its
// serial consoles, after no-console (which stays the default, as in
// Ironic): redfish-ssh, the BMC's SSH serial console found through Redfish
// (ssh), and ipmitool-socat / ipmitool-shellinabox, IPMI Serial-over-LAN on
// the same BMC for nodes with IPMI credentials in driver_info (sol).
// Ironic's redfish type (and idrac, its subclass) lists ipmitool-socat too;
// castiron also offers shellinabox (its web console) and both on ilo5,
// whose BMC speaks IPMI as well. A nil console leaves its names out.
func WithSerialConsoles(hw *HardwareType, sol, ssh driver.SerialConsole) *HardwareType {
	names := []string{"no-console"}
	if ssh != nil {
		if hw.Consoles == nil {
			hw.Consoles = map[string]driver.SerialConsole{}
		}
		hw.Consoles[ConsoleRedfishSSH] = ssh
		names = append(names, ConsoleRedfishSSH)
	}
	if sol != nil {
		hw.Serial = sol
		names = append(names, ConsoleSocat, ConsoleShellinabox)
	}
	for _, n := range hw.Interfaces["console"] {
		if !slices.Contains(names, n) && (n != ConsoleSocat && n != ConsoleShellinabox || sol != nil) {
			names = append(names, n)
		}
	}
	hw.Interfaces["console"] = names
	return hw
}
