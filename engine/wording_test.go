package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"castiron/fault"
	"castiron/storage"
)

// TestWord: every neutral storage error becomes Ironic's message, byte for
// byte, with Ironic's kind. These are the sentences storage itself wrote
// before it returned neutral errors.
func TestWord(t *testing.T) {
	u, other := "0a9e0d5c-1b7c-4d4e-8f32-111111111111", "0a9e0d5c-1b7c-4d4e-8f32-222222222222"
	dup := func(table string, cols, vals []string) error {
		return &storage.DuplicateError{Table: table, Columns: cols, Values: vals, Row: other}
	}
	c := func(s ...string) []string { return s }
	tests := []struct {
		err  error
		kind fault.Kind
		msg  string
	}{
		{&storage.NotFoundError{Table: "nodes", Key: u}, fault.NotFound, "Node " + u + " could not be found."},
		{&storage.NotFoundError{Table: "nodes", Key: "nope"}, fault.NotFound, "Node nope could not be found."},
		{&storage.NotFoundError{Table: "nodes", Column: "instance_uuid", Key: u}, fault.NotFound, "Instance " + u + " could not be found."},
		{&storage.NotFoundError{Table: "ports", Key: "52:54:00:00:00:01"}, fault.NotFound, "Port 52:54:00:00:00:01 could not be found."},
		{&storage.NotFoundError{Table: "conductors", Key: "c1"}, fault.NotFound, "Conductor c1 could not be found."},
		{&storage.NotFoundError{Table: "node_history", Key: u}, fault.NotFound, "Node history record " + u + " could not be found."},
		{&storage.NotFoundError{Table: "chassis", Key: u}, fault.NotFound, "Chassis " + u + " could not be found."},
		{&storage.NotFoundError{Table: "portgroups", Key: "nope"}, fault.NotFound, "Portgroup nope could not be found."},
		{&storage.NotFoundError{Table: "allocations", Key: "nope"}, fault.NotFound, "Allocation nope could not be found."},
		{&storage.NotFoundError{Table: "deploy_templates", Key: u}, fault.NotFound, "Deploy template " + u + " could not be found."},
		{&storage.NotFoundError{Table: "volume_connectors", Key: u}, fault.NotFound, "Volume connector " + u + " could not be found."},
		{&storage.NotFoundError{Table: "volume_targets", Key: u}, fault.NotFound, "Volume target " + u + " could not be found."},
		{&storage.NotFoundError{Table: "inspection_rules", Key: u}, fault.NotFound, "Rule " + u + " could not be found."},
		{dup("inspection_rules", c("uuid"), c(u)), fault.Conflict, "A rule with UUID " + u + " already exists."},
		{dup("nodes", c("uuid"), c(u)), fault.Conflict, "A node with UUID " + u + " already exists."},
		{dup("nodes", c("name"), c("a")), fault.Conflict, "A node with name a already exists."},
		{dup("nodes", c("instance_uuid"), c(u)), fault.Conflict,
			"Instance " + u + " is already associated with a node, it cannot be associated with this other node " + other},
		{dup("ports", c("uuid"), c(u)), fault.Conflict, "A port with UUID " + u + " already exists."},
		{dup("ports", c("address"), c("52:54:00:aa:bb:cc")), fault.Conflict, "A port with MAC address 52:54:00:aa:bb:cc already exists."},
		{dup("ports", c("name"), c("p0")), fault.Conflict, "A port with name p0 already exists."},
		{dup("chassis", c("uuid"), c(u)), fault.Conflict, "A chassis with UUID " + u + " already exists."},
		{dup("portgroups", c("uuid"), c(u)), fault.Conflict, "A portgroup with UUID " + u + " already exists."},
		{dup("portgroups", c("name"), c("bond0")), fault.Conflict, "A portgroup with name bond0 already exists."},
		{dup("portgroups", c("address"), c("52:54:00:00:00:01")), fault.Conflict, "A portgroup with MAC address 52:54:00:00:00:01 already exists."},
		{dup("deploy_templates", c("name"), c("CUSTOM_RAID1")), fault.Conflict, "A deploy template with name CUSTOM_RAID1 already exists."},
		{dup("deploy_templates", c("uuid"), c(u)), fault.Conflict, "A deploy template with UUID " + u + " already exists."},
		{dup("allocations", c("uuid"), c(u)), fault.Conflict, "An allocation with UUID " + u + " already exists."},
		{dup("allocations", c("name"), c("dup")), fault.Conflict, "An allocation with name dup already exists."},
		{dup("node_history", c("uuid"), c(u)), fault.Conflict, "A node history record with UUID " + u + " already exists."},
		{dup("volume_connectors", c("uuid"), c(u)), fault.Conflict, "A volume connector with UUID " + u + " already exists."},
		{dup("volume_connectors", c("type", "connector_id"), c("iqn", "iqn.2017-05.org.openstack:01:d9a51732c3f")), fault.Conflict,
			"A volume connector with type iqn and connector ID iqn.2017-05.org.openstack:01:d9a51732c3f already exists."},
		{dup("volume_targets", c("uuid"), c(u)), fault.Conflict, "A volume target with UUID " + u + " already exists."},
		{dup("volume_targets", c("node_uuid", "boot_index"), c(u, "0")), fault.Conflict, "A volume target with boot index '0' for the same node already exists."},
		{&storage.InUseError{Table: "chassis", Key: u, By: "nodes"}, fault.Invalid, "Cannot complete the requested action because chassis " + u + " contains nodes."},
		{&storage.InUseError{Table: "portgroups", Key: "7", By: "ports"}, fault.Invalid, "Cannot complete the requested action because portgroup 7 contains ports."},
		{&storage.InvalidError{Table: "nodes", Column: "uuid", Value: "not-a-uuid"}, fault.Invalid, "Expected a UUID but received not-a-uuid."},
		{&storage.InvalidError{Table: "nodes", Column: "sort_key", Value: "properties"}, fault.Invalid, "The sort_key value properties is an invalid field for sorting"},
		{&storage.InvalidError{Table: "nodes", Column: "sort_key", Value: "id; DROP TABLE nodes"}, fault.Invalid, "The sort_key value id; DROP TABLE nodes is an invalid field for sorting"},
		{&storage.InvalidError{Table: "nodes", Column: "sort_dir", Value: "up"}, fault.Invalid, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"},
		{&storage.InvalidError{Table: "nodes", Column: "limit", Value: "-1"}, fault.Invalid, "Limit must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.msg, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("wrapped: %w", tc.err)} {
				got := Word(err)
				if fault.KindOf(got) != tc.kind || got.Error() != tc.msg {
					t.Fatalf("Word(%v) = kind %d %q; want kind %d %q", err, fault.KindOf(got), got, tc.kind, tc.msg)
				}
			}
		})
	}
	other1 := errors.New("disk full")
	if Word(other1) != other1 || Word(nil) != nil {
		t.Fatal("Word changed an error that is not storage's")
	}
	worded := fault.New(fault.Invalid, "x")
	if Word(worded) != worded {
		t.Fatal("Word rewrote a fault")
	}
}

// TestWordFromStore: the neutral errors a real store returns carry what
// the wording needs (the row written, every column of the constraint).
func TestWordFromStore(t *testing.T) {
	ctx := context.Background()
	s, err := storage.Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inst := "0a9e0d5c-1b7c-4d4e-8f32-333333333333"
	a := &storage.Node{Driver: "fake-hardware", ProvisionState: "enroll", InstanceUUID: &inst}
	if err := s.CreateNode(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := &storage.Node{Driver: "fake-hardware", ProvisionState: "enroll", InstanceUUID: &inst}
	err = s.CreateNode(ctx, b) // fills b.UUID before the insert fails
	if got := Word(err); got == nil || got.Error() != "Instance "+inst+" is already associated with a node, it cannot be associated with this other node "+b.UUID {
		t.Fatalf("duplicate instance: %v", got)
	}
	for i := 0; i < 2; i++ {
		err = s.CreateVolumeConnector(ctx, &storage.VolumeConnector{NodeUUID: a.UUID, Type: "iqn", ConnectorID: "iqn.x"})
	}
	if got := Word(err); got == nil || got.Error() != "A volume connector with type iqn and connector ID iqn.x already exists." {
		t.Fatalf("duplicate connector: %v", got)
	}
	_, err = s.GetNode(ctx, "nope")
	if got := Word(err); got == nil || got.Error() != "Node nope could not be found." || !fault.Is(got, fault.NotFound) {
		t.Fatalf("missing node: %v", got)
	}
}
