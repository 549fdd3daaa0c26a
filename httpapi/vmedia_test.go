package httpapi

import (
	"context"
	"net/http"
	"testing"

	"castiron/storage"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestVMediaAttachDetach(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"name": "vm"})
	path := "/v1/nodes/" + id + "/vmedia"
	good := map[string]any{"device_type": "cdrom", "image_url": "http://images.example/boot.iso"}

	lastError := func() any {
		t.Helper()
		return h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t)["last_error"]
	}

	// Ironic's fake management has no virtual media: the call is taken
	// (204) and the worker's UnsupportedDriverExtension lands in last_error
	// and the node's history.
	h.expect(http.StatusNoContent, "POST", path, "1.89", good)
	want := "Could not attach device cdrom to node " + id + ": Driver fake-hardware does not support attach_virtual_media (disabled or not implemented)."
	if got := lastError(); got != want {
		t.Errorf("last_error = %v\nwant %s", got, want)
	}
	hist := h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"/history?detail=true", latest, nil).json(t)["history"].([]any)
	last := hist[len(hist)-1].(map[string]any)
	if last["event"] != want || last["severity"] != "ERROR" || last["event_type"] != "UNKNOWN" {
		t.Errorf("history = %v", last)
	}

	h.expect(http.StatusNoContent, "DELETE", path, "1.89", nil)
	if got, want := lastError(), "Could not detach device(s) None from node "+id+": Driver fake-hardware does not support detach_virtual_media (disabled or not implemented)."; got != want {
		t.Errorf("last_error = %v\nwant %s", got, want)
	}
	h.expect(http.StatusNoContent, "DELETE", "/v1/nodes/vm/vmedia?device_types=CDROM,%20floppy,cdrom", latest, nil)
	if got, want := lastError(), "Could not detach device(s) ['cdrom', 'floppy'] from node "+id+": Driver fake-hardware does not support detach_virtual_media (disabled or not implemented)."; got != want {
		t.Errorf("last_error = %v\nwant %s", got, want)
	}

	// Shares need image_download_source http: the conductor cannot fetch them.
	h.expect(http.StatusNoContent, "POST", path, latest, map[string]any{"device_type": "disk", "image_url": "nfs://srv/share/img"})
	if got, want := lastError(), "Could not attach device disk to node "+id+": image_download_source is set to 'local' but the image URL nfs://srv/share/img uses the nfs protocol which cannot be downloaded by the conductor. Set image_download_source to 'http' or remove it to use the default."; got != want {
		t.Errorf("last_error = %v\nwant %s", got, want)
	}
	h.expect(http.StatusNoContent, "POST", path, latest, map[string]any{"device_type": "floppy", "image_url": "NFS://srv/img", "image_download_source": "http"})
	if got, want := lastError(), "Could not attach device floppy to node "+id+": Driver fake-hardware does not support attach_virtual_media (disabled or not implemented)."; got != want {
		t.Errorf("last_error = %v\nwant %s", got, want)
	}

	// manual-management (noop management) answers the same way.
	mm := h.createNode(map[string]any{"driver": "manual-management"})["uuid"].(string)
	h.expect(http.StatusNoContent, "POST", "/v1/nodes/"+mm+"/vmedia", latest, good)
	if got := h.expect(http.StatusOK, "GET", "/v1/nodes/"+mm, latest, nil).json(t)["last_error"]; got != "Could not attach device cdrom to node "+mm+": Driver manual-management does not support attach_virtual_media (disabled or not implemented)." {
		t.Errorf("manual-management last_error = %v", got)
	}

	// Errors, in Ironic's order: version, body, query, schema, URL scheme,
	// node, lock, power failure.
	for _, c := range []struct {
		method, path, ver string
		body              any
		status            int
		msg               string
	}{
		{"POST", path, "1.88", good, 404, "Resource could not be found."},
		{"DELETE", path, "1.88", nil, 404, "Resource could not be found."},
		{"GET", path, "1.89", nil, 404, "Resource could not be found."},
		{"POST", path, latest, "[1]", 400, "Schema error for vmedia: [1] is not of type 'object'"},
		{"POST", path, latest, "", 400, "Schema error for vmedia: 'device_type' is a required property"},
		{"POST", path, latest, map[string]any{"device_type": "cdrom"}, 400, "Schema error for vmedia: 'image_url' is a required property"},
		{"POST", path, latest, map[string]any{"device_type": "usb", "image_url": "http://x"}, 400, "Schema error for vmedia: 'usb' is not one of ['disk', 'cdrom', 'floppy']"},
		{"POST", path, latest, map[string]any{"device_type": "cdrom", "image_url": 5}, 400, "Schema error for vmedia: 5 is not of type 'string'"},
		{"POST", path, latest, map[string]any{"device_type": "cdrom", "image_url": "http://x", "image_download_source": "ftp"}, 400, "Schema error for vmedia: 'ftp' is not one of ['http', 'local', 'swift']"},
		{"POST", path, latest, map[string]any{"device_type": "cdrom", "image_url": "http://x", "username": "u"}, 400, "Schema error for vmedia: Additional properties are not allowed ('username' was unexpected)"},
		{"POST", path + "?force=1", latest, good, 400, "Unexpected arguments: force"},
		{"POST", path, latest, map[string]any{"device_type": "cdrom", "image_url": "ftp://x/y.iso"}, 400, "Unsupported or missing URL scheme: ftp"},
		{"POST", path, latest, map[string]any{"device_type": "cdrom", "image_url": "/srv/y.iso"}, 400, "Unsupported or missing URL scheme: "},
		{"POST", "/v1/nodes/nosuch/vmedia", latest, good, 404, "Node nosuch could not be found."},
		{"DELETE", path + "?device_types=cdrom,usb,tape", latest, nil, 400, "Invalid device type(s) usb, tape (valid are disk, cdrom, floppy)"},
		{"DELETE", path + "?device_type=cdrom", latest, nil, 400, "Unexpected arguments: device_type"},
		{"DELETE", "/v1/nodes/nosuch/vmedia", latest, nil, 404, "Node nosuch could not be found."},
	} {
		wantFault(t, h.do(c.method, c.path, c.ver, c.body), c.status, c.msg)
	}
	r := h.do("PUT", path, latest, good)
	if r.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT vmedia: %d %s", r.status, r.body)
	}

	// A node held by a task answers NodeLocked.
	ctx := context.Background()
	if _, err := h.store.UpdateNode(ctx, id, func(n *storage.Node) (*storage.Event, error) {
		n.Reservation = strPtr("other-host")
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	locked := "Node " + id + " is locked by host other-host, please retry after the current operation is completed."
	wantFault(t, h.do("POST", path, latest, good), 409, locked)
	wantFault(t, h.do("DELETE", path, latest, nil), 409, locked)

	// Maintenance for a power failure: Ironic's TemporaryFailure (503).
	if _, err := h.store.UpdateNode(ctx, id, func(n *storage.Node) (*storage.Event, error) {
		n.Reservation = nil
		n.Maintenance = true
		n.Fault = strPtr("power failure")
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	wantFault(t, h.do("POST", path, latest, good), 503, "Unable to attach virtual media for node "+id+" due to power failure state")
	wantFault(t, h.do("DELETE", path, latest, nil), 503, "Unable to detach virtual media for node "+id+" due to power failure state")
}

// TestVMediaGophercloud drives the endpoints with gophercloud's typed calls.
func TestVMediaGophercloud(t *testing.T) {
	h := newAPI(t)
	c := gopherClient(t, h)
	ctx := gctx(t)
	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	err = nodes.AttachVirtualMedia(ctx, c, n.UUID, nodes.AttachVirtualMediaOpts{
		DeviceType: nodes.VirtualMediaCD, ImageURL: "https://images.example/x.iso", ImageDownloadSource: nodes.ImageDownloadSourceHTTP,
	}).ExtractErr()
	if err != nil {
		t.Fatal(err)
	}
	err = nodes.DetachVirtualMedia(ctx, c, n.UUID, nodes.DetachVirtualMediaOpts{
		DeviceTypes: []nodes.VirtualMediaDeviceType{nodes.VirtualMediaCD, nodes.VirtualMediaDisk},
	}).ExtractErr()
	if err != nil {
		t.Fatal(err)
	}
	got, err := nodes.Get(ctx, c, n.UUID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if want := "Could not detach device(s) ['cdrom', 'disk'] from node " + n.UUID + ": Driver fake-hardware does not support detach_virtual_media (disabled or not implemented)."; got.LastError != want {
		t.Errorf("last_error = %q", got.LastError)
	}
	err = nodes.AttachVirtualMedia(ctx, c, n.UUID, nodes.AttachVirtualMediaOpts{DeviceType: "usb", ImageURL: "http://x"}).ExtractErr()
	wantCode(t, err, http.StatusBadRequest)
	c.Microversion = "1.88"
	err = nodes.DetachVirtualMedia(ctx, c, n.UUID, nodes.DetachVirtualMediaOpts{}).ExtractErr()
	wantCode(t, err, http.StatusNotFound)
}

func strPtr(s string) *string { return &s }
