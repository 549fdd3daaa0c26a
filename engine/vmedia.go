package engine

import (
	"context"
	"fmt"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// VMediaDevices are the device types a virtual media image may be attached
// as (Ironic's boot_devices.VMEDIA_DEVICES, in its order).
var VMediaDevices = []string{"disk", "cdrom", "floppy"}

// VMediaRequest is POST /v1/nodes/{id}/vmedia (API 1.89).
type VMediaRequest struct {
	DeviceType          string
	ImageURL            string
	ImageDownloadSource string // "http", "local" (default) or "swift"
}

// AttachVirtualMedia is Ironic's attach_virtual_media: with an exclusive
// lock it validates the management interface, refuses a node in
// maintenance for a power failure, clears last_error and hands the
// attachment to a worker. The worker's failures land in last_error and the
// node's history, never in the API's answer.
//
// A management interface with virtual media (driver.VirtualMedia: redfish)
// inserts the image in the worker; for the others (fake, ipmitool, noop),
// as in Ironic, the outcome is UnsupportedDriverExtension, recorded at
// once. Castiron does not fetch the image first (Ironic does for
// image_download_source "local" and serves it itself): the BMC fetches the
// URL as given, whatever the source says.
func (c *Conductor) AttachVirtualMedia(ctx context.Context, ident string, req VMediaRequest) error {
	source := req.ImageDownloadSource
	if source == "" {
		source = "local"
	}
	return c.vmediaAction(ctx, ident, "attach", func(n *storage.Node) (string, string) {
		prefix := fmt.Sprintf("Could not attach device %s to node %s: ", req.DeviceType, n.UUID)
		// image_utils.prepare_remote_image refuses a share URL the
		// conductor would have to download.
		scheme := URLScheme(req.ImageURL)
		if source == "local" && (scheme == "nfs" || scheme == "cifs" || scheme == "smb") {
			return prefix, fmt.Sprintf("image_download_source is set to 'local' but the image URL %s uses the %s protocol which cannot be downloaded by the conductor. Set image_download_source to 'http' or remove it to use the default.", req.ImageURL, scheme)
		}
		return prefix, ""
	}, func(ctx context.Context, vm driver.VirtualMedia, dn driver.Node) error {
		return vm.InsertMedia(ctx, dn, req.DeviceType, req.ImageURL)
	})
}

// DetachVirtualMedia is Ironic's detach_virtual_media for the given device
// types (nil: all of them); as for attaching, the worker's failure is
// recorded in last_error and the node's history.
func (c *Conductor) DetachVirtualMedia(ctx context.Context, ident string, deviceTypes []string) error {
	return c.vmediaAction(ctx, ident, "detach", func(n *storage.Node) (string, string) {
		return fmt.Sprintf("Could not detach device(s) %s from node %s: ", pyOptList(deviceTypes), n.UUID), ""
	}, func(ctx context.Context, vm driver.VirtualMedia, dn driver.Node) error {
		if deviceTypes == nil {
			return vm.EjectMedia(ctx, dn, "")
		}
		for _, d := range deviceTypes {
			if err := vm.EjectMedia(ctx, dn, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// vmediaAction runs the synchronous part of a virtual media call: check
// gives the failure message's prefix and, when the call cannot go on, the
// reason, recorded at once; otherwise the node is reserved and run does the
// work in the background, its failure recorded the same way.
func (c *Conductor) vmediaAction(ctx context.Context, ident, verb string, check func(n *storage.Node) (string, string),
	run func(ctx context.Context, vm driver.VirtualMedia, dn driver.Node) error) error {
	var prefix string
	var vm driver.VirtualMedia
	updated, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		hw, err := c.hardwareOf(n)
		if err != nil {
			return nil, err
		}
		if err := hw.Management.Validate(driverNode(n)); err != nil {
			return nil, err
		}
		if n.Maintenance && deref(n.Fault) == "power failure" {
			return nil, fault.New(fault.Unavailable, "Unable to %s virtual media for node %s due to power failure state", verb, n.UUID)
		}
		p, reason := check(n)
		prefix = p
		feature, ok := managementFeature[driver.VirtualMedia](n, hw)
		if reason == "" && !ok {
			reason = unsupported(n, verb+"_virtual_media").Error()
		}
		if reason != "" {
			return c.vmediaFailed(ctx, n, verb, prefix+reason), nil
		}
		vm = feature
		n.LastError = nil
		n.Reservation = strp(c.cfg.Hostname)
		return nil, nil
	})
	if err != nil || vm == nil {
		return err
	}
	c.spawn(ctx, func(ctx context.Context) {
		opErr := run(ctx, vm, driverNode(updated))
		_, err := c.store.UpdateNode(context.WithoutCancel(ctx), updated.UUID, func(n *storage.Node) (*storage.Event, error) {
			n.Reservation = nil
			if opErr != nil {
				return c.vmediaFailed(ctx, n, verb, prefix+opErr.Error()), nil
			}
			return nil, nil
		})
		switch {
		case err != nil:
			c.log.ErrorContext(ctx, "virtual media: could not record the result", "node", updated.UUID, "verb", verb+"_virtual_media", "err", err)
		case opErr == nil:
			c.log.InfoContext(ctx, "virtual media "+verb+" done", "node", updated.UUID, "state", updated.ProvisionState, "verb", verb+"_virtual_media")
		}
	})
	return nil
}

// vmediaFailed records msg as n's last_error and returns its history event
// (node_history_record without an event_type, as Ironic calls it).
func (c *Conductor) vmediaFailed(ctx context.Context, n *storage.Node, verb, msg string) *storage.Event {
	n.LastError = strp(msg)
	c.log.WarnContext(ctx, "virtual media "+verb+" failed", "node", n.UUID, "state", n.ProvisionState, "verb", verb+"_virtual_media", "err", msg)
	return &storage.Event{
		NodeUUID: n.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
		EventType: "UNKNOWN", Severity: "ERROR", Event: msg,
		User: actorOf(ctx), Project: projectOf(ctx), Verb: verb + "_virtual_media",
		FromState: n.ProvisionState, ToState: n.ProvisionState,
	}
}

// URLScheme is the scheme Python's urllib.parse.urlparse finds: the
// lower-cased run of scheme characters before the first ':', if it starts
// with a letter; "" otherwise.
func URLScheme(raw string) string {
	raw = strings.TrimLeft(raw, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	raw = strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(raw)
	i := strings.IndexByte(raw, ':')
	if i <= 0 {
		return ""
	}
	c0 := raw[0]
	if !(c0 >= 'a' && c0 <= 'z' || c0 >= 'A' && c0 <= 'Z') {
		return ""
	}
	for _, ch := range raw[:i] {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '+' || ch == '-' || ch == '.') {
			return ""
		}
	}
	return strings.ToLower(raw[:i])
}

// pyOptList is Python's repr of an optional list of str (None for nil).
func pyOptList(items []string) string {
	if items == nil {
		return "None"
	}
	return pyrepr.Repr(items)
}

// VMediaDevice is one virtual media device as GET /v1/nodes/{id}/vmedia
// (API 1.93) lists it: Ironic's redfish get_vmedia keys.
type VMediaDevice struct {
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	Image      string   `json:"image"`
}

// VirtualMedia is Ironic's get_virtual_media: with a shared lock (a busy
// node answers too) it validates the management interface and asks the
// BMC what its virtual media devices hold. A management interface without
// virtual media is UnsupportedDriverExtension.
func (c *Conductor) VirtualMedia(ctx context.Context, ident string) ([]VMediaDevice, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return nil, err
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return nil, err
	}
	vm, ok := managementFeature[driver.VirtualMedia](n, hw)
	if !ok {
		return nil, unsupported(n, "get_virtual_media")
	}
	slots, err := vm.MediaState(ctx, driverNode(n))
	if err != nil {
		return nil, err
	}
	out := make([]VMediaDevice, 0, len(slots))
	for _, s := range slots {
		types := s.MediaTypes
		if types == nil {
			types = []string{}
		}
		out = append(out, VMediaDevice{MediaTypes: types, Inserted: s.Inserted, Image: s.Image})
	}
	return out, nil
}
