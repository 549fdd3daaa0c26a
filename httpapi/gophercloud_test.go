package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// Typed-client tests: gophercloud's baremetal/v1 packages against castiron
// on a loopback server. Every call decodes into gophercloud's own structs,
// so a field of the wrong JSON type fails the test.

// gopherClient is a noauth gophercloud service client for the harness.
func gopherClient(t *testing.T, h *apiHarness) *gophercloud.ServiceClient {
	t.Helper()
	c, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: h.srv.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	c.Microversion = "1.89"
	return c
}

// gopherAPI is a new API and a gophercloud client of it, with gctx's
// context.
func gopherAPI(t *testing.T) (context.Context, *gophercloud.ServiceClient) {
	t.Helper()
	return gctx(t), gopherClient(t, newAPI(t))
}

// allPages reads every page of a list and extracts its items, failing the
// test on an error of either.
func allPages[T any](t *testing.T, ctx context.Context, pager pagination.Pager, extract func(pagination.Page) ([]T, error)) []T {
	t.Helper()
	pages, err := pager.AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	items, err := extract(pages)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func gctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// gcWaitProvision polls with gophercloud until the node is idle in want.
func gcWaitProvision(t *testing.T, ctx context.Context, c *gophercloud.ServiceClient, id, want string) *nodes.Node {
	t.Helper()
	var last *nodes.Node
	err := gophercloud.WaitFor(ctx, func(ctx context.Context) (bool, error) {
		n, err := nodes.Get(ctx, c, id).Extract()
		if err != nil {
			return false, err
		}
		last = n
		return n.ProvisionState == want && n.Reservation == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s on %s: %v (last %+v)", want, id, err, last)
	}
	return last
}

func gcProvision(t *testing.T, ctx context.Context, c *gophercloud.ServiceClient, id string, target nodes.TargetProvisionState, want string) *nodes.Node {
	t.Helper()
	if err := nodes.ChangeProvisionState(ctx, c, id, nodes.ProvisionStateOpts{Target: target}).ExtractErr(); err != nil {
		t.Fatalf("provision %s: %v", target, err)
	}
	return gcWaitProvision(t, ctx, c, id, want)
}

func wantCode(t *testing.T, err error, code int) {
	t.Helper()
	if !gophercloud.ResponseCodeIs(err, code) {
		t.Fatalf("err = %v, want HTTP %d", err, code)
	}
}

func TestGophercloudNodes(t *testing.T) {
	h := newAPI(t)
	c := gopherClient(t, h)
	ctx := gctx(t)

	created, err := nodes.Create(ctx, c, nodes.CreateOpts{
		Name:          "gc-node",
		Driver:        "fake-hardware",
		ResourceClass: "gold",
		Properties:    map[string]any{"cpus": 8, "memory_mb": 16384},
		Extra:         map[string]any{"rack": "r1"},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	id := created.UUID
	if created.Name != "gc-node" || created.ProvisionState != "enroll" || created.Driver != "fake-hardware" ||
		created.ResourceClass != "gold" || created.PowerInterface != "fake" || created.ManagementInterface != "fake" ||
		created.Extra["rack"] != "r1" || created.CreatedAt.IsZero() || len(created.Links) != 2 {
		t.Errorf("created = %+v", created)
	}
	if created.Properties["cpus"] != float64(8) {
		t.Errorf("properties = %v", created.Properties)
	}

	got, err := nodes.Get(ctx, c, "gc-node").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got.UUID != id || got.Conductor != "test-conductor" || got.AutomatedClean != nil || got.Maintenance {
		t.Errorf("get = %+v", got)
	}

	// List and list detail, through gophercloud's pager.
	if _, err := nodes.Create(ctx, c, nodes.CreateOpts{Name: "gc-other", Driver: "manual-management"}).Extract(); err != nil {
		t.Fatal(err)
	}
	// gophercloud follows "nodes_links", which Ironic never sends (it
	// answers "next", as castiron does), so a limited list is one page.
	listNames := func(opts nodes.ListOpts) []string {
		t.Helper()
		var names []string
		err := nodes.List(c, opts).EachPage(ctx, func(ctx context.Context, p pagination.Page) (bool, error) {
			l, err := nodes.ExtractNodes(p)
			for _, n := range l {
				names = append(names, n.Name)
				if n.Driver != "" || n.UUID == "" || n.ProvisionState == "" || len(n.Links) != 2 {
					t.Errorf("list entry = %+v", n)
				}
			}
			return true, err
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		return names
	}
	if names := listNames(nodes.ListOpts{Limit: 1}); !slices.Equal(names, []string{"gc-node"}) {
		t.Errorf("limited list names = %v", names)
	}
	if names := listNames(nodes.ListOpts{}); !slices.Equal(names, []string{"gc-node", "gc-other"}) {
		t.Errorf("list names = %v", names)
	}
	if names := listNames(nodes.ListOpts{ProvisionState: nodes.Enroll, Fields: []string{"uuid", "name", "provision_state"}}); len(names) != 2 {
		t.Errorf("list with fields = %v", names)
	}
	if !strings.Contains(string(h.expect(http.StatusOK, "GET", "/v1/nodes?limit=1", "1.89", nil).body), `"next": "`) {
		t.Error("no next link in a limited list")
	}
	detail := allPages(t, ctx, nodes.ListDetail(c, nodes.ListOpts{Driver: "fake-hardware"}), nodes.ExtractNodes)
	if len(detail) != 1 || detail[0].UUID != id || detail[0].Driver != "fake-hardware" || detail[0].Properties["memory_mb"] != float64(16384) {
		t.Errorf("detail = %+v", detail)
	}

	// Update with a JSON patch.
	updated, err := nodes.Update(ctx, c, id, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/description", Value: "updated by gophercloud"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/extra/owner", Value: "team-a"},
		nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/extra/rack"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/deploy_kernel", Value: "http://x/k"},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if updated.Description != "updated by gophercloud" || updated.Extra["owner"] != "team-a" || updated.Extra["rack"] != nil ||
		updated.DriverInfo["deploy_kernel"] != "http://x/k" {
		t.Errorf("updated = %+v", updated)
	}
	_, err = nodes.Update(ctx, c, id, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/provision_state", Value: "active"}}).Extract()
	wantCode(t, err, http.StatusBadRequest)

	// Validate: every interface of fake-hardware answers a typed result.
	v, err := nodes.Validate(ctx, c, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if !v.Power.Result || !v.Management.Result || !v.Boot.Result || !v.Deploy.Result {
		t.Errorf("validate = %+v", v)
	}

	// Power.
	if err := nodes.ChangePowerState(ctx, c, id, nodes.PowerStateOpts{Target: nodes.PowerOn}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	err = gophercloud.WaitFor(ctx, func(ctx context.Context) (bool, error) {
		n, err := nodes.Get(ctx, c, id).Extract()
		return err == nil && n.PowerState == "power on" && n.TargetPowerState == "", err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = nodes.ChangePowerState(ctx, c, id, nodes.PowerStateOpts{Target: "sideways"}).ExtractErr()
	wantCode(t, err, http.StatusBadRequest)

	// Boot device.
	supported, err := nodes.GetSupportedBootDevices(ctx, c, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(supported, "pxe") || !slices.Contains(supported, "disk") {
		t.Errorf("supported boot devices = %v", supported)
	}
	if err := nodes.SetBootDevice(ctx, c, id, nodes.BootDeviceOpts{BootDevice: "disk", Persistent: true}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	bd, err := nodes.GetBootDevice(ctx, c, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if bd.BootDevice != "disk" || !bd.Persistent {
		t.Errorf("boot device = %+v", bd)
	}
	err = nodes.SetBootDevice(ctx, c, id, nodes.BootDeviceOpts{BootDevice: "tape"}).ExtractErr()
	wantCode(t, err, http.StatusBadRequest)

	// Traits: gophercloud has no traits call; use its raw client.
	_, err = c.Put(ctx, c.ServiceURL("nodes", id, "traits"), map[string]any{"traits": []string{"CUSTOM_GOLD", "HW_CPU_X86_VMX"}}, nil,
		&gophercloud.RequestOpts{OkCodes: []int{http.StatusNoContent}})
	if err != nil {
		t.Fatal(err)
	}
	var traits struct {
		Traits []string `json:"traits"`
	}
	if _, err := c.Get(ctx, c.ServiceURL("nodes", id, "traits"), &traits, nil); err != nil {
		t.Fatal(err)
	}
	slices.Sort(traits.Traits)
	if !slices.Equal(traits.Traits, []string{"CUSTOM_GOLD", "HW_CPU_X86_VMX"}) {
		t.Errorf("traits = %v", traits.Traits)
	}
	if n, err := nodes.Get(ctx, c, id).Extract(); err != nil || len(n.Traits) != 2 {
		t.Errorf("node traits = %v, %v", n, err)
	}

	// Vendor passthru methods: fake-hardware's vendor interface has none.
	methods, err := nodes.ListVendorPassthruMethods(ctx, c, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if len(methods) != 0 {
		t.Errorf("vendor methods = %v", methods)
	}
	if _, err := nodes.GetVendorPassthruMethods(ctx, c, id).Extract(); err != nil {
		t.Fatal(err)
	}

	// RAID: a target RAID configuration is stored as given ("MAX" filled in
	// by gophercloud for a missing size).
	size := 100
	root := true
	err = nodes.SetRAIDConfig(ctx, c, id, nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: &size, RAIDLevel: nodes.RAID1, IsRootVolume: &root, VolumeName: "root"},
		{RAIDLevel: nodes.RAID0, DiskType: nodes.SSD},
	}}).ExtractErr()
	if err != nil {
		t.Fatal(err)
	}
	n, err := nodes.Get(ctx, c, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	disks, _ := n.TargetRAIDConfig["logical_disks"].([]any)
	if len(disks) != 2 || disks[0].(map[string]any)["size_gb"] != float64(100) || disks[1].(map[string]any)["size_gb"] != "MAX" ||
		disks[0].(map[string]any)["is_root_volume"] != true {
		t.Errorf("target_raid_config = %v", n.TargetRAIDConfig)
	}
	err = nodes.SetRAIDConfig(ctx, c, id, nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{{RAIDLevel: "7"}}}).ExtractErr()
	wantCode(t, err, http.StatusBadRequest)

	// BIOS: fake-hardware caches no settings.
	bios, err := nodes.ListBIOSSettings(ctx, c, id, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if len(bios) != 0 {
		t.Errorf("bios = %v", bios)
	}
	bios, err = nodes.ListBIOSSettings(ctx, c, id, nodes.ListBIOSSettingsOpts{Detail: true}).Extract()
	if err != nil || len(bios) != 0 {
		t.Errorf("bios detail = %v, %v", bios, err)
	}
	_, err = nodes.GetBIOSSetting(ctx, c, id, "ProcVirtualization").Extract()
	wantCode(t, err, http.StatusNotFound)

	// Inventory: never inspected, so Ironic's 404.
	_, err = nodes.GetInventory(ctx, c, id).Extract()
	wantCode(t, err, http.StatusNotFound)
	var unexpected gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &unexpected) || !strings.Contains(string(unexpected.Body), "Node inventory record for node "+id+" could not be found.") {
		t.Errorf("inventory error = %#v", err)
	}

	// Provisioning: manage, provide (automated cleaning on fake-hardware),
	// deploy, each waited for by polling.
	gcProvision(t, ctx, c, id, nodes.TargetManage, "manageable")
	gcProvision(t, ctx, c, id, nodes.TargetProvide, "available")
	err = nodes.ChangeProvisionState(ctx, c, id, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}).ExtractErr()
	wantCode(t, err, http.StatusBadRequest)
	if err := nodes.ChangeProvisionState(ctx, c, id, nodes.ProvisionStateOpts{Target: nodes.TargetActive}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := nodes.WaitForProvisionState(ctx, c, id, nodes.Active); err != nil {
		t.Fatal(err)
	}
	active := gcWaitProvision(t, ctx, c, id, "active")
	if active.TargetProvisionState != "" || active.LastError != "" || active.ProvisionUpdatedAt.IsZero() || active.UpdatedAt.IsZero() {
		t.Errorf("active = %+v", active)
	}
	// An active node cannot be deleted (Ironic's InvalidState, 409).
	wantCode(t, nodes.Delete(ctx, c, id).ExtractErr(), http.StatusConflict)
	gcProvision(t, ctx, c, id, nodes.TargetDeleted, "available")

	// Delete.
	if err := nodes.Delete(ctx, c, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err = nodes.Get(ctx, c, id).Extract()
	wantCode(t, err, http.StatusNotFound)
	if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Fatal("deleted node still found")
	}
}
