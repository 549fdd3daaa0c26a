package engine

import (
	"errors"
	"strings"

	"castiron/fault"
	"castiron/storage"
)

// notFoundNames is how Ironic names each table's row in its NotFound
// messages ("Port %s could not be found.").
var notFoundNames = map[string]string{
	"ports":             "Port",
	"conductors":        "Conductor",
	"node_history":      "Node history record",
	"chassis":           "Chassis",
	"portgroups":        "Portgroup",
	"allocations":       "Allocation",
	"deploy_templates":  "Deploy template",
	"runbooks":          "Runbook",
	"volume_connectors": "Volume connector",
	"volume_targets":    "Volume target",
	"inspection_rules":  "Rule",
}

// duplicateSubjects is the subject of Ironic's "... already exists." message
// per table, and the words for each single-column unique constraint.
var duplicateSubjects = map[string]string{
	"nodes":             "A node",
	"ports":             "A port",
	"portgroups":        "A portgroup",
	"chassis":           "A chassis",
	"deploy_templates":  "A deploy template",
	"runbooks":          "A runbook",
	"allocations":       "An allocation",
	"volume_connectors": "A volume connector",
	"volume_targets":    "A volume target",
	"node_history":      "A node history record",
	"inspection_rules":  "A rule",
}

var duplicateColumns = map[string]string{"uuid": "UUID", "name": "name", "address": "MAC address"}

// Word returns err as Ironic words it when it holds one of storage's neutral
// errors (duplicate, not found, in use, invalid), with Ironic's fault kind;
// any other error is returned unchanged. httpapi answers every error through
// it, and engine uses it where an error's text becomes a node's last_error.
func Word(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err // already worded (or a fault of its own)
	}
	if storage.Unreachable(err) {
		// A read while PostgreSQL restarts: temporary, the client retries.
		return fault.Wrap(fault.Unavailable, err, "castiron's database server cannot be reached. Retry shortly.")
	}
	var nf *storage.NotFoundError
	var dup *storage.DuplicateError
	var inUse *storage.InUseError
	var inv *storage.InvalidError
	switch {
	case errors.As(err, &nf):
		switch {
		case nf.Table == "nodes" && nf.Column == "instance_uuid":
			return fault.New(fault.NotFound, "Instance %s could not be found.", nf.Key)
		case nf.Table == "nodes":
			return fault.NodeNotFound(nf.Key)
		case nf.Table == "ports":
			return fault.PortNotFound(nf.Key)
		}
		if name, ok := notFoundNames[nf.Table]; ok {
			return fault.New(fault.NotFound, "%s %s could not be found.", name, nf.Key)
		}
	case errors.As(err, &dup):
		return wordDuplicate(err, dup)
	case errors.As(err, &inUse):
		// Ironic's ChassisNotEmpty and PortgroupNotEmpty are 400s.
		what := map[string]string{"chassis": "chassis", "portgroups": "portgroup"}[inUse.Table]
		return fault.New(fault.Invalid, "Cannot complete the requested action because %s %s contains %s.", what, inUse.Key, inUse.By)
	case errors.As(err, &inv):
		switch inv.Column {
		case "uuid":
			return fault.New(fault.Invalid, "Expected a UUID but received %s.", inv.Value)
		case "sort_key":
			return fault.New(fault.Invalid, "The sort_key value %s is an invalid field for sorting", inv.Value)
		case "sort_dir":
			return fault.New(fault.Invalid, "Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", inv.Value)
		case "limit":
			return fault.New(fault.Invalid, "Limit must be positive")
		}
	}
	return err
}

func wordDuplicate(err error, d *storage.DuplicateError) error {
	cols := strings.Join(d.Columns, ", ")
	value := func(i int) string {
		if i < len(d.Values) {
			return d.Values[i]
		}
		return ""
	}
	switch d.Table + "." + cols {
	case "nodes.instance_uuid":
		// Ironic's InstanceAssociated, which has no final period.
		return fault.New(fault.Conflict, "Instance %s is already associated with a node, it cannot be associated with this other node %s", value(0), d.Row)
	case "volume_connectors.type, connector_id":
		return fault.New(fault.Conflict, "A volume connector with type %s and connector ID %s already exists.", value(0), value(1))
	case "volume_targets.node_uuid, boot_index":
		return fault.New(fault.Conflict, "A volume target with boot index '%s' for the same node already exists.", value(1))
	}
	subject, ok1 := duplicateSubjects[d.Table]
	column, ok2 := duplicateColumns[cols]
	if !ok1 || !ok2 {
		return err
	}
	return fault.New(fault.Conflict, "%s with %s %s already exists.", subject, column, value(0))
}
