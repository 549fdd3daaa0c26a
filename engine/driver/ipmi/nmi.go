package ipmi

import (
	"context"

	"castiron/engine/driver"

	"github.com/bougou/go-ipmi/pkg/command/chassis"
)

var _ driver.NMIInjector = (*Driver)(nil)

// InjectNMI sends Chassis Control "diagnostic interrupt", what Ironic's
// ipmitool management runs as "ipmitool power diag".
func (d *Driver) InjectNMI(ctx context.Context, n driver.Node) error {
	inf, err := parseInfo(n)
	if err != nil {
		return err
	}
	return d.session(ctx, inf, func(s *conn) error {
		c, err := s.client(ctx)
		if err != nil {
			return err
		}
		if _, err := c.ChassisControl(ctx, chassis.ChassisControlDiagnosticInterrupt); err != nil {
			return wrapBMC(ctx, s.inf, err, "IPMI chassis control %q failed", "power diag")
		}
		return nil
	})
}
