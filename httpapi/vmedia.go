package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"castiron/engine"
	"castiron/engine/jsonschema"
)

// Virtual media (API 1.89): POST and DELETE /v1/nodes/{ident}/vmedia, as
// Ironic's NodeVmediaController. Both answer 204 once the conductor has
// taken the call; the attachment itself runs in Ironic's worker, whose
// failure (always, with castiron's management interfaces, none of which
// has virtual media) lands in the node's last_error and history.

// vmediaSchemes are image_publisher.VMEDIA_SUPPORTED_URL_SCHEMES.
var vmediaSchemes = []string{"http", "https", "nfs", "cifs", "smb"}

// vmediaAttachSchema is Ironic's VMEDIA_ATTACH_VALIDATOR.
var vmediaAttachSchema = jsonschema.Object(true, []string{"device_type", "image_url"},
	jsonschema.P("device_type", &jsonschema.Schema{Types: []string{"string"}, Enum: engine.VMediaDevices}),
	jsonschema.P("image_url", jsonschema.Types("string")),
	jsonschema.P("image_download_source", &jsonschema.Schema{Types: []string{"string"}, Enum: []string{"http", "local", "swift"}}),
)

// getVMedia is GET /v1/nodes/{ident}/vmedia (1.93): the node's virtual
// media devices, a JSON list. (From 1.89, the sub-resource, to 1.92
// Ironic's get aborts 404, as the route's gate does.)
func (a *API) getVMedia(w http.ResponseWriter, r *http.Request) error {
	devs, err := a.cond.VirtualMedia(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, devs)
}

// postVMedia is POST /v1/nodes/{ident}/vmedia {"device_type", "image_url",
// ["image_download_source"]}.
func (a *API) postVMedia(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "vmedia")
	if err != nil {
		return err
	}
	if err := checkQueryArgs(r.URL.Query()); err != nil {
		return err
	}
	if err := jsonschema.Check("Schema error for vmedia", vmediaAttachSchema, body); err != nil {
		return err
	}
	req := engine.VMediaRequest{
		DeviceType: body["device_type"].(string),
		ImageURL:   body["image_url"].(string),
	}
	req.ImageDownloadSource, _ = body["image_download_source"].(string)
	if s := engine.URLScheme(req.ImageURL); !slices.Contains(vmediaSchemes, s) {
		return errInvalid("Unsupported or missing URL scheme: %s", s)
	}
	return noContent(w, a.cond.AttachVirtualMedia(actorContext(r), r.PathValue("ident"), req))
}

// deleteVMedia is DELETE /v1/nodes/{ident}/vmedia[?device_types=cdrom,disk]:
// detach the given device types, or all of them.
func (a *API) deleteVMedia(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQueryArgs(q, "device_types"); err != nil {
		return err
	}
	var types []string
	if vals, ok := q["device_types"]; ok {
		types = vmediaTypeList(vals)
	}
	if len(types) > 0 {
		var invalid []string
		for _, t := range types {
			if !slices.Contains(engine.VMediaDevices, t) {
				invalid = append(invalid, t)
			}
		}
		if len(invalid) > 0 {
			return errInvalid("Invalid device type(s) %s (valid are %s)", strings.Join(invalid, ", "), strings.Join(engine.VMediaDevices, ", "))
		}
	}
	return noContent(w, a.cond.DetachVirtualMedia(actorContext(r), r.PathValue("ident"), types))
}

// vmediaTypeList is Ironic's args.string_list: one value is split on commas,
// trimmed, lower-cased and deduplicated; a repeated parameter (a list to
// pecan) is taken as it is.
func vmediaTypeList(vals []string) []string {
	if len(vals) > 1 {
		return vals
	}
	items := []string{}
	for _, v := range strings.Split(vals[0], ",") {
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "" && !slices.Contains(items, v) {
			items = append(items, v)
		}
	}
	return items
}
