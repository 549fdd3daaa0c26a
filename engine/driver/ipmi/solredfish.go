package ipmi

import (
	"context"
	"maps"
	"net/url"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
)

// RedfishSerial is IPMI Serial-over-LAN for redfish nodes whose BMC also
// speaks IPMI (most do): the node's driver_info names IPMI credentials
// (ipmi_username, ipmi_password; ipmi_address defaults to the host of
// redfish_address, or ilo_address on ilo5, ipmi_port and the other ipmi_* keys as for the ipmi
// type). Redfish itself offers no serial stream (its SerialConsole only
// points at IPMI or SSH), so this is how castiron's ipmitool-socat reaches a
// redfish node's serial port.
func RedfishSerial(d *Driver) driver.SerialConsole { return redfishSOL{d} }

type redfishSOL struct{ d *Driver }

// asIPMI is the node with the IPMI address filled in from redfish_address.
func asIPMI(n driver.Node) (driver.Node, error) {
	di := n.DriverInfo
	if driver.IsEmpty(di["ipmi_username"]) || driver.IsEmpty(di["ipmi_password"]) {
		return n, fault.New(fault.Invalid, "The serial console of redfish node %s uses IPMI Serial-over-LAN on its BMC: set ipmi_username and ipmi_password (and ipmi_address when it is not the host of redfish_address) in driver_info", n.UUID)
	}
	if driver.IsEmpty(di["ipmi_address"]) {
		raw, _ := di["redfish_address"].(string)
		if raw == "" { // the ilo5 type: the iLO's address
			raw, _ = di["ilo_address"].(string)
		}
		if !strings.Contains(raw, "://") {
			raw = "https://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return n, fault.New(fault.Invalid, "The serial console of redfish node %s: no ipmi_address in driver_info, and none can be taken from redfish_address %q", n.UUID, di["redfish_address"])
		}
		cp := maps.Clone(di)
		cp["ipmi_address"] = u.Hostname()
		n.DriverInfo = cp
	}
	return n, nil
}

func (r redfishSOL) ValidateSerial(n driver.Node) (int, error) {
	in, err := asIPMI(n)
	if err != nil {
		return 0, err
	}
	return r.d.ValidateSerial(in)
}

func (r redfishSOL) OpenSerial(ctx context.Context, n driver.Node) (driver.SerialLink, error) {
	in, err := asIPMI(n)
	if err != nil {
		return nil, err
	}
	return r.d.OpenSerial(ctx, in)
}
