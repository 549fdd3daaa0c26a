package redfish

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
)

var _ driver.RAID = (*Driver)(nil)

type rfRAIDStorage struct {
	ID                 string `json:"Id"`
	Name               string
	StorageControllers []struct {
		Name               string
		SupportedRAIDTypes *[]string
	}
	Controllers link
	Drives      []link
	Volumes     link
}

type rfRAIDDrive struct {
	ID                                       string `json:"Id"`
	CapacityBytes                            num
	MediaType, Protocol, Model, SerialNumber string
}

type rfVolume struct {
	ID            string `json:"Id"`
	Name          string
	RAIDType      string
	CapacityBytes num
}

// storageCtl is one Storage resource as the RAID code needs it.
type storageCtl struct {
	path      string
	ctl       driver.RAIDController
	drivePath map[string]string // drive Id -> @odata.id
	volumes   string            // Volumes collection path ("" when absent)
	buildable bool              // not a controller that lists no RAID types
}

// storages reads the system's Storage resources with their drives. A BMC
// without Storage cannot do hardware RAID.
func (o *op) storages() ([]*storageCtl, error) {
	path, err := o.systemPath()
	if err != nil {
		return nil, err
	}
	var sys rfSystem
	if err := getJSON(o.c, path, &sys); err != nil {
		return nil, opError(o.inf, err, "Redfish read of system %s failed", path)
	}
	if sys.Storage.ID == "" {
		return nil, fault.New(fault.Invalid, "Redfish BMC %s reports no Storage for system %s: hardware RAID needs a storage controller", o.c.ep.address, path)
	}
	ids, err := members(o.c, sys.Storage.ID)
	if err != nil {
		return nil, opError(o.inf, err, "Redfish read of the Storage collection failed")
	}
	var out []*storageCtl
	for _, id := range ids {
		var st rfRAIDStorage
		if err := getJSON(o.c, id, &st); err != nil {
			return nil, opError(o.inf, err, "Redfish read of storage %s failed", id)
		}
		sc := &storageCtl{path: id, drivePath: map[string]string{}, volumes: st.Volumes.ID, buildable: true,
			ctl: driver.RAIDController{ID: st.ID, Name: st.Name}}
		// Ironic's get_first_controller: the first StorageControllers
		// entry, else the first member of Controllers.
		var types *[]string
		if len(st.StorageControllers) > 0 {
			types = st.StorageControllers[0].SupportedRAIDTypes
		} else if st.Controllers.ID != "" {
			if cs, err := members(o.c, st.Controllers.ID); err == nil && len(cs) > 0 {
				var c struct{ SupportedRAIDTypes *[]string }
				if getJSON(o.c, cs[0], &c) == nil {
					types = c.SupportedRAIDTypes
				}
			}
		}
		if types != nil {
			sc.ctl.RAIDTypes = *types
			sc.buildable = len(*types) > 0
		}
		for _, l := range st.Drives {
			var d rfRAIDDrive
			if err := getJSON(o.c, l.ID, &d); err != nil {
				return nil, opError(o.inf, err, "Redfish read of drive %s failed", l.ID)
			}
			sc.drivePath[d.ID] = l.ID
			sc.ctl.Disks = append(sc.ctl.Disks, driver.PhysicalDisk{ID: d.ID, Controller: st.ID, CapacityBytes: int64(d.CapacityBytes.v),
				MediaType: d.MediaType, Protocol: d.Protocol, Model: d.Model, SerialNumber: d.SerialNumber})
		}
		out = append(out, sc)
	}
	return out, nil
}

// RAIDControllers lists the controllers that build volumes.
func (d *Driver) RAIDControllers(ctx context.Context, n driver.Node) ([]driver.RAIDController, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return nil, err
	}
	sts, err := o.storages()
	if err != nil {
		return nil, err
	}
	var out []driver.RAIDController
	for _, s := range sts {
		if s.buildable {
			out = append(out, s.ctl)
		}
	}
	return out, nil
}

// applyTime is what the Volumes collection offers: Immediate if it can,
// else OnReset (the volume is built at the next reset), else "" (the BMC
// does not say).
func (o *op) applyTime(volumes string) string {
	var c struct {
		Support struct{ SupportedValues []string } `json:"@Redfish.OperationApplyTimeSupport"`
	}
	if volumes == "" || getJSON(o.c, volumes, &c) != nil {
		return ""
	}
	switch {
	case slices.Contains(c.Support.SupportedValues, "Immediate"):
		return "Immediate"
	case slices.Contains(c.Support.SupportedValues, "OnReset"):
		return "OnReset"
	}
	return ""
}

// submit sends a create (POST) or delete (DELETE) and waits for its task
// when the BMC answers 202 (bounded by the operation's context).
func (o *op) submit(method, path string, payload map[string]any, what string) error {
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = o.c.Post(path, payload)
	} else if len(payload) > 0 {
		resp, err = o.c.do(method, path, payload, nil)
	} else {
		resp, err = o.c.Delete(path)
	}
	if err != nil {
		return opError(o.inf, err, "Redfish %s failed", what)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil
	}
	body, _ := io.ReadAll(resp.Body)
	mon := monitorOf(resp, body)
	if mon == "" {
		return nil
	}
	_, err = o.waitTask(mon, what)
	return err
}

// CreateRAIDConfiguration is Ironic's RedfishRAID.create_configuration:
// plan the volumes (raidplan.go), keep the root and/or the other ones, and
// create them controller by controller (POST to its Volumes: RAIDType,
// CapacityBytes unless MAX, Links.Drives, Name). A level the controller
// does not list in SupportedRAIDTypes is refused before anything is
// created. Tasks the BMC answers with are waited for (bounded by ctx);
// a controller that builds only OnReset gets a reboot of the node.
func (d *Driver) CreateRAIDConfiguration(ctx context.Context, n driver.Node, target []map[string]any, createRoot, createNonRoot bool) error {
	o, err := d.begin(ctx, n)
	if err != nil {
		return err
	}
	sts, err := o.storages()
	if err != nil {
		return err
	}
	var disks []driver.PhysicalDisk
	byID := map[string]*storageCtl{}
	for _, s := range sts {
		byID[s.ctl.ID] = s
		if s.buildable {
			disks = append(disks, s.ctl.Disks...)
		}
	}
	if len(disks) == 0 {
		return fault.New(fault.Invalid, "Redfish BMC %s reports no physical disks on a RAID controller of node %s", o.c.ep.address, n.UUID)
	}
	vols, err := planVolumes(n.UUID, target, disks)
	if err != nil {
		return err
	}
	var todo []*plannedVolume
	for _, v := range vols {
		if (v.Root && createRoot) || (!v.Root && createNonRoot) {
			todo = append(todo, v)
		}
	}
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].Controller < todo[j].Controller })
	for _, v := range todo {
		s := byID[v.Controller]
		if s == nil {
			return fault.New(fault.Invalid, "No storage controller found for node %s: controller %q is not one of %s", n.UUID, v.Controller, strings.Join(storageIDs(sts), ", "))
		}
		rt := RAIDType(v.Level)
		if len(s.ctl.RAIDTypes) > 0 && !slices.Contains(s.ctl.RAIDTypes, rt) {
			return fault.New(fault.Invalid, "RAID level %s (%s) is not supported by controller %s of node %s, which supports %s",
				v.Level, rt, s.ctl.ID, n.UUID, strings.Join(s.ctl.RAIDTypes, ", "))
		}
		if s.volumes == "" {
			return fault.New(fault.Invalid, "Storage controller %s of node %s has no Volumes collection", s.ctl.ID, n.UUID)
		}
	}
	reset := false
	for _, v := range todo {
		s := byID[v.Controller]
		payload := map[string]any{"RAIDType": RAIDType(v.Level)}
		if !v.Max {
			payload["CapacityBytes"] = v.SizeBytes
		}
		var links []any
		for _, id := range v.Disks {
			links = append(links, map[string]any{"@odata.id": s.drivePath[id]})
		}
		payload["Links"] = map[string]any{"Drives": links}
		if v.Name != "" {
			payload["Name"] = v.Name
		}
		at := o.applyTime(s.volumes)
		if at != "" {
			payload["@Redfish.OperationApplyTime"] = at
		}
		what := fmt.Sprintf("creation of a RAID %s volume on %s (%s)", v.Level, s.ctl.ID, strings.Join(v.Disks, ", "))
		d.log.InfoContext(ctx, "redfish: creating volume", "node", n.UUID, "controller", s.ctl.ID, "raid_type", payload["RAIDType"], "drives", v.Disks, "apply_time", at)
		if at == "OnReset" {
			reset = true
			// Submitted now, built at the reset below.
			if err := o.submitNoWait(http.MethodPost, s.volumes, payload, what); err != nil {
				return err
			}
			continue
		}
		if err := o.submit(http.MethodPost, s.volumes, payload, what); err != nil {
			return err
		}
	}
	if reset {
		return o.setPower(driver.Rebooting, 0, 0)
	}
	return nil
}

func (o *op) submitNoWait(method, path string, payload map[string]any, what string) error {
	resp, err := o.c.do(method, path, payload, nil)
	if err != nil {
		return opError(o.inf, err, "Redfish %s failed", what)
	}
	resp.Body.Close()
	return nil
}

func storageIDs(sts []*storageCtl) []string {
	var out []string
	for _, s := range sts {
		out = append(out, s.ctl.ID)
	}
	return out
}

// volumes lists a controller's volumes.
func (o *op) volumes(s *storageCtl) ([]rfVolume, []string, error) {
	if s.volumes == "" {
		return nil, nil, nil
	}
	ids, err := members(o.c, s.volumes)
	if err != nil {
		return nil, nil, opError(o.inf, err, "Redfish read of the volumes of %s failed", s.ctl.ID)
	}
	out := make([]rfVolume, 0, len(ids))
	for _, id := range ids {
		var v rfVolume
		if err := getJSON(o.c, id, &v); err != nil {
			return nil, nil, opError(o.inf, err, "Redfish read of volume %s failed", id)
		}
		out = append(out, v)
	}
	return out, ids, nil
}

// DeleteRAIDConfiguration is Ironic's delete_configuration: every volume
// with a RAIDType on every controller is deleted (tasks waited for; a
// controller that deletes only OnReset gets a reboot of the node).
func (d *Driver) DeleteRAIDConfiguration(ctx context.Context, n driver.Node) error {
	o, err := d.begin(ctx, n)
	if err != nil {
		return err
	}
	sts, err := o.storages()
	if err != nil {
		return err
	}
	reset := false
	for _, s := range sts {
		vols, paths, err := o.volumes(s)
		if err != nil {
			return err
		}
		at := ""
		if len(vols) > 0 {
			at = o.applyTime(s.volumes)
		}
		for i, v := range vols {
			if v.RAIDType == "" {
				continue
			}
			var payload map[string]any
			if at != "" {
				payload = map[string]any{"@Redfish.OperationApplyTime": at}
			}
			what := "deletion of volume " + v.ID + " on " + s.ctl.ID
			d.log.InfoContext(ctx, "redfish: deleting volume", "node", n.UUID, "controller", s.ctl.ID, "volume", v.ID, "apply_time", at)
			if at == "OnReset" {
				reset = true
				if err := o.submitNoWait(http.MethodDelete, paths[i], payload, what); err != nil {
					return err
				}
				continue
			}
			if err := o.submit(http.MethodDelete, paths[i], payload, what); err != nil {
				return err
			}
		}
	}
	if reset {
		return o.setPower(driver.Rebooting, 0, 0)
	}
	return nil
}

// RAIDConfig is Ironic's update_raid_config: every volume with a RAIDType,
// as {id, name, controller, size_gb, raid_level}.
func (d *Driver) RAIDConfig(ctx context.Context, n driver.Node) ([]driver.LogicalDisk, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return nil, err
	}
	sts, err := o.storages()
	if err != nil {
		return nil, err
	}
	out := []driver.LogicalDisk{}
	for _, s := range sts {
		vols, _, err := o.volumes(s)
		if err != nil {
			return nil, err
		}
		for _, v := range vols {
			lvl := RAIDLevelOf(v.RAIDType)
			if lvl == "" {
				continue
			}
			out = append(out, driver.LogicalDisk{ID: v.ID, Name: v.Name, Controller: s.ctl.ID, SizeGB: int64(v.CapacityBytes.v) / gib, RAIDLevel: lvl})
		}
	}
	return out, nil
}
