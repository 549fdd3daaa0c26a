package httpapi

import (
	"net/http"
	"strings"

	"castiron/fault"
	"castiron/fault/pyrepr"
)

// putInjectNMI is PUT /v1/nodes/{ident}/management/inject_nmi (1.29): 204,
// synchronous, as Ironic's InjectNmiController.
func (a *API) putInjectNMI(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, a.cond.InjectNMI(actorContext(r), r.PathValue("ident")))
}

// bootStateTarget reads {"target": ...} for the 1.76 boot mode and secure
// boot endpoints, after Ironic's order: the node is retrieved first (404),
// then the version is checked (404 with Ironic's message).
func (a *API) bootStateTarget(r *http.Request, resource string) (any, bool, error) {
	body, err := decodeObject(r, resource)
	if err != nil {
		return nil, false, err
	}
	for k := range body {
		if k != "target" {
			return nil, false, errInvalid("Unknown argument: \"%s\"", k)
		}
	}
	if _, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident")); err != nil {
		return nil, false, err
	}
	if !versionOf(r).AtLeast(76) {
		return nil, false, fault.New(fault.NotFound, "This endpoint is supported starting with the API version 1.76")
	}
	target, present := body["target"]
	if !present {
		return nil, false, errInvalid("Missing mandatory parameter: target")
	}
	return target, true, nil
}

// putBootMode is PUT /v1/nodes/{ident}/states/boot_mode (1.76): 202, the
// change runs in the background.
func (a *API) putBootMode(w http.ResponseWriter, r *http.Request) error {
	target, _, err := a.bootStateTarget(r, "boot_mode")
	if err != nil {
		return err
	}
	if target != nil {
		if _, ok := target.(string); !ok { // args.string
			return errInvalid("Expected string for target: %s", pyrepr.Str(target))
		}
	}
	mode, _ := target.(string)
	if mode != "bios" && mode != "uefi" {
		return errInvalid("Invalid boot mode %s requested for node. Allowed boot modes are: bios, uefi", pyrepr.Str(target))
	}
	return accepted(w, a.cond.SetBootMode(actorContext(r), r.PathValue("ident"), mode), a.statesLocation(r))
}

// putSecureBoot is PUT /v1/nodes/{ident}/states/secure_boot (1.76): 202, the
// change runs in the background.
func (a *API) putSecureBoot(w http.ResponseWriter, r *http.Request) error {
	target, _, err := a.bootStateTarget(r, "secure_boot")
	if err != nil {
		return err
	}
	if target == nil {
		return errInvalid("Invalid secure_boot None requested for node. Allowed secure_boot states are: True, False) ")
	}
	on, err := argBool("target", target)
	if err != nil {
		return err
	}
	return accepted(w, a.cond.SetSecureBoot(actorContext(r), r.PathValue("ident"), on), a.statesLocation(r))
}

// indicatorView is one entry of GET /v1/nodes/{ident}/management/indicators,
// Ironic's indicator_convert_with_links.
type indicatorView struct {
	Name      string   `json:"name"`
	Component string   `json:"component"`
	ReadOnly  bool     `json:"readonly"`
	States    []string `json:"states"`
	Links     []link   `json:"links"`
}

// listIndicators is GET /v1/nodes/{ident}/management/indicators. Ironic
// declares it in 1.63 but never gates it, so neither does castiron.
func (a *API) listIndicators(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	_, inds, err := a.cond.SupportedIndicators(r.Context(), ident)
	if err != nil {
		return err
	}
	out := make([]indicatorView, 0, len(inds))
	base := baseURL(r)
	for _, ind := range inds {
		unique := ind.Name + "@" + ind.Component
		states := ind.States
		if states == nil {
			states = []string{}
		}
		tail := "/nodes/" + ident + "/management/indicators/" + unique
		out = append(out, indicatorView{
			Name: unique, Component: ind.Component, ReadOnly: ind.ReadOnly, States: states,
			Links: []link{{Href: base + "/v1" + tail, Rel: "self"}, {Href: base + tail, Rel: "bookmark"}},
		})
	}
	return writeJSON(w, http.StatusOK, map[string]any{"indicators": out})
}

// indicatorAtComponent is Ironic's IndicatorAtComponent(unique_name=...):
// "name@component", split at the first "@".
func indicatorAtComponent(unique string) (component, name string, err error) {
	i := strings.Index(unique, "@")
	if i < 0 {
		return "", "", errInvalid("Malformed indicator name \"%s\"", unique)
	}
	return unique[i+1:], unique[:i], nil
}

// getIndicator is GET /v1/nodes/{ident}/management/indicators/{name@component}.
func (a *API) getIndicator(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident")); err != nil {
		return err
	}
	component, name, err := indicatorAtComponent(r.PathValue("indicator"))
	if err != nil {
		return err
	}
	state, err := a.cond.IndicatorState(r.Context(), r.PathValue("ident"), component, name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"state": state})
}

// putIndicator is PUT /v1/nodes/{ident}/management/indicators/{name@component}
// {"state": "..."}: 204.
func (a *API) putIndicator(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "indicator")
	if err != nil {
		return err
	}
	for k := range body {
		if k != "state" {
			return errInvalid("Unknown argument: \"%s\"", k)
		}
	}
	v, present := body["state"]
	if !present {
		return errInvalid("Missing mandatory parameter: state")
	}
	state, ok := v.(string)
	if v != nil && !ok { // args.string
		return errInvalid("Expected string for state: %s", pyrepr.Str(v))
	}
	if _, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident")); err != nil {
		return err
	}
	component, name, err := indicatorAtComponent(r.PathValue("indicator"))
	if err != nil {
		return err
	}
	return noContent(w, a.cond.SetIndicatorState(actorContext(r), r.PathValue("ident"), component, name, state))
}
