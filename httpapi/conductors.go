package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"castiron/engine"
	"castiron/storage"
)

type conductorField = field[storage.Conductor]

func conductorRead(name string, get func(v *viewCtx, c *storage.Conductor) any) conductorField {
	return conductorField{name, 49, 0, nil, nil, get, nil}
}

// conductors is Ironic's conductor table (API 1.49), read-only.
var conductorTable = newResource("conductor", []string{"hostname", "conductor_group", "links", "alive"},
	conductorField{"created_at", 49, fSort, nil, nil, func(_ *viewCtx, c *storage.Conductor) any { return ironicTime(c.CreatedAt) }, nil},
	conductorField{"updated_at", 49, fSort, nil, nil, func(_ *viewCtx, c *storage.Conductor) any { return timeOrNil(c.UpdatedAt) }, nil},
	conductorField{"hostname", 49, fSort, nil, nil, func(_ *viewCtx, c *storage.Conductor) any { return c.Hostname }, nil},
	conductorField{"conductor_group", 49, fSort, nil, nil, func(_ *viewCtx, c *storage.Conductor) any { return c.ConductorGroup }, nil},
	conductorRead("drivers", func(_ *viewCtx, c *storage.Conductor) any { return c.Drivers }),
	conductorRead("links", func(v *viewCtx, c *storage.Conductor) any { return selfLinks(v, "conductors", c.Hostname) }),
	conductorRead("alive", func(v *viewCtx, c *storage.Conductor) any { return v.cond.Alive(c) }),
)

// listConductors is GET /v1/conductors (1.49).
func (a *API) listConductors(w http.ResponseWriter, r *http.Request) error {
	fields, page, err := conductorTable.listQuery(r, r.URL.Query(), listOpts{fieldsFirst: true})
	if err != nil {
		return err
	}
	cs, err := a.cond.Store().ListConductors(r.Context(), page)
	if err != nil {
		return err
	}
	conductorTable.writePage(w, r, a.view(r), "conductors", "conductors", cs, func(c *storage.Conductor) string { return c.Hostname }, fields, page)
	return nil
}

func (a *API) getConductor(w http.ResponseWriter, r *http.Request) error {
	fields, err := conductorTable.parseFields(r.URL.Query().Get("fields"), versionOf(r))
	if err != nil {
		return err
	}
	c, err := a.cond.Store().GetConductor(r.Context(), r.PathValue("hostname"))
	if err != nil {
		return err
	}
	conductorTable.writeOne(w, a.view(r), http.StatusOK, c, fields)
	return nil
}

// getNodeConductor is GET /v1/nodes/{ident}/conductor? Ironic has no such
// endpoint; the node's "conductor" field names it. castiron serves it for
// operators (the core issue asks for it) with the conductor's view.
func (a *API) getNodeConductor(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	host := a.cond.ConductorFor(n)
	if host == nil {
		return errInvalid("No conductor serves node %s (conductor group %q, driver %s).", n.UUID, n.ConductorGroup, n.Driver)
	}
	r.SetPathValue("hostname", *host)
	return a.getConductor(w, r)
}

// Drivers.

func (a *API) driverDoc(r *http.Request, hw *engine.HardwareType, detail bool) map[string]any {
	base := baseURL(r)
	ver := versionOf(r)
	d := map[string]any{
		"name":  hw.Name,
		"hosts": a.cond.HostsFor(hw.Name),
		"links": []link{{Href: base + "/v1/drivers/" + hw.Name, Rel: "self"}, {Href: base + "/drivers/" + hw.Name, Rel: "bookmark"}},
	}
	if ver.AtLeast(14) {
		d["properties"] = []link{{Href: base + "/v1/drivers/" + hw.Name + "/properties", Rel: "self"}, {Href: base + "/drivers/" + hw.Name + "/properties", Rel: "bookmark"}}
	}
	if ver.AtLeast(30) {
		d["type"] = "dynamic"
	}
	if detail && ver.AtLeast(30) {
		gates := map[string]int{"storage": 33, "rescue": 38, "bios": 40, "firmware": 86}
		for _, kind := range engine.InterfaceKinds() {
			if min, ok := gates[kind]; ok && !ver.AtLeast(min) {
				continue
			}
			d["default_"+kind+"_interface"] = hw.Default(kind)
			d["enabled_"+kind+"_interfaces"] = hw.Interfaces[kind]
		}
	}
	return d
}

// listDrivers is GET /v1/drivers (hardware types; classic drivers are gone).
func (a *API) listDrivers(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	if qs.Has("fields") && qs.Has("detail") {
		if d, _ := parseBoolString(qs.Get("detail")); d {
			return errInvalid("Can not specify ?detail=True and fields in the same request.")
		}
	}
	if qs.Has("type") && !versionOf(r).AtLeast(30) {
		return errNotAcceptable()
	}
	fields, err := driverFields(r)
	if err != nil {
		return err
	}
	if t := qs.Get("type"); t != "" && t != "dynamic" && t != "classic" {
		return errInvalid("Invalid value for type: %s. Acceptable values are 'classic' or 'dynamic'", t)
	}
	detail := false
	if d := qs.Get("detail"); d != "" {
		if !versionOf(r).AtLeast(30) {
			return errNotAcceptable()
		}
		var err error
		if detail, err = parseBoolString(d); err != nil {
			return errInvalid("Invalid value for detail: %s", d)
		}
	}
	out := []map[string]any{}
	if qs.Get("type") != "classic" {
		for _, name := range a.cond.Hardware().Names() {
			hw, _ := a.cond.Hardware().Get(name)
			d := a.driverDoc(r, hw, detail)
			if err := sanitizeDriver(d, fields); err != nil {
				return err
			}
			out = append(out, d)
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"drivers": out})
}

func (a *API) getDriver(w http.ResponseWriter, r *http.Request) error {
	fields, err := driverFields(r)
	if err != nil {
		return err
	}
	hw, ok := a.cond.Hardware().Get(r.PathValue("name"))
	if !ok {
		return errDriverNotFound(r.PathValue("name"))
	}
	d := a.driverDoc(r, hw, true)
	if err := sanitizeDriver(d, fields); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, d)
}

// driverFields reads ?fields= of the driver endpoints (API 1.77).
func driverFields(r *http.Request) ([]string, error) {
	qs := r.URL.Query()
	if !qs.Has("fields") {
		return nil, nil
	}
	if !versionOf(r).AtLeast(77) {
		return nil, errNotAcceptable()
	}
	var out []string
	for _, f := range strings.Split(qs.Get("fields"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out, nil
}

// sanitizeDriver keeps only fields (plus links) of d, as Ironic's
// driver_sanitize; a field d does not have is a 400.
func sanitizeDriver(d map[string]any, fields []string) error {
	if fields == nil {
		return nil
	}
	var invalid []string
	for _, f := range fields {
		if _, ok := d[f]; !ok {
			invalid = append(invalid, f)
		}
	}
	if len(invalid) > 0 {
		return errInvalid("Field(s) \"%s\" are not valid", strings.Join(invalid, ", "))
	}
	for k := range d {
		if k != "links" && !slices.Contains(fields, k) {
			delete(d, k)
		}
	}
	return nil
}

func (a *API) getDriverProperties(w http.ResponseWriter, r *http.Request) error {
	hw, ok := a.cond.Hardware().Get(r.PathValue("name"))
	if !ok {
		return errDriverNotFound(r.PathValue("name"))
	}
	return writeJSON(w, http.StatusOK, hw.DriverProperties())
}
