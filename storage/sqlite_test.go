package storage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func ptr[T any](v T) *T { return &v }

func newNode(name string) *Node {
	n := &Node{
		UUID:           uuid.NewString(),
		Driver:         "fake-hardware",
		ProvisionState: "enroll",
		CreatedAt:      time.Now(),
	}
	if name != "" {
		n.Name = ptr(name)
	}
	return n
}

func mustCreateNode(tb testing.TB, s *SQLite, n *Node) *Node {
	tb.Helper()
	if err := s.CreateNode(context.Background(), n); err != nil {
		tb.Fatalf("CreateNode(%s): %v", deref(n.Name), err)
	}
	return n
}

// fullNode sets every field, times in a non-UTC zone with nanoseconds.
func fullNode() *Node {
	zone := time.FixedZone("X", 5*3600+1800)
	at := func(sec int) *time.Time {
		t := time.Date(2024, 3, 1, 10, 0, sec, 123456789, zone)
		return &t
	}
	return &Node{
		UUID: uuid.NewString(), Name: ptr("full-node"), Driver: "ipmi",
		BIOSInterface: "no-bios", BootInterface: "ipxe", ConsoleInterface: "no-console",
		DeployInterface: "direct", FirmwareInterface: "no-firmware", InspectInterface: "agent",
		ManagementInterface: "ipmitool", NetworkInterface: "noop", PowerInterface: "ipmitool",
		RAIDInterface: "no-raid", RescueInterface: "no-rescue", StorageInterface: "noop",
		VendorInterface: "ipmitool",
		ProvisionState:  "active", TargetProvisionState: ptr("deleted"),
		PowerState: ptr("power on"), TargetPowerState: ptr("power off"),
		ProvisionUpdatedAt: at(1), InspectionStartedAt: at(2), InspectionFinishedAt: at(3),
		LastError: ptr("boom"), Reservation: ptr("host-1"), Maintenance: true,
		MaintenanceReason: ptr("because"), Fault: ptr("power failure"), ConsoleEnabled: true,
		ConductorGroup: "rack1", ResourceClass: ptr("baremetal"), Owner: ptr("owner-p"),
		Lessee: ptr("lessee-p"), Description: ptr("a full node"), InstanceUUID: ptr(uuid.NewString()),
		ChassisUUID: ptr(uuid.NewString()), AllocationUUID: ptr(uuid.NewString()),
		AutomatedClean: ptr(false), Protected: true, ProtectedReason: ptr("prod"),
		Retired: true, RetiredReason: ptr("old"), BootMode: ptr("uefi"), SecureBoot: ptr(true),
		Shard: ptr("shard-a"), ParentNode: ptr(uuid.NewString()),
		Properties:         JSONObject{"cpus": float64(8), "memory_mb": float64(16384), "capabilities": "boot_mode:uefi"},
		DriverInfo:         JSONObject{"ipmi_address": "10.0.0.1", "ipmi_password": "secret"},
		DriverInternalInfo: JSONObject{"agent_url": "http://10.0.0.9:9999", "list": []any{"a", float64(1), true, nil}},
		InstanceInfo:       JSONObject{"image_source": "http://img/x.qcow2"},
		Extra:              JSONObject{"nested": map[string]any{"k": "v"}},
		CleanStep:          JSONObject{"step": "erase_devices", "priority": float64(10)},
		DeployStep:         JSONObject{"step": "deploy"},
		ServiceStep:        JSONObject{"step": "service"},
		RAIDConfig:         JSONObject{"logical_disks": []any{}},
		TargetRAIDConfig:   JSONObject{"logical_disks": []any{map[string]any{"size_gb": float64(100)}}},
		NetworkData:        JSONObject{"links": []any{}},
		Traits:             []string{"CUSTOM_A", "CUSTOM_B"},
		CreatedAt:          *at(0),
		UpdatedAt:          at(4),
	}
}

func wantKind(t *testing.T, err error, kind fault.Kind, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %d %q", kind, msg)
	}
	if fault.KindOf(err) != kind {
		t.Fatalf("got kind %d (%v), want %d", fault.KindOf(err), err, kind)
	}
	if msg != "" && err.Error() != msg {
		t.Fatalf("got message %q, want %q", err.Error(), msg)
	}
}

// allFieldsSet fails when a field of v other than ID is zero: a field added
// to the model must be added to fullNode, and so to the round-trip test.
func allFieldsSet(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if name := rv.Type().Field(i).Name; name != "ID" && rv.Field(i).IsZero() {
			t.Fatalf("%s.%s is not set by the test fixture", rv.Type().Name(), name)
		}
	}
}

func TestNodeRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	allFieldsSet(t, fullNode())
	tests := []struct {
		name string
		node *Node
	}{
		{"minimal", &Node{UUID: uuid.NewString(), Driver: "fake-hardware", ProvisionState: "enroll", CreatedAt: time.Now()}},
		{"full", fullNode()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.node
			orig := *in
			if err := s.CreateNode(ctx, in); err != nil {
				t.Fatal(err)
			}
			if in.ID == 0 {
				t.Fatal("ID not filled")
			}
			// The caller's copy was normalised to what storage keeps.
			if !in.CreatedAt.Equal(orig.CreatedAt.Truncate(time.Microsecond)) || in.CreatedAt.Location() != time.UTC {
				t.Fatalf("CreatedAt %v, want %v in UTC", in.CreatedAt, orig.CreatedAt)
			}
			got, err := s.GetNode(ctx, in.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, in) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, in)
			}
			if got.Properties == nil || got.Extra == nil || got.NetworkData == nil || got.Traits == nil {
				t.Fatal("nil map or traits after load")
			}
			if orig.ProvisionUpdatedAt != nil {
				if got.ProvisionUpdatedAt.Nanosecond() != 123456000 || got.ProvisionUpdatedAt.Location() != time.UTC {
					t.Fatalf("ProvisionUpdatedAt = %v, want microseconds in UTC", got.ProvisionUpdatedAt)
				}
				if !got.ProvisionUpdatedAt.Equal(orig.ProvisionUpdatedAt.Truncate(time.Microsecond)) {
					t.Fatalf("ProvisionUpdatedAt = %v, want %v", got.ProvisionUpdatedAt, orig.ProvisionUpdatedAt)
				}
			} else if got.ProvisionUpdatedAt != nil || got.UpdatedAt != nil || got.Name != nil || got.AutomatedClean != nil {
				t.Fatal("nil pointer came back set")
			}
			if got.AutomatedClean != nil && *got.AutomatedClean {
				t.Fatal("AutomatedClean: set false, got true")
			}
			if in.Name != nil {
				byName, err := s.GetNode(ctx, *in.Name)
				if err != nil || byName.UUID != in.UUID {
					t.Fatalf("GetNode(name) = %v, %v", byName, err)
				}
			}
			if in.InstanceUUID != nil {
				byInst, err := s.GetNodeByInstance(ctx, *in.InstanceUUID)
				if err != nil || byInst.UUID != in.UUID {
					t.Fatalf("GetNodeByInstance = %v, %v", byInst, err)
				}
			}
		})
	}
}

func TestCreateNodeFillsAndCanonicalizes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := &Node{Driver: "fake-hardware", ProvisionState: "enroll"}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(n.UUID); err != nil || n.CreatedAt.IsZero() {
		t.Fatalf("UUID %q CreatedAt %v not filled", n.UUID, n.CreatedAt)
	}
	up := &Node{UUID: strings.ToUpper(uuid.NewString()), Driver: "d", ProvisionState: "enroll"}
	if err := s.CreateNode(ctx, up); err != nil {
		t.Fatal(err)
	}
	if up.UUID != strings.ToLower(up.UUID) {
		t.Fatalf("UUID %s not lower-cased", up.UUID)
	}
	if _, err := s.GetNode(ctx, strings.ToUpper(up.UUID)); err != nil {
		t.Fatalf("GetNode(upper-case uuid): %v", err)
	}
	err := s.CreateNode(ctx, &Node{UUID: "not-a-uuid", Driver: "d", ProvisionState: "enroll"})
	wantKind(t, err, fault.Invalid, "storage: invalid uuid \"not-a-uuid\"")
}

func TestNotFound(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := mustCreateNode(t, s, newNode("n1"))
	missing := uuid.NewString()
	tests := []struct {
		name string
		call func() error
		kind fault.Kind
		msg  string
	}{
		{"node by uuid", func() error { _, err := s.GetNode(ctx, missing); return err }, fault.NotFound, "storage: no nodes row " + missing},
		{"node by name", func() error { _, err := s.GetNode(ctx, "nope"); return err }, fault.NotFound, "storage: no nodes row nope"},
		{"node by instance", func() error { _, err := s.GetNodeByInstance(ctx, missing); return err }, fault.NotFound, "storage: no nodes row with instance_uuid " + missing},
		{"update node", func() error {
			_, err := s.UpdateNode(ctx, "nope", func(*Node) (*Event, error) { return nil, nil })
			return err
		}, fault.NotFound, "storage: no nodes row nope"},
		{"delete node", func() error { return s.DeleteNode(ctx, missing) }, fault.NotFound, "storage: no nodes row " + missing},
		{"port", func() error { _, err := s.GetPort(ctx, missing); return err }, fault.NotFound, "storage: no ports row " + missing},
		{"port by address", func() error { _, err := s.GetPortByAddress(ctx, "52:54:00:00:00:01"); return err }, fault.NotFound, "storage: no ports row 52:54:00:00:00:01"},
		{"update port", func() error { _, err := s.UpdatePort(ctx, missing, func(*Port) error { return nil }); return err }, fault.NotFound, "storage: no ports row " + missing},
		{"delete port", func() error { return s.DeletePort(ctx, missing) }, fault.NotFound, "storage: no ports row " + missing},
		{"port of unknown node", func() error {
			return s.CreatePort(ctx, &Port{NodeUUID: missing, Address: "52:54:00:00:00:02"})
		}, fault.NotFound, "storage: no nodes row " + missing},
		{"conductor", func() error { _, err := s.GetConductor(ctx, "c1"); return err }, fault.NotFound, "storage: no conductors row c1"},
		{"touch conductor", func() error { return s.TouchConductor(ctx, "c1", time.Now()) }, fault.NotFound, "storage: no conductors row c1"},
		{"unregister conductor", func() error { return s.UnregisterConductor(ctx, "c1") }, fault.NotFound, "storage: no conductors row c1"},
		{"event", func() error { _, err := s.GetEvent(ctx, n.UUID, missing); return err }, fault.NotFound, "storage: no node_history row " + missing},
		{"event of unknown node", func() error { return s.AddEvent(ctx, &Event{NodeUUID: missing}) }, fault.NotFound, "storage: no nodes row " + missing},
		{"events of unknown node", func() error { _, err := s.ListEvents(ctx, missing, Page{}); return err }, fault.NotFound, "storage: no nodes row " + missing},
		{"node marker", func() error { _, err := s.ListNodes(ctx, NodeQuery{Page: Page{Marker: missing}}); return err }, fault.NotFound, "storage: no nodes row " + missing},
		{"port marker", func() error { _, err := s.ListPorts(ctx, PortQuery{Page: Page{Marker: missing}}); return err }, fault.NotFound, "storage: no ports row " + missing},
		{"conductor marker", func() error { _, err := s.ListConductors(ctx, Page{Marker: "c9"}); return err }, fault.NotFound, "storage: no conductors row c9"},
		{"event marker", func() error { _, err := s.ListEvents(ctx, n.UUID, Page{Marker: missing}); return err }, fault.NotFound, "storage: no node_history row " + missing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantKind(t, tc.call(), tc.kind, tc.msg) })
	}
}

func TestDuplicates(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	inst := uuid.NewString()
	a := newNode("a")
	a.InstanceUUID = ptr(inst)
	mustCreateNode(t, s, a)
	b := mustCreateNode(t, s, newNode("b"))
	p := &Port{NodeUUID: a.UUID, Address: "52:54:00:AA:BB:CC", Name: ptr("p0")}
	if err := s.CreatePort(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := &Port{NodeUUID: a.UUID, Address: "52:54:00:aa:bb:dd", Name: ptr("p1")}
	if err := s.CreatePort(ctx, q); err != nil {
		t.Fatal(err)
	}
	dupUUID := newNode("other")
	dupUUID.UUID = a.UUID
	instDup := newNode("c")
	instDup.InstanceUUID = ptr(inst)

	tests := []struct {
		name string
		call func() error
		msg  string
	}{
		{"node uuid", func() error { return s.CreateNode(ctx, dupUUID) }, "storage: nodes (uuid)=(" + a.UUID + ") already exists"},
		{"node name", func() error { return s.CreateNode(ctx, newNode("a")) }, "storage: nodes (name)=(a) already exists"},
		{"node instance", func() error { return s.CreateNode(ctx, instDup) },
			"storage: nodes (instance_uuid)=(" + inst + ") already exists"},
		{"node name on update", func() error {
			_, err := s.UpdateNode(ctx, b.UUID, func(n *Node) (*Event, error) { n.Name = ptr("a"); return nil, nil })
			return err
		}, "storage: nodes (name)=(a) already exists"},
		{"node instance on update", func() error {
			_, err := s.UpdateNode(ctx, "b", func(n *Node) (*Event, error) { n.InstanceUUID = ptr(inst); return nil, nil })
			return err
		}, "storage: nodes (instance_uuid)=(" + inst + ") already exists"},
		{"port uuid", func() error {
			return s.CreatePort(ctx, &Port{UUID: p.UUID, NodeUUID: a.UUID, Address: "52:54:00:00:00:09"})
		}, "storage: ports (uuid)=(" + p.UUID + ") already exists"},
		{"port mac, other case", func() error {
			return s.CreatePort(ctx, &Port{NodeUUID: b.UUID, Address: "52:54:00:aa:bb:cc"})
		}, "storage: ports (address)=(52:54:00:aa:bb:cc) already exists"},
		{"port name", func() error {
			return s.CreatePort(ctx, &Port{NodeUUID: b.UUID, Address: "52:54:00:00:00:0a", Name: ptr("p0")})
		}, "storage: ports (name)=(p0) already exists"},
		{"port mac on update", func() error {
			_, err := s.UpdatePort(ctx, q.UUID, func(p *Port) error { p.Address = "52:54:00:AA:BB:CC"; return nil })
			return err
		}, "storage: ports (address)=(52:54:00:aa:bb:cc) already exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantKind(t, tc.call(), fault.Conflict, tc.msg) })
	}
	// Failed updates changed nothing.
	got, err := s.GetNode(ctx, b.UUID)
	if err != nil || deref(got.Name) != "b" || got.InstanceUUID != nil || got.UpdatedAt != nil {
		t.Fatalf("node b after failed updates: %+v, %v", got, err)
	}
}

func TestUpdateNode(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := mustCreateNode(t, s, newNode("n"))

	before := time.Now().Add(-time.Millisecond)
	out, err := s.UpdateNode(ctx, "n", func(n *Node) (*Event, error) {
		n.ProvisionState = "manageable"
		n.Reservation = ptr("host")
		n.Extra["k"] = "v"
		return &Event{EventType: "provisioning", Severity: "INFO", Event: "enroll -> manageable",
			FromState: "enroll", ToState: "manageable", Verb: "manage"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.UpdatedAt == nil || out.UpdatedAt.Before(before) {
		t.Fatalf("UpdatedAt = %v", out.UpdatedAt)
	}
	got, err := s.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, out) {
		t.Fatalf("stored node differs from returned one:\n got %+v\nwant %+v", got, out)
	}
	evs, err := s.ListEvents(ctx, n.UUID, Page{})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %v, %v", evs, err)
	}
	if e := evs[0]; e.NodeUUID != n.UUID || e.UUID == "" || e.CreatedAt.IsZero() || e.Verb != "manage" || e.ToState != "manageable" {
		t.Fatalf("event = %+v", e)
	}

	t.Run("rollback on error", func(t *testing.T) {
		sentinel := errors.New("refused")
		_, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) {
			n.ProvisionState = "available"
			n.Name = ptr("renamed")
			return &Event{Event: "should not be stored"}, sentinel
		})
		if err != sentinel {
			t.Fatalf("err = %v, want the sentinel unchanged", err)
		}
		again, _ := s.GetNode(ctx, n.UUID)
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("node changed by a failed update:\n got %+v\nwant %+v", again, got)
		}
		if evs, _ := s.ListEvents(ctx, n.UUID, Page{}); len(evs) != 1 {
			t.Fatalf("events = %d, want 1", len(evs))
		}
	})
	t.Run("uuid is immutable", func(t *testing.T) {
		_, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) { n.UUID = uuid.NewString(); return nil, nil })
		if err == nil {
			t.Fatal("uuid change accepted")
		}
	})
	t.Run("clear pointers", func(t *testing.T) {
		out, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) {
			n.Reservation = nil
			n.Extra = nil
			return nil, nil
		})
		if err != nil || out.Reservation != nil || out.Extra == nil || len(out.Extra) != 0 {
			t.Fatalf("out = %+v, %v", out, err)
		}
		got, _ := s.GetNode(ctx, n.UUID)
		if got.Reservation != nil || got.Extra == nil || len(got.Extra) != 0 {
			t.Fatalf("stored = %+v", got)
		}
	})
}

// TestUpdateNodeConcurrent: read-modify-write from many goroutines must
// neither lose an update nor fail with SQLITE_BUSY, while readers run.
func TestUpdateNodeConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := mustCreateNode(t, s, newNode("hot"))
	for i := 0; i < 50; i++ {
		mustCreateNode(t, s, newNode(fmt.Sprintf("cold-%d", i)))
	}
	const workers, rounds = 20, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds+1)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.ListNodes(ctx, NodeQuery{Page: Page{Limit: 20}}); err != nil {
					errs <- err
					return
				}
				if _, err := s.GetNode(ctx, n.UUID); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				_, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) {
					c, _ := n.DriverInternalInfo["counter"].(float64)
					n.DriverInternalInfo["counter"] = c + 1
					return &Event{Event: "tick"}, nil
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent access: %v", err)
	}
	got, err := s.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.DriverInternalInfo["counter"]; c != float64(workers*rounds) {
		t.Fatalf("counter = %v, want %d", c, workers*rounds)
	}
	evs, err := s.ListEvents(ctx, n.UUID, Page{})
	if err != nil || len(evs) != workers*rounds {
		t.Fatalf("events = %d, %v; want %d", len(evs), err, workers*rounds)
	}
}

// TestUpdateNodeTwoStores: two stores on one file behave like two processes;
// BEGIN IMMEDIATE and busy_timeout must serialise them without SQLITE_BUSY.
func TestUpdateNodeTwoStores(t *testing.T) {
	ctx := context.Background()
	path := testDatabase(t)
	var stores [2]*SQLite
	for i := range stores {
		s, err := OpenDatabase(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	n := mustCreateNode(t, stores[0], newNode("shared"))
	const perStore, rounds = 10, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*perStore*rounds)
	for _, s := range stores {
		for w := 0; w < perStore; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					_, err := s.UpdateNode(ctx, n.UUID, func(n *Node) (*Event, error) {
						c, _ := n.Extra["counter"].(float64)
						n.Extra["counter"] = c + 1
						return nil, nil
					})
					if err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("UpdateNode: %v", err)
	}
	got, err := stores[1].GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Extra["counter"]; c != float64(2*perStore*rounds) {
		t.Fatalf("counter = %v, want %d", c, 2*perStore*rounds)
	}
}

func names(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = deref(n.Name)
	}
	return out
}

func TestListNodesFilters(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mk := func(name string, f func(n *Node)) *Node {
		n := newNode(name)
		f(n)
		return mustCreateNode(t, s, n)
	}
	inst := uuid.NewString()
	chassis := uuid.NewString()
	a := mk("a", func(n *Node) {
		n.ProvisionState = "available"
		n.ConductorGroup = "g1"
		n.Description = ptr("Rack 10, slot 5%")
		n.Owner = ptr("o1")
		n.Shard = ptr("s1")
		n.ResourceClass = ptr("rc1")
	})
	mk("b", func(n *Node) {
		n.Maintenance = true
		n.Fault = ptr("power failure")
		n.Driver = "ipmi"
		n.InstanceUUID = ptr(inst)
		n.Lessee = ptr("l1")
		n.Description = ptr("rack 11")
		n.Shard = ptr("s2")
	})
	mk("c", func(n *Node) {
		n.Retired = true
		n.ChassisUUID = ptr(chassis)
		n.Reservation = ptr("host1")
		n.ConductorGroup = "g2"
		n.Description = ptr("slot_5")
	})
	mk("child", func(n *Node) { n.ParentNode = ptr(a.UUID) })

	tests := []struct {
		name string
		q    NodeQuery
		want []string
	}{
		{"all top level", NodeQuery{}, []string{"a", "b", "c"}},
		{"include children", NodeQuery{IncludeChildren: true}, []string{"a", "b", "c", "child"}},
		{"parent node", NodeQuery{ParentNode: ptr(a.UUID)}, []string{"child"}},
		{"provision state", NodeQuery{ProvisionState: ptr("available")}, []string{"a"}},
		{"provision state child", NodeQuery{ProvisionState: ptr("enroll"), IncludeChildren: true}, []string{"b", "c", "child"}},
		{"maintenance true", NodeQuery{Maintenance: ptr(true)}, []string{"b"}},
		{"maintenance false", NodeQuery{Maintenance: ptr(false)}, []string{"a", "c"}},
		{"driver", NodeQuery{Driver: ptr("ipmi")}, []string{"b"}},
		{"associated", NodeQuery{Associated: ptr(true)}, []string{"b"}},
		{"not associated", NodeQuery{Associated: ptr(false)}, []string{"a", "c"}},
		{"instance uuid", NodeQuery{InstanceUUID: ptr(inst)}, []string{"b"}},
		{"chassis", NodeQuery{ChassisUUID: ptr(chassis)}, []string{"c"}},
		{"conductor groups", NodeQuery{ConductorGroups: []string{"g1", "g2"}}, []string{"a", "c"}},
		{"conductor group default", NodeQuery{ConductorGroups: []string{""}}, []string{"b"}},
		{"conductor groups empty", NodeQuery{ConductorGroups: []string{}}, []string{}},
		{"fault", NodeQuery{Fault: ptr("power failure")}, []string{"b"}},
		{"resource class", NodeQuery{ResourceClass: ptr("rc1")}, []string{"a"}},
		{"owner", NodeQuery{Owner: ptr("o1")}, []string{"a"}},
		{"lessee", NodeQuery{Lessee: ptr("l1")}, []string{"b"}},
		{"description contains", NodeQuery{DescriptionContains: ptr("rack 1")}, []string{"a", "b"}},
		{"description wildcard is literal %", NodeQuery{DescriptionContains: ptr("5%")}, []string{"a"}},
		{"description wildcard is literal _", NodeQuery{DescriptionContains: ptr("_")}, []string{"c"}},
		{"retired", NodeQuery{Retired: ptr(true)}, []string{"c"}},
		{"not retired", NodeQuery{Retired: ptr(false)}, []string{"a", "b"}},
		{"shards", NodeQuery{Shards: []string{"s1", "s3"}}, []string{"a"}},
		{"shards empty", NodeQuery{Shards: []string{}}, []string{}},
		{"sharded", NodeQuery{Sharded: ptr(true)}, []string{"a", "b"}},
		{"not sharded", NodeQuery{Sharded: ptr(false)}, []string{"c"}},
		{"reserved", NodeQuery{Reserved: ptr(true)}, []string{"c"}},
		{"not reserved", NodeQuery{Reserved: ptr(false)}, []string{"a", "b"}},
		{"combined", NodeQuery{Maintenance: ptr(false), Sharded: ptr(true)}, []string{"a"}},
		{"limit", NodeQuery{Page: Page{Limit: 2}}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListNodes(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if g := names(got); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %v, want %v", g, tc.want)
			}
		})
	}
}

func TestListNodesPagination(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []string{"available", "active", "enroll"}
	const count = 23
	for i := 0; i < count; i++ {
		n := newNode(fmt.Sprintf("n%02d", (i*7)%count)) // names not in id order
		n.ProvisionState = states[i%3]
		n.Maintenance = i%4 == 0
		n.CreatedAt = base.Add(time.Duration(i%5) * time.Microsecond) // ties
		if i%3 != 0 {
			n.Owner = ptr(fmt.Sprintf("owner-%d", i%4)) // NULLs and ties
		}
		if i%2 == 0 {
			n.ProvisionUpdatedAt = ptr(base.Add(time.Duration(count-i) * time.Second))
		}
		mustCreateNode(t, s, n)
	}
	all, err := s.ListNodes(ctx, NodeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	// Expected orders, computed in Go: NULL first ascending, id breaks ties.
	type key struct {
		null bool
		v    string
	}
	keyOf := map[string]func(n *Node) key{
		"":                func(n *Node) key { return key{v: fmt.Sprintf("%020d", n.ID)} },
		"id":              func(n *Node) key { return key{v: fmt.Sprintf("%020d", n.ID)} },
		"name":            func(n *Node) key { return key{v: deref(n.Name)} },
		"provision_state": func(n *Node) key { return key{v: n.ProvisionState} },
		"maintenance":     func(n *Node) key { return key{v: fmt.Sprint(n.Maintenance)} },
		"created_at":      func(n *Node) key { return key{v: formatTime(n.CreatedAt)} },
		"owner":           func(n *Node) key { return key{null: n.Owner == nil, v: deref(n.Owner)} },
		"provision_updated_at": func(n *Node) key {
			if n.ProvisionUpdatedAt == nil {
				return key{null: true}
			}
			return key{v: formatTime(*n.ProvisionUpdatedAt)}
		},
	}
	less := func(a, b key) int {
		switch {
		case a.null && !b.null:
			return -1
		case !a.null && b.null:
			return 1
		}
		return strings.Compare(a.v, b.v)
	}
	for sortKey, kf := range keyOf {
		for _, dir := range []SortDir{"", Asc, Desc} {
			want := append([]*Node(nil), all...)
			sort.SliceStable(want, func(i, j int) bool {
				c := less(kf(want[i]), kf(want[j]))
				if c == 0 {
					c = int(want[i].ID - want[j].ID)
				}
				if dir == Desc {
					return c > 0
				}
				return c < 0
			})
			full, err := s.ListNodes(ctx, NodeQuery{Page: Page{SortKey: sortKey, SortDir: dir}})
			if err != nil {
				t.Fatalf("%s %s: %v", sortKey, dir, err)
			}
			if !reflect.DeepEqual(names(full), names(want)) {
				t.Fatalf("sort %q %q:\n got %v\nwant %v", sortKey, dir, names(full), names(want))
			}
			for _, limit := range []int{1, 4, 7, count} {
				var walked []*Node
				marker := ""
				for pages := 0; ; pages++ {
					if pages > count+1 {
						t.Fatalf("%s %s limit %d: pagination does not end", sortKey, dir, limit)
					}
					page, err := s.ListNodes(ctx, NodeQuery{Page: Page{Limit: limit, Marker: marker, SortKey: sortKey, SortDir: dir}})
					if err != nil {
						t.Fatalf("%s %s limit %d: %v", sortKey, dir, limit, err)
					}
					if len(page) > limit {
						t.Fatalf("page of %d > limit %d", len(page), limit)
					}
					walked = append(walked, page...)
					if len(page) < limit {
						break
					}
					marker = page[len(page)-1].UUID
				}
				if !reflect.DeepEqual(names(walked), names(want)) {
					t.Fatalf("sort %q %q limit %d walked:\n got %v\nwant %v", sortKey, dir, limit, names(walked), names(want))
				}
			}
		}
	}

	t.Run("marker with filter", func(t *testing.T) {
		q := NodeQuery{ProvisionState: ptr("active"), Page: Page{Limit: 2}}
		first, err := s.ListNodes(ctx, q)
		if err != nil || len(first) != 2 {
			t.Fatalf("%v %v", first, err)
		}
		q.Marker = first[1].UUID
		q.Limit = 0
		rest, err := s.ListNodes(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range rest {
			if n.ProvisionState != "active" || n.ID <= first[1].ID {
				t.Fatalf("unexpected node %s in rest", deref(n.Name))
			}
		}
		if len(first)+len(rest) != 8 {
			t.Fatalf("got %d active nodes, want 8", len(first)+len(rest))
		}
	})

	bad := []struct {
		name string
		page Page
		msg  string
	}{
		{"json sort key", Page{SortKey: "properties"}, "storage: invalid sort_key \"properties\""},
		{"unknown sort key", Page{SortKey: "id; DROP TABLE nodes"}, "storage: invalid sort_key \"id; DROP TABLE nodes\""},
		{"sort dir", Page{SortDir: "up"}, "storage: invalid sort_dir \"up\""},
		{"negative limit", Page{Limit: -1}, "storage: invalid limit \"-1\""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ListNodes(ctx, NodeQuery{Page: tc.page})
			wantKind(t, err, fault.Invalid, tc.msg)
		})
	}
}

func TestPorts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a := mustCreateNode(t, s, newNode("a"))
	b := mustCreateNode(t, s, newNode("b"))
	pg := uuid.NewString()
	full := &Port{
		UUID: uuid.NewString(), Name: ptr("eth0"), NodeUUID: a.UUID, PortgroupUUID: ptr(pg),
		Address:             "52:54:00:AB:CD:EF",
		LocalLinkConnection: JSONObject{"switch_id": "aa:bb", "port_id": "Gi0/1"},
		PXEEnabled:          true, PhysicalNetwork: ptr("physnet1"),
		InternalInfo: JSONObject{"tenant_vif_port_id": "x"}, Extra: JSONObject{"k": "v"},
		IsSmartNIC: true, CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	if err := s.CreatePort(ctx, full); err != nil {
		t.Fatal(err)
	}
	if full.Address != "52:54:00:ab:cd:ef" || full.ID == 0 {
		t.Fatalf("address %s id %d", full.Address, full.ID)
	}
	got, err := s.GetPort(ctx, full.UUID)
	if err != nil || !reflect.DeepEqual(got, full) {
		t.Fatalf("round trip:\n got %+v (%v)\nwant %+v", got, err, full)
	}
	minimal := &Port{NodeUUID: b.UUID, Address: "52:54:00:00:00:01"}
	if err := s.CreatePort(ctx, minimal); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetPort(ctx, minimal.UUID)
	if err != nil || !reflect.DeepEqual(got, minimal) || got.Extra == nil || got.Name != nil {
		t.Fatalf("minimal round trip:\n got %+v (%v)\nwant %+v", got, err, minimal)
	}
	byAddr, err := s.GetPortByAddress(ctx, "52:54:00:Ab:cD:eF")
	if err != nil || byAddr.UUID != full.UUID {
		t.Fatalf("GetPortByAddress = %v, %v", byAddr, err)
	}
	for i := 2; i < 6; i++ {
		p := &Port{NodeUUID: a.UUID, Address: fmt.Sprintf("52:54:00:00:00:%02x", i)}
		if err := s.CreatePort(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	addrs := func(ps []*Port) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.Address)
		}
		return out
	}
	tests := []struct {
		name string
		q    PortQuery
		want []string
	}{
		{"all", PortQuery{}, []string{"52:54:00:ab:cd:ef", "52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03", "52:54:00:00:00:04", "52:54:00:00:00:05"}},
		{"node", PortQuery{NodeUUID: ptr(b.UUID)}, []string{"52:54:00:00:00:01"}},
		{"address any case", PortQuery{Address: ptr("52:54:00:AB:CD:EF")}, []string{"52:54:00:ab:cd:ef"}},
		{"portgroup", PortQuery{PortgroupUUID: ptr(pg)}, []string{"52:54:00:ab:cd:ef"}},
		{"sorted by address desc, limit", PortQuery{Page: Page{SortKey: "address", SortDir: Desc, Limit: 2}}, []string{"52:54:00:ab:cd:ef", "52:54:00:00:00:05"}},
		{"node, after marker", PortQuery{NodeUUID: ptr(a.UUID), Page: Page{Marker: full.UUID, Limit: 2}}, []string{"52:54:00:00:00:02", "52:54:00:00:00:03"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListPorts(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if g := addrs(got); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %v, want %v", g, tc.want)
			}
		})
	}
	_, err = s.ListPorts(ctx, PortQuery{Page: Page{SortKey: "extra"}})
	wantKind(t, err, fault.Invalid, "storage: invalid sort_key \"extra\"")

	t.Run("update", func(t *testing.T) {
		out, err := s.UpdatePort(ctx, full.UUID, func(p *Port) error {
			p.Address = "52:54:00:FF:FF:FF"
			p.NodeUUID = b.UUID
			p.PXEEnabled = false
			p.Name = nil
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetPort(ctx, full.UUID)
		if !reflect.DeepEqual(got, out) || got.Address != "52:54:00:ff:ff:ff" || got.NodeUUID != b.UUID || got.PXEEnabled || got.Name != nil || got.UpdatedAt == nil {
			t.Fatalf("after update: %+v", got)
		}
		sentinel := errors.New("no")
		if _, err := s.UpdatePort(ctx, full.UUID, func(p *Port) error { p.Address = "x"; return sentinel }); err != sentinel {
			t.Fatalf("err = %v, want sentinel", err)
		}
		missing := uuid.NewString()
		_, err = s.UpdatePort(ctx, full.UUID, func(p *Port) error { p.NodeUUID = missing; return nil })
		wantKind(t, err, fault.NotFound, "storage: no nodes row "+missing)
		if again, _ := s.GetPort(ctx, full.UUID); !reflect.DeepEqual(again, got) {
			t.Fatalf("failed updates changed the port: %+v", again)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := s.DeletePort(ctx, minimal.UUID); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetPort(ctx, minimal.UUID)
		wantKind(t, err, fault.NotFound, "")
	})
}

func TestConductors(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	first := time.Date(2025, 2, 3, 4, 5, 6, 789012345, time.UTC)
	c := &Conductor{Hostname: "c2", ConductorGroup: "g", Drivers: []string{"ipmi", "fake-hardware"}, CreatedAt: first}
	if err := s.RegisterConductor(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetConductor(ctx, "c2")
	if err != nil || !reflect.DeepEqual(got, c) || !got.Online || got.UpdatedAt == nil {
		t.Fatalf("got %+v (%v), want %+v", got, err, c)
	}
	if err := s.UnregisterConductor(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetConductor(ctx, "c2"); got.Online {
		t.Fatal("still online after unregister")
	}
	// Re-register keeps the first created_at and comes back online.
	again := &Conductor{Hostname: "c2", Drivers: []string{"ipmi"}}
	if err := s.RegisterConductor(ctx, again); err != nil {
		t.Fatal(err)
	}
	if !again.CreatedAt.Equal(first.Truncate(time.Microsecond)) {
		t.Fatalf("CreatedAt after re-register = %v, want %v", again.CreatedAt, first)
	}
	got, _ = s.GetConductor(ctx, "c2")
	if !got.Online || !reflect.DeepEqual(got.Drivers, []string{"ipmi"}) || got.ConductorGroup != "" || !got.CreatedAt.Equal(again.CreatedAt) {
		t.Fatalf("after re-register: %+v", got)
	}
	beat := time.Date(2030, 1, 1, 0, 0, 0, 1000, time.UTC)
	if err := s.UnregisterConductor(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchConductor(ctx, "c2", beat); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetConductor(ctx, "c2")
	if !got.UpdatedAt.Equal(beat) || !got.Online {
		t.Fatalf("after touch: %+v", got)
	}
	for _, h := range []string{"c3", "c1"} {
		if err := s.RegisterConductor(ctx, &Conductor{Hostname: h}); err != nil {
			t.Fatal(err)
		}
	}
	hosts := func(cs []*Conductor) []string {
		out := []string{}
		for _, c := range cs {
			out = append(out, c.Hostname)
		}
		return out
	}
	tests := []struct {
		name string
		page Page
		want []string
	}{
		{"default", Page{}, []string{"c1", "c2", "c3"}},
		{"id means default", Page{SortKey: "id"}, []string{"c1", "c2", "c3"}},
		{"desc", Page{SortDir: Desc}, []string{"c3", "c2", "c1"}},
		{"marker", Page{Marker: "c1", Limit: 1}, []string{"c2"}},
		{"by created_at", Page{SortKey: "created_at", Limit: 1}, []string{"c2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListConductors(ctx, tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if g := hosts(got); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %v, want %v", g, tc.want)
			}
		})
	}
}

func TestEvents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := mustCreateNode(t, s, newNode("n"))
	other := mustCreateNode(t, s, newNode("other"))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var evs []*Event
	for i := 0; i < 5; i++ {
		// Created out of time order: listing follows created_at.
		e := &Event{NodeUUID: n.UUID, CreatedAt: base.Add(time.Duration((i*3)%5) * time.Second),
			Conductor: "c", EventType: "provisioning", Severity: "INFO", Event: fmt.Sprintf("e%d", i),
			User: "admin", Verb: "manage", FromState: "enroll", ToState: "verifying"}
		if err := s.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if err := s.AddEvent(ctx, &Event{NodeUUID: other.UUID, Event: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEvent(ctx, n.UUID, evs[2].UUID)
	if err != nil || !reflect.DeepEqual(got, evs[2]) {
		t.Fatalf("GetEvent = %+v, %v; want %+v", got, err, evs[2])
	}
	_, err = s.GetEvent(ctx, other.UUID, evs[2].UUID)
	wantKind(t, err, fault.NotFound, "storage: no node_history row "+evs[2].UUID)

	msgs := func(es []*Event) []string {
		out := []string{}
		for _, e := range es {
			out = append(out, e.Event)
		}
		return out
	}
	tests := []struct {
		name string
		page Page
		want []string
	}{
		{"oldest first", Page{}, []string{"e0", "e2", "e4", "e1", "e3"}},
		{"newest first", Page{SortDir: Desc}, []string{"e3", "e1", "e4", "e2", "e0"}},
		{"after marker", Page{Marker: evs[2].UUID, Limit: 2}, []string{"e4", "e1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListEvents(ctx, n.UUID, tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if g := msgs(got); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %v, want %v", g, tc.want)
			}
		})
	}
	// A marker from another node's history is not found in this one.
	oth, _ := s.ListEvents(ctx, other.UUID, Page{})
	_, err = s.ListEvents(ctx, n.UUID, Page{Marker: oth[0].UUID})
	wantKind(t, err, fault.NotFound, "")
	// A node without events lists empty, not NotFound.
	empty := mustCreateNode(t, s, newNode("empty"))
	if es, err := s.ListEvents(ctx, empty.UUID, Page{}); err != nil || len(es) != 0 {
		t.Fatalf("events of empty node = %v, %v", es, err)
	}
}

func TestDeleteNodeCascades(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := mustCreateNode(t, s, newNode("n"))
	keep := mustCreateNode(t, s, newNode("keep"))
	for i, node := range []*Node{n, n, keep} {
		if err := s.CreatePort(ctx, &Port{NodeUUID: node.UUID, Address: fmt.Sprintf("52:54:00:00:00:%02x", i)}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddEvent(ctx, &Event{NodeUUID: node.UUID, Event: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	count := func(table, nodeUUID string) int {
		var c int
		if err := s.reader().queryRow(ctx, "SELECT COUNT(*) FROM "+table+" WHERE node_uuid = ?", nodeUUID).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if p, h := count("ports", n.UUID), count("node_history", n.UUID); p != 0 || h != 0 {
		t.Fatalf("left behind %d ports, %d events", p, h)
	}
	if p, h := count("ports", keep.UUID), count("node_history", keep.UUID); p != 1 || h != 1 {
		t.Fatalf("other node has %d ports, %d events; want 1, 1", p, h)
	}
	_, err := s.GetNode(ctx, n.UUID)
	wantKind(t, err, fault.NotFound, "")
	wantKind(t, s.DeleteNode(ctx, n.UUID), fault.NotFound, "")
}

func TestReleaseAllReservations(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var mine []string
	for i := 0; i < 4; i++ {
		n := newNode(fmt.Sprintf("n%d", i))
		switch i {
		case 0, 2:
			n.Reservation = ptr("me")
			mine = append(mine, n.UUID)
		case 1:
			n.Reservation = ptr("other")
		}
		mustCreateNode(t, s, n)
	}
	got, err := s.ReleaseAllReservations(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	sort.Strings(mine)
	if !reflect.DeepEqual(got, mine) {
		t.Fatalf("released %v, want %v", got, mine)
	}
	reserved, _ := s.ListNodes(ctx, NodeQuery{Reserved: ptr(true)})
	if r := names(reserved); !reflect.DeepEqual(r, []string{"n1"}) {
		t.Fatalf("still reserved: %v", r)
	}
	if again, err := s.ReleaseAllReservations(ctx, "me"); err != nil || len(again) != 0 || again == nil {
		t.Fatalf("second release = %v, %v; want empty", again, err)
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := testDatabase(t)
	s, err := OpenDatabase(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	n := fullNode()
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		s, err = OpenDatabase(ctx, path)
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		got, err := s.GetNode(ctx, n.UUID)
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("after reopen: %+v (%v)", got, err)
		}
		ms, _ := loadMigrations()
		var applied, distinct int
		if err := s.r.db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations").Scan(&applied, &distinct); err != nil {
			t.Fatal(err)
		}
		if applied != len(ms) || distinct != len(ms) {
			t.Fatalf("schema_migrations has %d rows (%d versions), want %d", applied, distinct, len(ms))
		}
		var mode string
		if onPostgres() {
			// PostgreSQL has its own write-ahead log.
		} else if err := s.r.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal_mode = %q, %v", mode, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadersAreReadOnly(t *testing.T) {
	s := openTest(t)
	if _, err := s.r.db.ExecContext(context.Background(), "DELETE FROM nodes"); err == nil {
		t.Fatal("reader pool accepted a write")
	}
}

func TestMigrationsOrdered(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("migrations = %v", ms)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].version <= ms[i-1].version {
			t.Fatalf("migrations out of order: %s after %s", ms[i].name, ms[i-1].name)
		}
	}
}

func TestListNodesProjectionReadsUUID(t *testing.T) {
	ctx := context.Background()
	st, err := OpenDatabase(ctx, testDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := &Node{UUID: "8a1b4b38-3a0c-4c5a-9a57-111111111111", Driver: "fake-hardware", ProvisionState: "manageable", CreatedAt: time.Now()}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListNodes(ctx, NodeQuery{Columns: []string{"provision_state"}, IncludeChildren: true})
	if err != nil || len(got) != 1 || got[0].UUID != n.UUID || got[0].ProvisionState != "manageable" {
		t.Fatalf("projection: %v %+v", err, got)
	}
}
