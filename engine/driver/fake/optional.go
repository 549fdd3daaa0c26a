package fake

import (
	"context"

	"castiron/engine/driver"
	"castiron/fault"
)

// Ironic's FakeManagement reports two indicators and reads every one as "on";
// it implements neither set_indicator_state, inject_nmi nor the boot mode
// and secure boot setters, so this driver does not either (the engine then
// answers Ironic's UnsupportedDriverExtension).
var _ driver.IndicatorReader = (*Driver)(nil)

// SupportedIndicators is FakeManagement.get_supported_indicators.
func (d *Driver) SupportedIndicators(ctx context.Context, _ driver.Node) ([]driver.Indicator, error) {
	return []driver.Indicator{
		{Component: "chassis", Name: "led-0", ReadOnly: true, States: []string{driver.IndicatorOff, driver.IndicatorOn}},
		{Component: "system", Name: "led", ReadOnly: false, States: []string{driver.IndicatorBlinking, driver.IndicatorOff, driver.IndicatorOn}},
	}, ctx.Err()
}

// IndicatorState is FakeManagement.get_indicator_state: "on" for every
// known indicator.
func (d *Driver) IndicatorState(ctx context.Context, n driver.Node, component, name string) (string, error) {
	all, err := d.SupportedIndicators(ctx, n)
	if err != nil {
		return "", err
	}
	knownComponent := false
	for _, ind := range all {
		if ind.Component != component {
			continue
		}
		knownComponent = true
		if ind.Name == name {
			return driver.IndicatorOn, nil
		}
	}
	if !knownComponent {
		return "", fault.New(fault.Invalid, "Invalid component %s specified.", component)
	}
	return "", fault.New(fault.Invalid, "Invalid indicator %s specified.", name)
}
