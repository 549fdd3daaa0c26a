package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
)

var _ driver.Firmware = (*Driver)(nil)

// maxPushImage bounds a firmware image pushed through MultipartHttpPushUri
// (it is sent from memory; BMC images are tens of MiB).
const maxPushImage = 1 << 30

// systemPath is the node's ComputerSystem path.
func (o *op) systemPath() (string, error) {
	if o.inf.systemID != "" {
		return o.inf.systemID, nil
	}
	return o.onlySystem()
}

// FirmwareComponents reads what Ironic's redfish firmware interface
// caches (cache_firmware_components): the System's BiosVersion ("bios"), the
// Manager's FirmwareVersion and Model ("bmc"), and per Chassis
// NetworkAdapter controller its FirmwarePackageVersion ("nic:" + serial
// number, else the adapter's Id). A BMC offering none of them is Ironic's
// UnsupportedDriverExtension.
func (d *Driver) FirmwareComponents(ctx context.Context, n driver.Node) ([]driver.FirmwareComponent, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return nil, err
	}
	path, err := o.systemPath()
	if err != nil {
		return nil, err
	}
	var sys struct {
		BiosVersion string
		Links       struct{ ManagedBy, Chassis []link }
	}
	if err := getJSON(o.c, path, &sys); err != nil {
		return nil, opError(o.inf, err, "Redfish read of system %s failed", path)
	}
	var out []driver.FirmwareComponent
	if sys.BiosVersion != "" {
		out = append(out, driver.FirmwareComponent{Component: driver.FirmwareBIOS, Version: sys.BiosVersion})
	}
	if len(sys.Links.ManagedBy) > 0 {
		var m struct{ FirmwareVersion, Model string }
		// Ironic carries on without the BMC's version when the Manager
		// cannot be read.
		if err := getJSON(o.c, sys.Links.ManagedBy[0].ID, &m); err != nil {
			d.log.WarnContext(ctx, "redfish: manager unreadable for firmware components", "node", n.UUID, "error", err)
		} else if m.FirmwareVersion != "" {
			out = append(out, driver.FirmwareComponent{Component: driver.FirmwareBMC, Version: m.FirmwareVersion, Model: m.Model})
		}
	}
	if len(sys.Links.Chassis) > 0 {
		nics, err := o.nicFirmware(sys.Links.Chassis[0].ID)
		if err != nil {
			// As Ironic: NetworkAdapters that cannot be read (HPE answers
			// 400 while the OS is not up) leave the NICs out.
			d.log.WarnContext(ctx, "redfish: network adapters unreadable for firmware components", "node", n.UUID, "error", err)
		}
		out = append(out, nics...)
	}
	if len(out) == 0 {
		return nil, fault.New(fault.Invalid, "Cannot retrieve firmware for node %s: no supported components", n.UUID)
	}
	return out, nil
}

func (o *op) nicFirmware(chassis string) ([]driver.FirmwareComponent, error) {
	var ch struct{ NetworkAdapters link }
	if err := getJSON(o.c, chassis, &ch); err != nil {
		return nil, err
	}
	ids, err := members(o.c, ch.NetworkAdapters.ID)
	if err != nil {
		return nil, err
	}
	var out []driver.FirmwareComponent
	for _, id := range ids {
		var a struct {
			ID                                string `json:"Id"`
			Manufacturer, Model, SerialNumber string
			Controllers                       []struct{ FirmwarePackageVersion string }
		}
		if err := getJSON(o.c, id, &a); err != nil {
			return out, err
		}
		for _, c := range a.Controllers {
			if c.FirmwarePackageVersion == "" {
				continue
			}
			out = append(out, driver.FirmwareComponent{
				Component: driver.FirmwareNICPrefix + firstNonEmpty(a.SerialNumber, a.ID), Version: c.FirmwarePackageVersion,
				Vendor: a.Manufacturer, Model: a.Model, SerialNumber: a.SerialNumber,
			})
		}
	}
	return out, nil
}

type rfUpdateService struct {
	MultipartHTTPPushURI string `json:"MultipartHttpPushUri"`
	Actions              struct {
		SimpleUpdate *struct {
			Target    string   `json:"target"`
			Protocols []string `json:"TransferProtocol@Redfish.AllowableValues"`
		} `json:"#UpdateService.SimpleUpdate"`
	}
}

// updateService reads the service root's UpdateService; a BMC without one
// cannot update firmware.
func (o *op) updateService() (rfUpdateService, error) {
	var root struct{ UpdateService link }
	var us rfUpdateService
	if err := getJSON(o.c, o.c.ep.root+"/", &root); err != nil {
		return us, opError(o.inf, err, "Redfish read of the service root failed")
	}
	if root.UpdateService.ID == "" {
		return us, fault.New(fault.Invalid, "Redfish BMC %s has no UpdateService: firmware cannot be updated through it", o.c.ep.address)
	}
	if err := getJSON(o.c, root.UpdateService.ID, &us); err != nil {
		return us, opError(o.inf, err, "Redfish read of the UpdateService failed")
	}
	return us, nil
}

// StartFirmwareUpdate hands one image to the BMC as Ironic does:
// UpdateService.SimpleUpdate with ImageURI (and Targets, the node's system,
// when the BMC manages several systems, for sushy-tools); a BMC without
// SimpleUpdate gets the image pushed to its MultipartHttpPushUri
// (DSP0266 §13.4). It returns the task monitor.
func (d *Driver) StartFirmwareUpdate(ctx context.Context, n driver.Node, img driver.FirmwareImage) (string, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return "", err
	}
	us, err := o.updateService()
	if err != nil {
		return "", err
	}
	var targets []string
	if sysIDs, err := members(o.c, o.c.ep.root+"/Systems"); err == nil && len(sysIDs) > 1 && o.inf.systemID != "" {
		targets = []string{o.inf.systemID}
	}
	var resp *http.Response
	switch {
	case us.Actions.SimpleUpdate != nil && us.Actions.SimpleUpdate.Target != "":
		body := map[string]any{"ImageURI": img.URL}
		if u, err := url.Parse(img.URL); err == nil && len(us.Actions.SimpleUpdate.Protocols) > 0 {
			body["TransferProtocol"] = strings.ToUpper(u.Scheme)
		}
		if targets != nil {
			body["Targets"] = targets
		}
		resp, err = o.c.Post(us.Actions.SimpleUpdate.Target, body)
		if err != nil {
			return "", opError(o.inf, err, "Redfish SimpleUpdate of %s from %s failed", img.Component, img.URL)
		}
	case us.MultipartHTTPPushURI != "" && img.Image != nil:
		data, ctype, err := multipartImage(img, targets)
		if err != nil {
			return "", err
		}
		resp, err = o.c.do(http.MethodPost, us.MultipartHTTPPushURI, rawBody{data: data, contentType: ctype}, nil)
		if err != nil {
			return "", opError(o.inf, err, "Redfish multipart push of %s failed", img.Component)
		}
	default:
		return "", fault.New(fault.Invalid, "Redfish BMC %s offers neither UpdateService.SimpleUpdate nor a MultipartHttpPushUri", o.c.ep.address)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	mon := monitorOf(resp, body)
	if mon == "" {
		return "", &bmcError{msg: fmt.Sprintf("Redfish BMC %s accepted the update of %s (HTTP %d) without a task monitor", o.c.ep.address, img.Component, resp.StatusCode)}
	}
	return mon, nil
}

func multipartImage(img driver.FirmwareImage, targets []string) ([]byte, string, error) {
	r, size, err := img.Image()
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	if size > maxPushImage {
		return nil, "", fault.New(fault.Invalid, "Firmware image for %s is %d bytes: a multipart push is limited to %d", img.Component, size, int64(maxPushImage))
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	params, _ := json.Marshal(map[string]any{"Targets": append([]string{}, targets...)})
	pw, _ := mw.CreateFormField("UpdateParameters")
	_, _ = pw.Write(params)
	fw, err := mw.CreateFormFile("UpdateFile", "firmware.bin")
	if err != nil {
		return nil, "", err
	}
	if _, err := io.Copy(fw, io.LimitReader(r, maxPushImage)); err != nil {
		return nil, "", err
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), mw.FormDataContentType(), nil
}

// FirmwareTask reads the update's task once.
func (d *Driver) FirmwareTask(ctx context.Context, n driver.Node, task string) (driver.TaskState, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return driver.TaskState{}, err
	}
	return o.taskState(task)
}
