package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/storage"
)

// The bios interface's steps (Ironic's RedfishBIOS): apply_configuration
// and factory_reset stage settings in the BMC's pending settings, reboot
// the node to apply them and check them after the reboot. Both run in the
// conductor, in clean, service and deploy (priority 0: only on request),
// need no ramdisk, and cannot be aborted.

var applyConfigurationArgs = map[string]argInfo{
	"settings": {Description: "A list of BIOS settings to be applied", Required: true},
}

var biosStepTable = []stepDef{
	{iface: "bios", name: "apply_configuration", argsinfo: applyConfigurationArgs, clean: true, service: true, deploy: true, has: hasBIOS, run: applyBIOSStep},
	{iface: "bios", name: "factory_reset", argsinfo: map[string]argInfo{}, clean: true, service: true, deploy: true, has: hasBIOS, run: factoryResetBIOSStep},
}

func hasBIOS(hw *HardwareType, n *storage.Node) bool {
	_, ok := hw.BIOSOf(n)
	return ok
}

// step_state keys of the bios steps (Ironic's bios_state).
const (
	bsRebootRequested = "reboot_requested"
	bsRequestedAttrs  = "requested_bios_attrs"
	bsJob             = "job"
	bsVerifySince     = "verify_since"
)

// stepError is a step failure whose message is the node's last_error as
// it is (Ironic's step_error_handler), not wrapped in "failed step".
type stepError struct{ lastError string }

func (e *stepError) Error() string { return e.lastError }

func applyBIOSStep(ctx context.Context, e *stepEnv) (stepResult, error) {
	b, _ := e.hw.BIOSOf(e.node)
	if req, _ := e.state[bsRebootRequested].(bool); !req {
		attrs, err := e.c.biosRequest(ctx, e.node, e.args["settings"])
		if err != nil {
			return stepResult{}, err
		}
		res, err := b.ApplyBIOSSettings(ctx, e.dn, attrs)
		if err != nil {
			return stepResult{}, fmt.Errorf("Redfish BIOS apply configuration failed for node %s. Error: %v", e.node.UUID, err)
		}
		if !res.Written {
			e.c.log.InfoContext(ctx, "all requested BIOS settings already match, skipping apply and reboot", "node", e.node.UUID)
			return stepResult{}, e.c.cacheBIOSSettings(ctx, e.hw, e.node)
		}
		e.state[bsRebootRequested] = true
		e.state[bsRequestedAttrs] = attrs
		if res.Job != "" {
			e.state[bsJob] = res.Job
		}
		return stepResult{reboot: true, progress: map[string]any{"message": "BIOS settings staged; rebooting to apply them"}}, nil
	}
	if r, err := waitBIOSJob(ctx, e, b); r != nil || err != nil {
		return *r, err
	}
	requested, _ := e.state[bsRequestedAttrs].(map[string]any)
	current, pending, err := b.BIOSAttributes(ctx, e.dn)
	if err != nil {
		return stepResult{}, err
	}
	if left := unappliedBIOS(requested, current, pending); len(left) > 0 {
		// With the agent back the BIOS has run; without it (no ramdisk)
		// the node may still be in POST: wait, within the step timeout.
		if !e.ramdisk && !biosVerifyExpired(e) {
			return stepResult{poll: true, progress: map[string]any{"message": "waiting for the BIOS to apply the settings"}}, nil
		}
		e.c.log.WarnContext(ctx, "BIOS settings not updated", "node", e.node.UUID, "attrs", pyRepr(left))
		return stepResult{}, &stepError{fmt.Sprintf("Redfish BIOS apply_configuration step failed. Attributes %s are not updated.", pyRepr(left))}
	}
	clearBIOSState(e)
	return stepResult{}, e.c.cacheBIOSSettings(ctx, e.hw, e.node)
}

func factoryResetBIOSStep(ctx context.Context, e *stepEnv) (stepResult, error) {
	b, _ := e.hw.BIOSOf(e.node)
	if req, _ := e.state[bsRebootRequested].(bool); !req {
		res, err := b.FactoryResetBIOS(ctx, e.dn)
		if err != nil {
			return stepResult{}, fmt.Errorf("Redfish BIOS factory reset failed for node %s. Error: %v", e.node.UUID, err)
		}
		e.state[bsRebootRequested] = true
		if res.Job != "" {
			e.state[bsJob] = res.Job
		}
		return stepResult{reboot: true, progress: map[string]any{"message": "BIOS factory reset requested; rebooting to apply it"}}, nil
	}
	if r, err := waitBIOSJob(ctx, e, b); r != nil || err != nil {
		return *r, err
	}
	clearBIOSState(e)
	return stepResult{}, e.c.cacheBIOSSettings(ctx, e.hw, e.node)
}

// waitBIOSJob waits (by polls) for the BMC's configuration job of the
// step, when the BMC made one (iDRAC); nil, nil when there is none or it
// completed.
func waitBIOSJob(ctx context.Context, e *stepEnv, b driver.BIOS) (*stepResult, error) {
	id, _ := e.state[bsJob].(string)
	if id == "" {
		return nil, nil
	}
	j, err := b.BIOSJob(ctx, e.dn, id)
	if err != nil {
		// A BMC busy after the reboot is polled again (Ironic's periodic
		// check only logs it), until the step's time is up.
		if !biosVerifyExpired(e) {
			e.c.log.WarnContext(ctx, "reading the BMC's BIOS job failed; polling again", "node", e.node.UUID, "job", id, "err", err)
			return &stepResult{poll: true, progress: map[string]any{"job": id, "message": err.Error()}}, nil
		}
		return &stepResult{}, err
	}
	switch {
	case j.Failed:
		return &stepResult{}, &stepError{fmt.Sprintf("Redfish BIOS configuration job %s failed: %s", id, j.Message)}
	case !j.Done:
		return &stepResult{poll: true, progress: map[string]any{"job": id, "percent": j.Percent, "message": j.Message}}, nil
	}
	delete(e.state, bsJob)
	return nil, nil
}

func biosVerifyExpired(e *stepEnv) bool {
	since, _ := e.state[bsVerifySince].(string)
	if since == "" {
		e.state[bsVerifySince] = e.c.now().Format(time.RFC3339Nano)
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, since)
	return err != nil || e.c.now().Sub(t) > e.c.cfg.StepTimeout
}

func clearBIOSState(e *stepEnv) {
	for k := range e.state {
		delete(e.state, k)
	}
}

// unappliedBIOS is Ironic's _get_unapplied_bios_attrs: a requested value
// the current settings do not have, or (when the BMC does not keep a
// bigger pending set than was asked for) one still pending.
func unappliedBIOS(requested, current, pending map[string]any) map[string]any {
	left := map[string]any{}
	purge := len(pending) <= len(requested)
	for k, v := range requested {
		if !sameBIOSValue(v, current[k]) {
			left[k] = v
		} else if _, ok := pending[k]; purge && ok {
			left[k] = v
		}
	}
	return left
}

// sameBIOSValue compares values as JSON gives them (numbers as float64).
func sameBIOSValue(a, b any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// biosRequest reads apply_configuration's settings argument and checks
// it against the cached settings and their registry (Ironic's
// _validate_and_convert_settings): a read-only setting, a value not
// allowed, out of bounds or of the wrong length fails the step before
// anything is written; values are typed as the registry says. A setting
// the cache does not know goes to the BMC, which refuses it.
func (c *Conductor) biosRequest(ctx context.Context, n *storage.Node, raw any) (map[string]any, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("Invalid BIOS settings %s: a list of {\"name\": …, \"value\": …} objects is expected", pyRepr(raw))
	}
	cached, err := c.store.ListBIOSSettings(ctx, n.UUID)
	if err != nil {
		return nil, err
	}
	byName := map[string]storage.BIOSSetting{}
	for _, s := range cached {
		byName[s.Name] = s
	}
	attrs := map[string]any{}
	var invalid []string
	for _, x := range list {
		m, ok := x.(map[string]any)
		name, _ := m["name"].(string)
		value, has := m["value"]
		if !ok || name == "" || !has {
			return nil, fmt.Errorf("Invalid BIOS setting %s: each setting needs a name and a value", pyRepr(x))
		}
		attrs[name] = value
		cs, ok := byName[name]
		if !ok {
			continue
		}
		if cs.ReadOnly != nil && *cs.ReadOnly {
			invalid = append(invalid, name)
			continue
		}
		typ := ""
		if cs.AttributeType != nil {
			typ = *cs.AttributeType
		}
		str := fmt.Sprint(value)
		switch typ {
		case "Enumeration":
			if len(cs.AllowableValues) > 0 && !containsStr(cs.AllowableValues, str) {
				invalid = append(invalid, name)
			}
		case "Integer":
			i, err := strconv.ParseInt(strings.TrimSuffix(str, ".0"), 10, 64)
			if err != nil || (cs.LowerBound != nil && i < *cs.LowerBound) || (cs.UpperBound != nil && i > *cs.UpperBound) {
				invalid = append(invalid, name)
				continue
			}
			attrs[name] = i
		case "Boolean":
			if s, ok := value.(string); ok {
				attrs[name] = strings.EqualFold(s, "true")
			}
		case "String":
			l := int64(len([]rune(str)))
			if (cs.MinLength != nil && l < *cs.MinLength) || (cs.MaxLength != nil && l > *cs.MaxLength) {
				invalid = append(invalid, name)
			}
		}
	}
	if len(invalid) > 0 {
		return nil, &stepError{fmt.Sprintf("Redfish BIOS apply_configuration failed for node %s: invalid value for setting(s): %s", n.UUID, strings.Join(invalid, ", "))}
	}
	return attrs, nil
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// cacheBIOSSettings reads the node's settings with their registry from
// the BMC and stores them (Ironic's cache_bios_settings), replacing what
// was cached.
func (c *Conductor) cacheBIOSSettings(ctx context.Context, hw *HardwareType, n *storage.Node) error {
	b, ok := hw.BIOSOf(n)
	if !ok {
		return nil
	}
	settings, err := b.BIOSSettings(ctx, driverNode(n))
	if err != nil {
		return err
	}
	rows := make([]storage.BIOSSetting, len(settings))
	for i, s := range settings {
		rows[i] = storage.BIOSSetting{
			Name: s.Name, Value: s.Value, AttributeType: s.AttributeType,
			AllowableValues: s.AllowableValues, LowerBound: s.LowerBound, UpperBound: s.UpperBound,
			MinLength: s.MinLength, MaxLength: s.MaxLength, ReadOnly: s.ReadOnly,
			ResetRequired: s.ResetRequired, Unique: s.Unique,
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return c.store.SetBIOSSettings(ctx, n.UUID, rows)
}

// cacheBIOSQuietly is cacheBIOSSettings where Ironic only logs a failure
// (the end of manageable -> cleaning, verification). It is Ironic's
// node_update_cache: the firmware components are cached with it.
func (c *Conductor) cacheBIOSQuietly(ctx context.Context, n *storage.Node) {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return
	}
	c.cacheFirmware(ctx, hw, n)
	if err := c.cacheBIOSSettings(ctx, hw, n); err != nil {
		c.log.WarnContext(ctx, "caching BIOS settings failed", "node", n.UUID, "err", err)
	}
}

// CacheBIOSSettings refreshes the node's cached BIOS settings from its BMC.
func (c *Conductor) CacheBIOSSettings(ctx context.Context, ident string) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	return c.cacheBIOSSettings(ctx, hw, n)
}
