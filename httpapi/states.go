package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"time"

	"castiron/engine"
	"castiron/engine/driver"
	"castiron/fault"
	"castiron/fault/pyrepr"
)

// stateFields are the fields of GET /v1/nodes/{id}/states, in Ironic's order.
var stateFields = []string{"console_enabled", "last_error", "power_state", "provision_state",
	"target_power_state", "target_provision_state", "provision_updated_at",
	"raid_config", "target_raid_config", "boot_mode", "secure_boot"}

func (a *API) getStates(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	nodeTable.writeOne(w, a.view(r), http.StatusOK, n, stateFields)
	return nil
}

func (a *API) statesLocation(r *http.Request) string {
	return baseURL(r) + "/v1/nodes/" + r.PathValue("ident") + "/states"
}

// putProvision is PUT /v1/nodes/{id}/states/provision.
func (a *API) putProvision(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := decodeObject(r, "provision")
	if err != nil {
		if ver.AtLeast(1) && bytes.Contains([]byte(err.Error()), []byte("Malformed JSON")) {
			return errInvalid("Missing mandatory parameter: target")
		}
		return err
	}
	target, err := getString(body, "target", "provision")
	if err != nil {
		return err
	}
	if target == nil {
		return errInvalid("Missing mandatory parameter: target")
	}
	for k := range body {
		if !slices.Contains([]string{"target", "configdrive", "clean_steps", "deploy_steps", "rescue_password", "disable_ramdisk", "service_steps", "runbook"}, k) {
			return errInvalid("Unknown argument: \"%s\"", k)
		}
	}
	if min, ok := engine.VerbMinVersion(*target); ok && !ver.AtLeast(min) {
		return errNotAcceptable()
	}
	req := engine.ProvisionRequest{Target: *target}
	if req.CleanSteps, err = getStepList(body, "clean_steps"); err != nil {
		return err
	}
	if req.DeploySteps, err = getStepList(body, "deploy_steps"); err != nil {
		return err
	}
	if req.ServiceSteps, err = getStepList(body, "service_steps"); err != nil {
		return err
	}
	if req.DeploySteps != nil && !ver.AtLeast(69) {
		return errNotAcceptable()
	}
	if req.RescuePassword, err = getString(body, "rescue_password", "provision"); err != nil {
		return err
	}
	if req.DisableRamdisk, err = getBool(body, "disable_ramdisk", "provision"); err != nil {
		return err
	}
	if err := disableRamdiskGate(*target, req.DisableRamdisk, ver); err != nil {
		return err
	}
	switch rb := body["runbook"].(type) {
	case nil:
	case string:
		if rb != "" { // Ironic: "if runbook:"
			req.Prepare = a.provisionRunbook(ver, rb, a.runbookUse(r))
		}
	default: // args.types(type(None), str)
		return errInvalid("Expected types <class 'NoneType'>, <class 'str'> for runbook: %s", pyrepr.Str(rb))
	}
	if cd, ok := body["configdrive"]; ok && cd != nil {
		// Ironic's check_allow_configdrive: all of these are 400s.
		if *target == "rebuild" && !ver.AtLeast(35) {
			return errInvalid("Adding a config drive is only supported when setting provision state to active")
		}
		switch t := cd.(type) {
		case string:
		case map[string]any:
			if !ver.AtLeast(56) {
				return errInvalid("Providing a JSON object for configdrive is only supported starting with API version 1.56")
			}
			if _, has := t["vendor_data"]; has && !ver.AtLeast(59) {
				return errInvalid("Providing vendor_data in configdrive is only supported starting with API version 1.59")
			}
		default:
			return errInvalid("Invalid configdrive: %s is not a string or an object", pyrepr.Repr(cd))
		}
		req.ConfigDrive = cd
	}
	if *target == "abort" {
		n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
		if err != nil {
			return err
		}
		switch engine.State(n.ProvisionState) {
		case engine.InspectWait:
			if !ver.AtLeast(41) {
				return errNotAcceptable()
			}
		case engine.DeployWait:
			if !ver.AtLeast(110) { // Ironic's allow_deploy_abort
				return errNotAcceptable()
			}
		}
	}
	return accepted(w, a.cond.Provision(actorContext(r), r.PathValue("ident"), req), a.statesLocation(r))
}

// disableRamdiskVerbs are the verbs that take disable_ramdisk, with the
// version each came at (Ironic's check_allow_disable_ramdisk).
var disableRamdiskVerbs = map[string]int{"clean": 70, "service": 108}

// disableRamdiskGate is Ironic's check_allow_disable_ramdisk: 406 below the
// verb's version, 400 for any other verb.
func disableRamdiskGate(target string, disable *bool, ver Version) error {
	if disable == nil {
		return nil
	}
	min, ok := disableRamdiskVerbs[target]
	if !ok {
		return fault.New(fault.Invalid, "disable_ramdisk is supported only with manual cleaning or servicing")
	}
	if !ver.AtLeast(min) {
		return fault.New(fault.NotAcceptable, "disable_ramdisk is not acceptable in this API version")
	}
	return nil
}

// deleteProvision is DELETE /v1/nodes/{id}/states/provision: abort the running
// provision task (the deploy-abort blueprint, seed 001).
func (a *API) deleteProvision(w http.ResponseWriter, r *http.Request) error {
	return accepted(w, a.cond.AbortRunning(actorContext(r), r.PathValue("ident")), a.statesLocation(r))
}

// putPower is PUT /v1/nodes/{id}/states/power.
func (a *API) putPower(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, target, err := decodeString(r, "power", "target")
	if err != nil {
		return err
	}
	if target == nil {
		return errInvalid("Missing mandatory parameter: target")
	}
	if (*target == driver.SoftPowerOff || *target == driver.SoftRebooting) && !ver.AtLeast(27) {
		return errNotAcceptable()
	}
	var timeout time.Duration
	if t, ok := body["timeout"]; ok && t != nil {
		if !ver.AtLeast(27) {
			return errNotAcceptable()
		}
		secs, ok := t.(int64)
		if !ok || secs < 1 {
			return errInvalid("Invalid timeout value %s. The timeout must be a positive integer.", pyrepr.Repr(t))
		}
		timeout = time.Duration(secs) * time.Second
	}
	for k := range body {
		if k != "target" && k != "timeout" {
			return errInvalid("Unknown argument: \"%s\"", k)
		}
	}
	return accepted(w, a.cond.SetPower(actorContext(r), r.PathValue("ident"), *target, timeout), a.statesLocation(r))
}

// putMaintenance is PUT /v1/nodes/{id}/maintenance {"reason": "..."}.
func (a *API) putMaintenance(w http.ResponseWriter, r *http.Request) error {
	_, reason, err := decodeString(r, "maintenance", "reason")
	if err != nil {
		return err
	}
	return accepted(w, a.cond.SetMaintenance(actorContext(r), r.PathValue("ident"), true, reason), "")
}

func (a *API) deleteMaintenance(w http.ResponseWriter, r *http.Request) error {
	return accepted(w, a.cond.SetMaintenance(actorContext(r), r.PathValue("ident"), false, nil), "")
}

// putBootDevice is PUT /v1/nodes/{id}/management/boot_device.
func (a *API) putBootDevice(w http.ResponseWriter, r *http.Request) error {
	body, dev, err := decodeString(r, "boot_device", "boot_device")
	if err != nil {
		return err
	}
	if dev == nil {
		return errInvalid("Missing mandatory parameter: boot_device")
	}
	persistent := false
	if p, err := getBool(body, "persistent", "boot_device"); err != nil {
		return err
	} else if p != nil {
		persistent = *p
	}
	return noContent(w, a.cond.SetBootDevice(actorContext(r), r.PathValue("ident"), *dev, persistent))
}

func (a *API) getBootDevice(w http.ResponseWriter, r *http.Request) error {
	bd, err := a.cond.BootDevice(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	out := map[string]any{"boot_device": nil, "persistent": nil}
	if bd.BootDevice != "" {
		out["boot_device"] = bd.BootDevice
	}
	if bd.Persistent != nil {
		out["persistent"] = *bd.Persistent
	}
	return writeJSON(w, http.StatusOK, out)
}

func (a *API) getSupportedBootDevices(w http.ResponseWriter, r *http.Request) error {
	devs, err := a.cond.SupportedBootDevices(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"supported_boot_devices": devs})
}

// getValidate is GET /v1/nodes/{id}/validate.
func (a *API) getValidate(w http.ResponseWriter, r *http.Request) error {
	res, err := a.cond.Validate(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	ver := versionOf(r)
	// Interfaces hidden by the version are left out, as Ironic does.
	hide := map[string]int{"rescue": 38, "bios": 40, "firmware": 86, "storage": 33, "network": 20}
	for k, min := range hide {
		if !ver.AtLeast(min) {
			delete(res, k)
		}
	}
	return writeJSON(w, http.StatusOK, res)
}

// Traits (1.37).

func (a *API) getTraits(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"traits": n.Traits})
}

func (a *API) putTraits(w http.ResponseWriter, r *http.Request) error {
	if trait := r.PathValue("trait"); trait != "" {
		if err := a.cond.SetTraits(actorContext(r), r.PathValue("ident"), []string{trait}, true); err != nil {
			return err
		}
		w.Header().Set("Location", baseURL(r)+"/v1/nodes/"+r.PathValue("ident")+"/traits/"+trait)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	body, err := decodeObject(r, "traits")
	if err != nil {
		return err
	}
	raw, ok := body["traits"].([]any)
	if !ok {
		return errInvalid("Invalid traits: %s is not a list of strings", pyrepr.Repr(body["traits"]))
	}
	traits := make([]string, 0, len(raw))
	for _, t := range raw {
		s, ok := t.(string)
		if !ok {
			return errInvalid("Invalid trait: %s is not a string", pyrepr.Repr(t))
		}
		traits = append(traits, s)
	}
	return noContent(w, a.cond.SetTraits(actorContext(r), r.PathValue("ident"), traits, false))
}

func (a *API) deleteTraits(w http.ResponseWriter, r *http.Request) error {
	return removed(w, r, func(ctx context.Context) error {
		return a.cond.RemoveTrait(ctx, r.PathValue("ident"), r.PathValue("trait"))
	})
}
