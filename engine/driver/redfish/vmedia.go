package redfish

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
)

// mediaDevice is Ironic's device name for a slot (the first kind it
// serves, a cdrom first: CD and DVD are both a cdrom, as in Ironic's
// VMEDIA_DEVICES_MAP with its DVD fallback).
func mediaDevice(v *schemas.VirtualMedia) string {
	for _, d := range []string{driver.MediaCDROM, driver.MediaDisk, driver.MediaFloppy} {
		if serves(v, d) {
			return d
		}
	}
	return ""
}

// serves reports whether slot v takes media of kind device: a slot lists
// every type it takes (DMTF's Floppy1 takes Floppy and USBStick).
func serves(v *schemas.VirtualMedia, device string) bool {
	types := v.MediaTypes
	if len(types) == 0 && v.MediaType != "" {
		types = []schemas.VirtualMediaType{v.MediaType}
	}
	for _, t := range types {
		switch {
		case device == driver.MediaCDROM && (t == schemas.CDVirtualMediaType || t == schemas.DVDVirtualMediaType),
			device == driver.MediaDisk && t == schemas.USBStickVirtualMediaType,
			device == driver.MediaFloppy && t == schemas.FloppyVirtualMediaType:
			return true
		}
	}
	return false
}

func validMediaDevice(device string) bool {
	return device == driver.MediaCDROM || device == driver.MediaDisk || device == driver.MediaFloppy
}

// slotGroups lists the node's virtual media collections: the system's when
// it has slots (sushy-tools, some OpenBMC), otherwise each of its managers'
// (iDRAC, iLO, XClarity). withManagers also adds the managers' when the
// system has slots (ejecting looks everywhere, as Ironic does).
func (o *op) slotGroups(sys *schemas.ComputerSystem, withManagers bool) ([][]*schemas.VirtualMedia, error) {
	var groups [][]*schemas.VirtualMedia
	// A Manager may link the System's own collection (sushy-tools does):
	// each slot is listed once, so it is ejected once.
	seen := map[string]bool{}
	add := func(slots []*schemas.VirtualMedia) {
		var fresh []*schemas.VirtualMedia
		for _, v := range slots {
			if id := strings.TrimRight(v.ODataID, "/"); !seen[id] {
				seen[id] = true
				fresh = append(fresh, v)
			}
		}
		if len(fresh) > 0 {
			groups = append(groups, fresh)
		}
	}
	own, err := sys.VirtualMedia()
	if err != nil {
		return nil, opError(o.inf, err, "Redfish read of the system's virtual media failed")
	}
	if len(own) > 0 {
		add(own)
		if !withManagers {
			return groups, nil
		}
	}
	managers, err := sys.ManagedBy()
	if err != nil {
		return nil, opError(o.inf, err, "Redfish read of the system's managers failed")
	}
	for _, m := range managers {
		slots, err := m.VirtualMedia()
		if err != nil {
			if len(groups) > 0 && errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, opError(o.inf, err, "Redfish read of manager %s's virtual media failed", m.ID)
		}
		add(slots)
	}
	return groups, nil
}

// MediaState lists the virtual media devices and what they hold.
func (d *Driver) MediaState(ctx context.Context, n driver.Node) ([]driver.MediaSlot, error) {
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return nil, err
	}
	groups, err := o.slotGroups(sys, false)
	if err != nil {
		return nil, err
	}
	var out []driver.MediaSlot
	for _, g := range groups {
		for _, v := range g {
			types := make([]string, len(v.MediaTypes))
			for i, t := range v.MediaTypes {
				types[i] = string(t)
			}
			out = append(out, driver.MediaSlot{ID: v.ID, Path: v.ODataID, Device: mediaDevice(v), MediaTypes: types,
				Inserted: v.Inserted != nil && *v.Inserted, Image: v.Image})
		}
	}
	return out, nil
}

// InsertMedia attaches url to the first slot of kind device that takes it,
// ejecting it first, as Ironic's _insert_vmedia does: a slot that refuses
// the request (400, 405) passes to the next one; any other failure ends it.
func (d *Driver) InsertMedia(ctx context.Context, n driver.Node, device, url string) error {
	if !validMediaDevice(device) {
		return fault.New(fault.Invalid, "Invalid virtual media device %s specified.", device)
	}
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	groups, err := o.slotGroups(sys, false)
	if err != nil {
		return err
	}
	var refused []error
	for _, g := range groups {
		for _, v := range g {
			if !serves(v, device) {
				continue
			}
			if v.Inserted != nil && *v.Inserted {
				if _, err := v.EjectMedia(); err != nil {
					d.log.DebugContext(ctx, "redfish: eject before insert failed", "node", o.inf.uuid, "slot", v.ODataID, "err", err)
				}
			}
			_, err := v.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: url, Inserted: new(true), WriteProtected: new(true)})
			if err == nil {
				d.log.InfoContext(ctx, "redfish: virtual media inserted", "node", o.inf.uuid, "slot", v.ODataID, "device", device, "image", url)
				return nil
			}
			var rf *schemas.Error
			if errors.As(err, &rf) && (rf.HTTPReturnedStatusCode == http.StatusBadRequest || rf.HTTPReturnedStatusCode == http.StatusMethodNotAllowed) {
				refused = append(refused, err)
				continue
			}
			return opError(o.inf, err, "Virtual media mount of %s into %s failed", url, v.ODataID)
		}
	}
	switch len(refused) {
	case 0:
		return fault.New(fault.Invalid, "No suitable virtual media device found for node %s to mount image %s", o.inf.uuid, url)
	case 1:
		return fault.Wrap(fault.Invalid, refused[0], "Virtual media mount failed for node %s with image %s. Error: %v", o.inf.uuid, url, refused[0])
	}
	return fault.Wrap(fault.Invalid, refused[len(refused)-1], "Virtual media mount failed for node %s with image %s after multiple attempts. First error: %v. Last error: %v",
		o.inf.uuid, url, refused[0], refused[len(refused)-1])
}

// EjectMedia ejects every inserted slot of kind device ("": all kinds), on
// the system and on its managers.
func (d *Driver) EjectMedia(ctx context.Context, n driver.Node, device string) error {
	if device != "" && !validMediaDevice(device) {
		return fault.New(fault.Invalid, "Invalid virtual media device %s specified.", device)
	}
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	groups, err := o.slotGroups(sys, true)
	if err != nil {
		return err
	}
	for _, g := range groups {
		for _, v := range g {
			if device != "" && !serves(v, device) {
				continue
			}
			// Some BMCs leave Inserted out; an image then means inserted.
			if inserted := v.Inserted != nil && *v.Inserted; !inserted && (v.Inserted != nil || v.Image == "") {
				continue
			}
			if _, err := v.EjectMedia(); err != nil {
				return opError(o.inf, err, "Virtual media eject from %s failed", v.ODataID)
			}
			d.log.InfoContext(ctx, "redfish: virtual media ejected", "node", o.inf.uuid, "slot", v.ODataID)
		}
	}
	return nil
}
