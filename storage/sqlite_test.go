package storage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
	return mustCreate(tb, s.CreateNode, n)
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
		DisablePowerOff: true, InstanceName: ptr("vm-1"), Health: ptr("OK"),
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
		RowVersion:         7, // create replaces it
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
			mustCreate(t, s.CreateNode, in)
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
	mustCreate(t, s.CreateNode, n)
	if _, err := uuid.Parse(n.UUID); err != nil || n.CreatedAt.IsZero() {
		t.Fatalf("UUID %q CreatedAt %v not filled", n.UUID, n.CreatedAt)
	}
	up := &Node{UUID: strings.ToUpper(uuid.NewString()), Driver: "d", ProvisionState: "enroll"}
	mustCreate(t, s.CreateNode, up)
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
	s, nodes := openWithNodes(t, "n1")
	n := nodes[0]
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
	mustCreate(t, s.CreatePort, p)
	q := &Port{NodeUUID: a.UUID, Address: "52:54:00:aa:bb:dd", Name: ptr("p1")}
	mustCreate(t, s.CreatePort, q)
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
	s, nodes := openWithNodes(t, "n")
	n := nodes[0]

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
	s, nodes := openWithNodes(t, "hot")
	n := nodes[0]
	for i := 0; i < 50; i++ {
		mustCreateNode(t, s, newNode(fmt.Sprintf("cold-%d", i)))
	}
	const workers, rounds = 20, 25
	readErrs := make(chan error, 4)
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
					readErrs <- err
					return
				}
				if _, err := s.GetNode(ctx, n.UUID); err != nil {
					readErrs <- err
					return
				}
			}
		}()
	}
	tick := func() *Event { return &Event{Event: "tick"} }
	errs := bumpCounter(ctx, []*DB{s}, n.UUID, workers, rounds, func(n *Node) JSONObject { return n.DriverInternalInfo }, tick)
	close(stop)
	readers.Wait()
	close(readErrs)
	for err := range readErrs {
		errs = append(errs, err)
	}
	for _, err := range errs {
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
	stores := openStores(t, 2)
	n := mustCreateNode(t, stores[0], newNode("shared"))
	const perStore, rounds = 10, 10
	noEvent := func() *Event { return nil }
	for _, err := range bumpCounter(ctx, stores, n.UUID, perStore, rounds, func(n *Node) JSONObject { return n.Extra }, noEvent) {
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

// bumpCounter has workers goroutines per store each add 1 to the "counter"
// key of field's object of the node, rounds times, in one UpdateNode each
// that records event's result in the node's history; it returns every error.
func bumpCounter(ctx context.Context, stores []*DB, nodeUUID string, workers, rounds int,
	field func(*Node) JSONObject, event func() *Event) []error {
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*workers*rounds)
	for _, s := range stores {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					_, err := s.UpdateNode(ctx, nodeUUID, func(n *Node) (*Event, error) {
						m := field(n)
						c, _ := m["counter"].(float64)
						m["counter"] = c + 1
						return event(), nil
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
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
