package redfish

import (
	"context"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
)

var _ driver.SecureBootKeyResetter = (*Driver)(nil)

// ResetSecureBootKeys posts SecureBoot.ResetKeys (Ironic's _reset_keys):
// a system without a SecureBoot resource does not support it.
func (d *Driver) ResetSecureBootKeys(ctx context.Context, n driver.Node, how string) error {
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	sb, err := sys.SecureBoot()
	if err != nil {
		return opError(o.inf, err, "Redfish read of SecureBoot failed")
	}
	if sb == nil {
		return fault.New(fault.Invalid, "Driver %s does not support reset_secure_boot_keys (disabled or not implemented).", "redfish")
	}
	if _, err := sb.ResetKeys(schemas.ResetKeysType(how)); err != nil {
		return opError(o.inf, err, "Failed to reset secure boot keys")
	}
	return nil
}
