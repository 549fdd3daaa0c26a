package redfish

import (
	"context"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
)

// Indicators as Ironic's redfish management offers them: the system's LED
// (named by the system's UUID), each chassis' LED (by chassis UUID) and
// each drive's LED ("storage-id:drive-id"), all settable to on, off or
// blinking.

var (
	_ driver.IndicatorReader  = (*Driver)(nil)
	_ driver.IndicatorSetter  = (*Driver)(nil)
	_ driver.NMIInjector      = (*Driver)(nil)
	_ driver.BootModeSetter   = (*Driver)(nil)
	_ driver.SecureBootSetter = (*Driver)(nil)
)

var ledStates = []string{driver.IndicatorBlinking, driver.IndicatorOff, driver.IndicatorOn}

func ledState(l schemas.IndicatorLED) string {
	switch l {
	case schemas.LitIndicatorLED:
		return driver.IndicatorOn
	case schemas.OffIndicatorLED:
		return driver.IndicatorOff
	case schemas.BlinkingIndicatorLED:
		return driver.IndicatorBlinking
	}
	return driver.IndicatorUnknown
}

func ledValue(state string) (schemas.IndicatorLED, bool) {
	switch state {
	case driver.IndicatorOn:
		return schemas.LitIndicatorLED, true
	case driver.IndicatorOff:
		return schemas.OffIndicatorLED, true
	case driver.IndicatorBlinking:
		return schemas.BlinkingIndicatorLED, true
	}
	return "", false
}

// indicator is one LED and the resource that holds it.
type indicator struct {
	driver.Indicator
	path  string
	state schemas.IndicatorLED
	patch func(payload any) error
}

// indicators reads every LED the node's resources report.
func (o *op) indicators() ([]indicator, error) {
	sys, err := o.system()
	if err != nil {
		return nil, err
	}
	var out []indicator
	add := func(component, name string, state schemas.IndicatorLED, e *schemas.Entity) {
		if state == "" {
			return
		}
		out = append(out, indicator{
			Indicator: driver.Indicator{Component: component, Name: name, States: ledStates},
			path:      e.ODataID, state: state,
			patch: func(p any) error { return e.Patch(e.ODataID, p) },
		})
	}
	chassis, err := sys.Chassis()
	if err != nil {
		o.d.log.DebugContext(o.c.ctx, "redfish: no chassis indicators", "node", o.inf.uuid, "err", err)
	}
	for _, c := range chassis {
		add("chassis", firstNonEmpty(c.UUID, c.ID), c.IndicatorLED, &c.Entity)
	}
	add("system", firstNonEmpty(sys.UUID, sys.ID), sys.IndicatorLED, &sys.Entity)
	storages, err := sys.Storage()
	if err != nil {
		o.d.log.DebugContext(o.c.ctx, "redfish: no drive indicators", "node", o.inf.uuid, "err", err)
	}
	for _, st := range storages {
		drives, err := st.Drives()
		if err != nil {
			o.d.log.DebugContext(o.c.ctx, "redfish: no drive indicators", "node", o.inf.uuid, "storage", st.ID, "err", err)
			continue
		}
		for _, dr := range drives {
			add("disk", st.ID+":"+dr.ID, dr.IndicatorLED, &dr.Entity)
		}
	}
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// SupportedIndicators lists the LEDs: chassis, system, disks.
func (d *Driver) SupportedIndicators(ctx context.Context, n driver.Node) ([]driver.Indicator, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return nil, err
	}
	inds, err := o.indicators()
	if err != nil {
		return nil, err
	}
	out := make([]driver.Indicator, len(inds))
	for i, ind := range inds {
		out[i] = ind.Indicator
	}
	return out, nil
}

// find returns the named indicator, or Ironic's MissingParameterValue.
func (o *op) find(component, name string) (indicator, error) {
	inds, err := o.indicators()
	if err != nil {
		return indicator{}, err
	}
	for _, ind := range inds {
		if ind.Component == component && ind.Name == name {
			return ind, nil
		}
	}
	return indicator{}, fault.New(fault.Invalid, "Unknown indicator %s for component %s of node %s", name, component, o.inf.uuid)
}

// IndicatorState reads one LED.
func (d *Driver) IndicatorState(ctx context.Context, n driver.Node, component, name string) (string, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return "", err
	}
	ind, err := o.find(component, name)
	if err != nil {
		return "", err
	}
	return ledState(ind.state), nil
}

// SetIndicatorState PATCHes one LED's IndicatorLED.
func (d *Driver) SetIndicatorState(ctx context.Context, n driver.Node, component, name, state string) error {
	led, ok := ledValue(state)
	if !ok {
		return fault.New(fault.Invalid, "Invalid indicator state %s specified.", state)
	}
	o, err := d.begin(ctx, n)
	if err != nil {
		return err
	}
	ind, err := o.find(component, name)
	if err != nil {
		return err
	}
	if err := ind.patch(map[string]any{"IndicatorLED": led}); err != nil {
		return opError(o.inf, err, "Redfish set %s indicator %s state %s failed", component, name, state)
	}
	return nil
}
