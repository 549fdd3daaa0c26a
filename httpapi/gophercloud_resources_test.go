package httpapi

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/allocations"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/conductors"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/drivers"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
)

// Typed-client tests of VIFs, ports, allocations, conductors and drivers
// (gophercloud_test.go has the client and the node tests).

func TestGophercloudVIFs(t *testing.T) {
	ctx, c := gopherAPI(t)

	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", NetworkInterface: "flat"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	// No port yet: no free port to attach to.
	wantCode(t, nodes.AttachVirtualInterface(ctx, c, n.UUID, nodes.VirtualInterfaceOpts{ID: "vif-a"}).ExtractErr(), http.StatusBadRequest)

	p, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: n.UUID, Address: "52:54:00:12:34:56"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes.AttachVirtualInterface(ctx, c, n.UUID, nodes.VirtualInterfaceOpts{ID: "vif-a", PortUUID: p.UUID}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	vifs, err := nodes.ListVirtualInterfaces(ctx, c, n.UUID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if len(vifs) != 1 || vifs[0].ID != "vif-a" {
		t.Errorf("vifs = %+v", vifs)
	}
	got, err := ports.Get(ctx, c, p.UUID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got.InternalInfo["tenant_vif_port_id"] != "vif-a" {
		t.Errorf("port internal_info = %v", got.InternalInfo)
	}
	// The one port is taken.
	wantCode(t, nodes.AttachVirtualInterface(ctx, c, n.UUID, nodes.VirtualInterfaceOpts{ID: "vif-b"}).ExtractErr(), http.StatusBadRequest)
	if err := nodes.DetachVirtualInterface(ctx, c, n.UUID, "vif-a").ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if vifs, err := nodes.ListVirtualInterfaces(ctx, c, n.UUID).Extract(); err != nil || len(vifs) != 0 {
		t.Errorf("vifs after detach = %+v, %v", vifs, err)
	}
	wantCode(t, nodes.DetachVirtualInterface(ctx, c, n.UUID, "vif-a").ExtractErr(), http.StatusBadRequest)
}

func TestGophercloudPorts(t *testing.T) {
	ctx, c := gopherAPI(t)

	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Name: "port-node", Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	pxe := false
	p, err := ports.Create(ctx, c, ports.CreateOpts{
		NodeUUID:            n.UUID,
		Address:             "52:54:00:AA:BB:CC",
		PXEEnabled:          &pxe,
		PhysicalNetwork:     "physnet1",
		LocalLinkConnection: map[string]any{"switch_id": "00:11:22:33:44:55", "port_id": "Gig0/1"},
		Extra:               map[string]any{"cable": "blue"},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if p.Address != "52:54:00:aa:bb:cc" || p.NodeUUID != n.UUID || p.PXEEnabled || p.PhysicalNetwork != "physnet1" ||
		p.LocalLinkConnection["port_id"] != "Gig0/1" || p.Extra["cable"] != "blue" || p.IsSmartNIC || p.CreatedAt.IsZero() {
		t.Errorf("created port = %+v", p)
	}
	_, err = ports.Create(ctx, c, ports.CreateOpts{NodeUUID: n.UUID, Address: "52:54:00:aa:bb:cc"}).Extract()
	wantCode(t, err, http.StatusConflict)
	_, err = ports.Create(ctx, c, ports.CreateOpts{NodeUUID: n.UUID, Address: "not-a-mac"}).Extract()
	wantCode(t, err, http.StatusBadRequest)

	got, err := ports.Get(ctx, c, p.UUID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got.UUID != p.UUID || got.Address != p.Address {
		t.Errorf("get = %+v", got)
	}
	if _, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: n.UUID, Address: "52:54:00:00:00:02"}).Extract(); err != nil {
		t.Fatal(err)
	}
	list := allPages(t, ctx, ports.List(c, ports.ListOpts{Node: "port-node"}), ports.ExtractPorts)
	if len(list) != 2 || list[0].NodeUUID != "" {
		t.Errorf("list = %+v", list)
	}
	list = allPages(t, ctx, ports.ListDetail(c, ports.ListOpts{Address: "52:54:00:aa:bb:cc"}), ports.ExtractPorts)
	if len(list) != 1 || list[0].NodeUUID != n.UUID || list[0].PhysicalNetwork != "physnet1" {
		t.Errorf("detail = %+v", list)
	}

	upd, err := ports.Update(ctx, c, p.UUID, ports.UpdateOpts{
		ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/pxe_enabled", Value: true},
		ports.UpdateOperation{Op: ports.AddOp, Path: "/extra/label", Value: "eth0"},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if !upd.PXEEnabled || upd.Extra["label"] != "eth0" || upd.UpdatedAt.IsZero() {
		t.Errorf("updated = %+v", upd)
	}
	_, err = ports.Update(ctx, c, p.UUID, ports.UpdateOpts{ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/uuid", Value: "x"}}).Extract()
	wantCode(t, err, http.StatusBadRequest)

	if err := ports.Delete(ctx, c, p.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err = ports.Get(ctx, c, p.UUID).Extract()
	wantCode(t, err, http.StatusNotFound)
	wantCode(t, ports.Delete(ctx, c, p.UUID).ExtractErr(), http.StatusNotFound)
}

func TestGophercloudAllocations(t *testing.T) {
	ctx, c := gopherAPI(t)

	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Name: "alloc-node", Driver: "fake-hardware", ResourceClass: "gold"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	gcProvision(t, ctx, c, n.UUID, nodes.TargetManage, "manageable")
	gcProvision(t, ctx, c, n.UUID, nodes.TargetProvide, "available")
	// A fake node never powered has no power state; allocation wants one
	// (tempest's provide_and_power_off_node).
	if err := nodes.ChangePowerState(ctx, c, n.UUID, nodes.PowerStateOpts{Target: nodes.PowerOff}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := gophercloud.WaitFor(ctx, func(ctx context.Context) (bool, error) {
		got, err := nodes.Get(ctx, c, n.UUID).Extract()
		return err == nil && got.PowerState == "power off" && got.TargetPowerState == "", err
	}); err != nil {
		t.Fatal(err)
	}

	a, err := allocations.Create(ctx, c, allocations.CreateOpts{Name: "gc-alloc", ResourceClass: "gold", Extra: map[string]string{"k": "v"}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "gc-alloc" || a.ResourceClass != "gold" || a.Extra["k"] != "v" || a.CreatedAt.IsZero() {
		t.Errorf("created = %+v", a)
	}
	var got *allocations.Allocation
	err = gophercloud.WaitFor(ctx, func(ctx context.Context) (bool, error) {
		var err error
		got, err = allocations.Get(ctx, c, "gc-alloc").Extract()
		return err == nil && got.State != "allocating", err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "active" || got.NodeUUID != n.UUID || got.LastError != "" || got.UUID != a.UUID {
		t.Errorf("allocation = %+v", got)
	}
	if node, err := nodes.Get(ctx, c, n.UUID).Extract(); err != nil || node.AllocationUUID != a.UUID || node.InstanceUUID != a.UUID {
		t.Errorf("node after allocation = %+v, %v", node, err)
	}

	// No node left for a second one: it fails.
	b, err := allocations.Create(ctx, c, allocations.CreateOpts{ResourceClass: "gold"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	err = gophercloud.WaitFor(ctx, func(ctx context.Context) (bool, error) {
		var err error
		got, err = allocations.Get(ctx, c, b.UUID).Extract()
		return err == nil && got.State != "allocating", err
	})
	if err != nil || got.State != "error" || got.LastError == "" || got.NodeUUID != "" {
		t.Errorf("second allocation = %+v, %v", got, err)
	}

	list := allPages(t, ctx, allocations.List(c, allocations.ListOpts{State: "active"}), allocations.ExtractAllocations)
	if len(list) != 1 || list[0].UUID != a.UUID {
		t.Errorf("active allocations = %+v", list)
	}
	pages, err := allocations.List(c, allocations.ListOpts{Node: "alloc-node"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err = allocations.ExtractAllocations(pages); err != nil || len(list) != 1 {
		t.Errorf("allocations of node = %+v, %v", list, err)
	}
	_, err = allocations.Create(ctx, c, allocations.CreateOpts{Name: "gc-alloc", ResourceClass: "gold"}).Extract()
	wantCode(t, err, http.StatusConflict)
	_, err = allocations.Create(ctx, c, allocations.CreateOpts{}).Extract()
	if err == nil {
		t.Error("allocation without resource_class accepted")
	}

	if err := allocations.Delete(ctx, c, a.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err = allocations.Get(ctx, c, a.UUID).Extract()
	wantCode(t, err, http.StatusNotFound)
	if node, err := nodes.Get(ctx, c, n.UUID).Extract(); err != nil || node.AllocationUUID != "" || node.InstanceUUID != "" {
		t.Errorf("node after deleting the allocation = %+v, %v", node, err)
	}
	if err := allocations.Delete(ctx, c, b.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
}

func TestGophercloudConductorsDrivers(t *testing.T) {
	ctx, c := gopherAPI(t)

	cl := allPages(t, ctx, conductors.List(c, conductors.ListOpts{}), conductors.ExtractConductors)
	if len(cl) != 1 || cl[0].Hostname != "test-conductor" || !cl[0].Alive {
		t.Errorf("conductors = %+v", cl)
	}
	pages, err := conductors.List(c, conductors.ListOpts{Detail: true}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl, err = conductors.ExtractConductors(pages); err != nil || len(cl) != 1 || cl[0].CreatedAt.IsZero() ||
		!slices.Contains(cl[0].Drivers, "fake-hardware") {
		t.Errorf("conductors detail = %+v, %v", cl, err)
	}
	cd, err := conductors.Get(ctx, c, "test-conductor").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if cd.Hostname != "test-conductor" || !cd.Alive || cd.ConductorGroup != "" ||
		!slices.Equal(cd.Drivers, []string{"fake-hardware", "manual-management"}) {
		t.Errorf("conductor = %+v", cd)
	}
	_, err = conductors.Get(ctx, c, "nosuch").Extract()
	wantCode(t, err, http.StatusNotFound)

	dl := allPages(t, ctx, drivers.ListDrivers(c, drivers.ListDriversOpts{Detail: true}), drivers.ExtractDrivers)
	var names []string
	for _, d := range dl {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"fake-hardware", "manual-management"}) {
		t.Errorf("drivers = %v", names)
	}
	d, err := drivers.GetDriverDetails(ctx, c, "fake-hardware").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "fake-hardware" || d.Type != "dynamic" || !slices.Equal(d.Hosts, []string{"test-conductor"}) ||
		d.DefaultPowerInterface != "fake" || d.DefaultDeployInterface != "fake" || d.DefaultNetworkInterface != "noop" ||
		!slices.Contains(d.EnabledDeployInterfaces, "direct") || !slices.Contains(d.EnabledNetworkInterfaces, "flat") {
		t.Errorf("driver = %+v", d)
	}
	_, err = drivers.GetDriverDetails(ctx, c, "nosuch").Extract()
	wantCode(t, err, http.StatusNotFound)
	props, err := drivers.GetDriverProperties(ctx, c, "fake-hardware").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if props == nil {
		t.Fatal("no properties")
	}
	disk, err := drivers.GetDriverDiskProperties(ctx, c, "fake-hardware").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (*disk)["raid_level"]; !ok {
		t.Errorf("disk properties = %v", disk)
	}
	vm, err := drivers.ListVendorPassthruMethods(ctx, c, "fake-hardware").Extract()
	if err != nil || len(vm) != 0 {
		t.Errorf("driver vendor methods = %v, %v", vm, err)
	}
}
