package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// Node sub-resources of the hardware configuration: the cached BIOS
// settings (1.40, registry fields 1.74) and firmware components (1.86), as
// Ironic's bios.py and firmware.py controllers serve them.

// --- BIOS (1.40) and firmware (1.86) ---

// biosFields are the setting fields a list shows by default, and with
// detail (or from 1.74 on one setting) those of the registry too (Ironic's
// _DEFAULT_RETURN_FIELDS, _DEFAULT_FIELDS_WITH_REGISTRY).
var (
	biosFields         = []string{"name", "value"}
	biosRegistryFields = []string{"name", "value", "attribute_type", "allowable_values", "lower_bound",
		"max_length", "min_length", "read_only", "reset_required", "unique", "upper_bound"}
	// biosQueryFields are the names ?fields= accepts (1.74 schema).
	biosQueryFields = []string{"allowable_values", "attribute_type", "created_at", "lower_bound", "links",
		"max_length", "min_length", "name", "node_uuid", "read_only", "reset_required", "unique",
		"updated_at", "value"}
)

// biosView is one cached setting as Ironic's object_to_dict writes it:
// created_at, updated_at, links, then the fields asked for, in order.
type biosView struct {
	s      storage.BIOSSetting
	node   string
	self   string
	base   string
	fields []string
}

func (b biosView) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	kv := func(k string, v any, first bool) {
		if !first {
			buf.WriteString(", ")
		}
		buf.WriteString(jsonString(k))
		buf.WriteString(": ")
		j, _ := json.Marshal(v)
		buf.Write(j)
	}
	buf.WriteByte('{')
	var updated any
	if b.s.UpdatedAt != nil {
		updated = ironicTime(*b.s.UpdatedAt)
	}
	kv("created_at", ironicTime(b.s.CreatedAt), true)
	kv("updated_at", updated, false)
	path := "nodes/" + b.node + "/bios/" + b.s.Name
	kv("links", []link{{Href: b.base + "/v1/" + path, Rel: "self"}, {Href: b.base + "/" + path, Rel: "bookmark"}}, false)
	for _, f := range b.fields {
		switch f {
		case "created_at", "updated_at", "links":
			continue
		}
		kv(f, b.field(f), false)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func (b biosView) field(f string) any {
	s := b.s
	switch f {
	case "name":
		return s.Name
	case "value":
		return s.Value
	case "attribute_type":
		return s.AttributeType
	case "allowable_values":
		if s.AllowableValues == nil {
			return nil
		}
		return s.AllowableValues
	case "lower_bound":
		return s.LowerBound
	case "upper_bound":
		return s.UpperBound
	case "min_length":
		return s.MinLength
	case "max_length":
		return s.MaxLength
	case "read_only":
		return s.ReadOnly
	case "reset_required":
		return s.ResetRequired
	case "unique":
		return s.Unique
	case "node_uuid":
		return b.node
	}
	return nil
}

// listBIOS is GET /v1/nodes/{ident}/bios: the settings cached from the
// node's BMC (none for interfaces that cache nothing). ?detail and
// ?fields from 1.74.
func (a *API) listBIOS(w http.ResponseWriter, r *http.Request) error {
	detail, fields, err := returnFields(r.URL.Query(), versionOf(r).AtLeast(74))
	if err != nil {
		return err
	}
	for _, f := range fields {
		if !slices.Contains(biosQueryFields, f) {
			return errInvalid("Schema error for query: %s is not one of %s", pyrepr.Repr(f), pyrepr.Repr(biosQueryFields))
		}
	}
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	settings, err := a.cond.Store().ListBIOSSettings(r.Context(), n.UUID)
	if err != nil {
		return err
	}
	show := biosFields
	switch {
	case detail != nil && *detail:
		show = biosRegistryFields
	case len(fields) > 0:
		show = fields
	}
	out := make([]biosView, len(settings))
	for i, s := range settings {
		// Ironic links the list's settings under the ident as given.
		out[i] = biosView{s: s, node: r.PathValue("ident"), base: baseURL(r), fields: show}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"bios": out})
}

// getBIOSSetting is GET /v1/nodes/{ident}/bios/{setting}: {name: setting},
// with the registry fields from 1.74.
func (a *API) getBIOSSetting(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	name := r.PathValue("setting")
	settings, err := a.cond.Store().ListBIOSSettings(r.Context(), n.UUID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(settings, func(s storage.BIOSSetting) bool { return s.Name == name })
	if i < 0 {
		return fault.New(fault.NotFound, "Node %s doesn't have a BIOS setting '%s'", n.UUID, name)
	}
	show := biosFields
	if versionOf(r).AtLeast(74) {
		show = biosRegistryFields
	}
	return writeJSON(w, http.StatusOK, map[string]any{name: biosView{s: settings[i], node: n.UUID, base: baseURL(r), fields: show}})
}

// firmwareIdentityFields are the firmware component fields of API 1.114.
var firmwareIdentityFields = []string{"model", "serial_number", "vendor"}

// firmwareFields are the fields of a firmware component (Ironic's
// index_request_query enum), created_at and updated_at always shown.
var firmwareFields = []string{"created_at", "updated_at", "component", "initial_version", "current_version",
	"last_version_flashed", "vendor", "model", "serial_number"}

// listFirmware is GET /v1/nodes/{ident}/firmware: the components the
// node's firmware interface cached (at the end of cleaning, after a
// firmware.update step), as Ironic's NodeFirmwareController: component and
// versions by default, vendor/model/serial_number too from 1.114, every
// field with ?detail=True, or those ?fields= names.
func (a *API) listFirmware(w http.ResponseWriter, r *http.Request) error {
	detail, fields, err := returnFields(r.URL.Query(), true)
	if err != nil {
		return err
	}
	var bad []string
	for _, f := range firmwareIdentityFields {
		if versionOf(r).AtLeast(114) {
			break
		}
		for _, g := range fields {
			if f == g {
				bad = append(bad, f)
				break
			}
		}
	}
	if len(bad) > 0 {
		return errInvalid("Fields %s are not allowed in this API version. They require at least API version 1.114.", strings.Join(bad, ", "))
	}
	for _, f := range fields {
		if !slices.Contains(firmwareFields, f) {
			return errInvalid("Field(s) \"%s\" are not valid", f)
		}
	}
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	comps, err := a.cond.Store().ListFirmwareComponents(r.Context(), n.UUID)
	if err != nil {
		return err
	}
	show := fields
	switch {
	case detail != nil && *detail:
		show = firmwareFields
	case fields == nil:
		show = []string{"component", "initial_version", "current_version", "last_version_flashed"}
		if versionOf(r).AtLeast(114) {
			show = append(show, firmwareIdentityFields...)
		}
	}
	out := make([]any, 0, len(comps))
	for _, c := range comps {
		all := map[string]any{
			"created_at": ironicTime(c.CreatedAt), "updated_at": timeOrNil(c.UpdatedAt), "component": c.Component,
			"initial_version": c.InitialVersion, "current_version": c.CurrentVersion,
			"last_version_flashed": c.LastVersionFlashed, "vendor": c.Vendor, "model": c.Model, "serial_number": c.SerialNumber,
		}
		m := map[string]any{"created_at": all["created_at"], "updated_at": all["updated_at"]}
		for _, f := range show {
			m[f] = all[f]
		}
		out = append(out, m)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"firmware": out})
}
