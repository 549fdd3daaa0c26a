package engine

import (
	"context"
	"fmt"
	"strings"

	"castiron/fault"
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
// No management interface castiron has (fake, ipmitool, noop) can attach
// virtual media — as in Ironic, where only redfish and its relatives do — so
// the worker's outcome is always Ironic's UnsupportedDriverExtension, which
// is recorded at once. Castiron does not fetch the image first (Ironic does
// for image_download_source "local"): nothing could use it.
func (c *Conductor) AttachVirtualMedia(ctx context.Context, ident string, req VMediaRequest) error {
	source := req.ImageDownloadSource
	if source == "" {
		source = "local"
	}
	return c.vmediaAction(ctx, ident, "attach", func(n *storage.Node) string {
		prefix := fmt.Sprintf("Could not attach device %s to node %s: ", req.DeviceType, n.UUID)
		// image_utils.prepare_remote_image refuses a share URL the
		// conductor would have to download.
		scheme := URLScheme(req.ImageURL)
		if source == "local" && (scheme == "nfs" || scheme == "cifs" || scheme == "smb") {
			return prefix + fmt.Sprintf("image_download_source is set to 'local' but the image URL %s uses the %s protocol which cannot be downloaded by the conductor. Set image_download_source to 'http' or remove it to use the default.", req.ImageURL, scheme)
		}
		return prefix + unsupported(n, "attach_virtual_media").Error()
	})
}

// DetachVirtualMedia is Ironic's detach_virtual_media for the given device
// types (nil: all of them); as for attaching, the worker's failure is
// recorded in last_error and the node's history.
func (c *Conductor) DetachVirtualMedia(ctx context.Context, ident string, deviceTypes []string) error {
	return c.vmediaAction(ctx, ident, "detach", func(n *storage.Node) string {
		return fmt.Sprintf("Could not detach device(s) %s from node %s: %s", pyOptList(deviceTypes), n.UUID, unsupported(n, "detach_virtual_media").Error())
	})
}

// vmediaAction runs the synchronous part of a virtual media call and
// records the worker's failure, whose message outcome gives.
func (c *Conductor) vmediaAction(ctx context.Context, ident, verb string, outcome func(n *storage.Node) string) error {
	_, err := c.store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
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
		msg := outcome(n)
		n.LastError = strp(msg)
		c.log.Warn("virtual media "+verb+" failed", "node", n.UUID, "state", n.ProvisionState, "verb", verb+"_virtual_media", "err", msg)
		return &storage.Event{
			NodeUUID: n.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
			// node_history_record without an event_type, as Ironic calls it.
			EventType: "UNKNOWN", Severity: "ERROR", Event: msg,
			User: actorOf(ctx), Verb: verb + "_virtual_media",
			FromState: n.ProvisionState, ToState: n.ProvisionState,
		}, nil
	})
	return err
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
	return pyList(items)
}
