package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
)

// The bios interfaces "redfish" and "idrac-redfish" (Ironic's RedfishBIOS
// and DracRedfishBIOS): the system's Bios resource, its attribute
// registry, writes to the pending settings object (@Redfish.Settings)
// applied at the next reset, and Bios.ResetBios. iDRAC applies pending
// settings only through a configuration job, which it makes when the
// write carries an apply time: idrac-redfish always sends OnReset and
// reports the job for the engine to wait on after the reboot.

// BIOS is a bios interface over the driver's sessions.
type BIOS struct {
	d     *Driver
	idrac bool
}

var _ driver.BIOS = (*BIOS)(nil)

// BIOSInterface returns the bios interface named name: "redfish" or
// "idrac-redfish" (nil for another name).
func (d *Driver) BIOSInterface(name string) driver.BIOS {
	switch name {
	case "redfish":
		return &BIOS{d: d}
	case "idrac-redfish":
		return &BIOS{d: d, idrac: true}
	}
	return nil
}

// Validate checks driver_info.
func (b *BIOS) Validate(n driver.Node) error { return b.d.Validate(n) }

// rfBios is what castiron reads of a Bios resource (gofish keeps the
// settings object and apply times private).
type rfBios struct {
	ODataID           string `json:"@odata.id"`
	AttributeRegistry string
	Attributes        map[string]any
	Settings          struct {
		SettingsObject struct {
			ID string `json:"@odata.id"`
		}
		SupportedApplyTimes []string
	} `json:"@Redfish.Settings"`
}

// biosOf reads the node's system and its Bios resource; a system without
// one does not support BIOS settings.
func (b *BIOS) biosOf(ctx context.Context, n driver.Node) (*op, *schemas.ComputerSystem, *rfBios, error) {
	o, sys, err := b.d.open(ctx, n)
	if err != nil {
		return nil, nil, nil, err
	}
	var raw struct {
		Bios struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := getJSON(o.c, sys.ODataID, &raw); err != nil {
		return nil, nil, nil, opError(o.inf, err, "Redfish read of system %s failed", sys.ODataID)
	}
	if raw.Bios.ID == "" {
		return nil, nil, nil, fault.New(fault.Invalid, "Cannot fetch BIOS attributes for node %s, BIOS settings are not supported.", n.UUID)
	}
	var bios rfBios
	if err := getJSON(o.c, raw.Bios.ID, &bios); err != nil {
		return nil, nil, nil, opError(o.inf, err, "Redfish read of BIOS %s failed", raw.Bios.ID)
	}
	return o, sys, &bios, nil
}

// pending reads the settings object's attributes (none when the BMC has
// no separate one).
func (o *op) pending(bios *rfBios) (map[string]any, error) {
	p := bios.Settings.SettingsObject.ID
	if p == "" || p == bios.ODataID {
		return map[string]any{}, nil
	}
	var s struct{ Attributes map[string]any }
	if err := getJSON(o.c, p, &s); err != nil {
		return nil, opError(o.inf, err, "Redfish read of BIOS pending settings %s failed", p)
	}
	if s.Attributes == nil {
		s.Attributes = map[string]any{}
	}
	return s.Attributes, nil
}

// registryEntry is one AttributeRegistry attribute, with signed bounds
// (gofish reads LowerBound as unsigned).
type registryEntry struct {
	AttributeName          string
	Type                   string
	Value                  []struct{ ValueName, ValueDisplayName string }
	LowerBound, UpperBound *float64
	MinLength, MaxLength   *float64
	ReadOnly               *bool
	ResetRequired          *bool
	IsSystemUniqueProperty *bool
}

// registry finds the Bios resource's attribute registry among the
// service's registry files (as sushy's get_attribute_registry): the file
// whose Id or Registry names it, its English (or first) location.
func (o *op) registry(name string) (map[string]registryEntry, error) {
	if name == "" {
		return nil, nil
	}
	files, err := members(o.c, o.c.ep.root+"/Registries")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		var file struct {
			ID       string `json:"Id"`
			Registry string
			Location []struct{ Language, URI string }
		}
		if err := getJSON(o.c, f, &file); err != nil {
			continue
		}
		if file.ID != name && file.Registry != name && !strings.HasPrefix(name, strings.TrimSuffix(file.Registry, ".0")) {
			continue
		}
		uri := ""
		for _, l := range file.Location {
			if uri == "" || l.Language == "en" {
				uri = l.URI
			}
		}
		if uri == "" {
			continue
		}
		var reg struct {
			RegistryEntries struct{ Attributes []registryEntry }
		}
		if err := getJSON(o.c, uri, &reg); err != nil {
			return nil, err
		}
		out := map[string]registryEntry{}
		for _, a := range reg.RegistryEntries.Attributes {
			out[a.AttributeName] = a
		}
		return out, nil
	}
	return nil, nil
}

// BIOSSettings reads the current settings with their registry entries
// (Ironic's cache_bios_settings); a registry that cannot be read leaves
// the registry fields unset, as Ironic does.
func (b *BIOS) BIOSSettings(ctx context.Context, n driver.Node) ([]driver.BIOSSetting, error) {
	o, _, bios, err := b.biosOf(ctx, n)
	if err != nil {
		return nil, err
	}
	reg, err := o.registry(bios.AttributeRegistry)
	if err != nil {
		b.d.log.InfoContext(ctx, "redfish: cannot read the BIOS attribute registry", "node", n.UUID, "err", err)
		reg = nil
	}
	out := make([]driver.BIOSSetting, 0, len(bios.Attributes))
	for name, v := range bios.Attributes {
		s := driver.BIOSSetting{Name: name}
		if v != nil {
			str := pyStr(v)
			s.Value = &str
		}
		if e, ok := reg[name]; ok {
			if e.Type != "" {
				t := e.Type
				s.AttributeType = &t
			}
			if e.Value != nil {
				s.AllowableValues = []string{}
				for _, x := range e.Value {
					if k := firstNonEmpty(x.ValueName, x.ValueDisplayName); k != "" {
						s.AllowableValues = append(s.AllowableValues, k)
					}
				}
			}
			s.LowerBound, s.UpperBound = intPtr(e.LowerBound), intPtr(e.UpperBound)
			s.MinLength, s.MaxLength = intPtr(e.MinLength), intPtr(e.MaxLength)
			s.ReadOnly, s.ResetRequired, s.Unique = e.ReadOnly, e.ResetRequired, e.IsSystemUniqueProperty
		}
		out = append(out, s)
	}
	return out, nil
}

func intPtr(f *float64) *int64 {
	if f == nil {
		return nil
	}
	i := int64(math.Round(*f))
	return &i
}

// pyStr is the string Ironic stores for a setting's value (Python's str of
// what the BMC sent): True/False, integers without a fraction.
func pyStr(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case bool:
		if t {
			return "True"
		}
		return "False"
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			return strconv.FormatInt(int64(t), 10)
		}
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	j, _ := json.Marshal(v)
	return string(j)
}

// BIOSAttributes reads the current and pending values.
func (b *BIOS) BIOSAttributes(ctx context.Context, n driver.Node) (map[string]any, map[string]any, error) {
	o, _, bios, err := b.biosOf(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	pending, err := o.pending(bios)
	if err != nil {
		return nil, nil, err
	}
	return bios.Attributes, pending, nil
}

// ApplyBIOSSettings stages settings, unless every one already has its
// value, current and pending (Ironic then skips the apply and the
// reboot). The apply time is OnReset where the BMC lists it (always on
// iDRAC, whose job it makes then is reported).
func (b *BIOS) ApplyBIOSSettings(ctx context.Context, n driver.Node, settings map[string]any) (driver.BIOSApply, error) {
	o, sys, bios, err := b.biosOf(ctx, n)
	if err != nil {
		return driver.BIOSApply{}, err
	}
	pending, err := o.pending(bios)
	if err != nil {
		return driver.BIOSApply{}, err
	}
	match := true
	for k, v := range settings {
		if !sameValue(bios.Attributes[k], v) {
			match = false
			break
		}
		if p, ok := pending[k]; ok && !sameValue(p, v) {
			match = false
			break
		}
	}
	if match {
		return driver.BIOSApply{}, nil
	}
	applyTime := ""
	for _, t := range bios.Settings.SupportedApplyTimes {
		if t == string(schemas.OnResetSettingsApplyTime) {
			applyTime = t
		}
	}
	if b.idrac {
		applyTime = string(schemas.OnResetSettingsApplyTime)
	}
	gb, err := sys.Bios()
	if err != nil {
		return driver.BIOSApply{}, opError(o.inf, err, "Redfish read of BIOS failed")
	}
	task, err := gb.UpdateBiosAttributesApplyAtWithTask(schemas.SettingsAttributes(settings), schemas.SettingsApplyTime(applyTime))
	if err != nil {
		return driver.BIOSApply{}, err
	}
	res := driver.BIOSApply{Written: true, ApplyTime: applyTime}
	if task != nil {
		res.Job = task.TaskMonitor
	}
	return res, nil
}

// sameValue compares a BMC's value with a requested one, numbers by value.
func sameValue(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	return pyStr(a) == pyStr(b) && fmt.Sprintf("%T", a) != "string" && fmt.Sprintf("%T", b) != "string"
}

// FactoryResetBIOS posts Bios.ResetBios; the defaults apply at the next
// reset.
func (b *BIOS) FactoryResetBIOS(ctx context.Context, n driver.Node) (driver.BIOSApply, error) {
	o, sys, _, err := b.biosOf(ctx, n)
	if err != nil {
		return driver.BIOSApply{}, err
	}
	gb, err := sys.Bios()
	if err != nil {
		return driver.BIOSApply{}, opError(o.inf, err, "Redfish read of BIOS failed")
	}
	task, err := gb.ResetBios()
	if err != nil {
		return driver.BIOSApply{}, err
	}
	res := driver.BIOSApply{Written: true}
	if task != nil {
		res.Job = task.TaskMonitor
	}
	return res, nil
}

// BIOSJob reads a job (iDRAC's DellJob: JobState, PercentComplete) or a
// Redfish task (TaskState, PercentComplete) at the URI the BMC gave.
func (b *BIOS) BIOSJob(ctx context.Context, n driver.Node, id string) (driver.BIOSJob, error) {
	o, err := b.d.begin(ctx, n)
	if err != nil {
		return driver.BIOSJob{}, err
	}
	var j struct {
		JobState, TaskState, Message string
		PercentComplete              *float64
		Messages                     []struct{ Message string }
	}
	resp, err := o.c.Get(id)
	if err != nil {
		return driver.BIOSJob{}, opError(o.inf, err, "Redfish read of job %s failed", id)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return driver.BIOSJob{}, opError(o.inf, err, "Redfish read of job %s failed", id)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		// A task monitor answers 204 once its task is gone: done.
		return driver.BIOSJob{Done: true, Percent: 100}, nil
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return driver.BIOSJob{}, fmt.Errorf("Redfish BMC %s: job %s is not valid JSON: %w", o.c.ep.address, id, err)
	}
	out := driver.BIOSJob{Message: j.Message}
	if out.Message == "" && len(j.Messages) > 0 {
		out.Message = j.Messages[len(j.Messages)-1].Message
	}
	if j.PercentComplete != nil {
		out.Percent = int(*j.PercentComplete)
	}
	switch firstNonEmpty(j.JobState, j.TaskState) {
	case "Completed":
		out.Done = true
	case "Failed", "CompletedWithErrors", "Exception", "Killed", "Cancelled":
		out.Done, out.Failed = true, true
	}
	return out, nil
}
