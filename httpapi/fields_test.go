package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// gateRow is one field of a table as the gate test reads it.
type gateRow struct {
	name  string
	min   int
	flags fieldFlags
	shown bool
}

func rowsOf[T any](res *resource[T]) []gateRow {
	out := make([]gateRow, len(res.fields))
	for i, f := range res.fields {
		out[i] = gateRow{f.name, f.min, f.flags, f.get != nil}
	}
	return out
}

// gateResource says how to drive one resource's table over HTTP.
type gateResource struct {
	path     string // collection, e.g. "/v1/ports"
	min      int    // the resource API's version
	patchMin int    // PATCH's version
	rows     []gateRow
	base     func() map[string]any // a valid minimal POST body, fresh each call
	sample   map[string]func() any // a valid value for each writable field
	// expect is the status at the field's version when it is not 201/200,
	// by "field op" (op: post, add, replace, remove).
	expect  map[string]int
	skip    map[string]string     // field -> why the generic test leaves it to the resource's own tests
	full    func() map[string]any // a POST body with every field castiron has set (latest)
	notFull []string              // fields left out of the every-field object
}

func ver(minor int) string { return fmt.Sprintf("1.%d", minor) }

// TestFieldGatesByVersion walks every field of every table that a POST or
// PATCH accepts: just below the field's version the request is 406, at its
// version it succeeds (or answers what Ironic answers there); PATCH tries
// add, replace and remove. Fields a PATCH may not touch answer 400
// "Cannot patch", and a PATCH of an old field at the resource's first
// version succeeds on an object whose newer fields are all set (the port
// PATCH 406 below 1.88 was that).
func TestFieldGatesByVersion(t *testing.T) {
	h := newAPI(t)
	var seq atomic.Int64
	uniq := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, seq.Add(1)) }
	mac := func() any { return fmt.Sprintf("52:54:00:%02x:%02x:%02x", seq.Add(1)%256, 0x10, seq.Load()/256%256) }
	node := h.createNode(map[string]any{"name": "gate-parent"})["uuid"].(string)
	other := h.createNode(map[string]any{"name": "gate-other"})["uuid"].(string)
	// A parent must have its child's owner: the every-field node's is "o".
	otherOwned := h.createNode(map[string]any{"name": "gate-other-o", "owner": "o"})["uuid"].(string)
	for _, n := range []string{node, other} { // volume changes need it off
		h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+n+"/states/power", latest, map[string]any{"target": "power off"})
	}
	chassis := h.expect(http.StatusCreated, "POST", "/v1/chassis", latest, map[string]any{}).json(t)["uuid"]
	pg := h.expect(http.StatusCreated, "POST", "/v1/portgroups", latest, map[string]any{"node_uuid": node, "name": "gate-pg"}).json(t)["uuid"]
	obj := func() any { return map[string]any{"k": "v"} }
	str := func(s string) func() any { return func() any { return s } }
	val := func(v any) func() any { return func() any { return v } }
	fresh := func() any { return uuid.NewString() }
	step := []any{map[string]any{"interface": "deploy", "step": "s", "args": map[string]any{}, "priority": int64(10)}}

	nodeSample := map[string]func() any{
		"automated_clean": val(true), "chassis_uuid": val(chassis), "conductor_group": str("group1"),
		"description": str("d"), "driver": str("fake-hardware"), "driver_info": obj, "extra": obj,
		"instance_info": obj, "instance_uuid": fresh, "lessee": str("l"), "maintenance": val(true),
		"name": func() any { return uniq("gate-n") }, "network_data": obj, "owner": str("o"),
		"parent_node": val(other), "properties": obj, "resource_class": str("rc"), "retired": val(true),
		"shard": str("s"), "uuid": fresh,
		"protected": val(true), "protected_reason": str("r"), "retired_reason": str("r"),
		"network_interface": str("noop"), "storage_interface": str("noop"),
		"disable_power_off": val(true), "instance_name": func() any { return uniq("vm-") },
	}
	for _, k := range []string{"bios", "boot", "console", "deploy", "firmware", "inspect", "management", "power", "raid", "rescue", "vendor"} {
		nodeSample[k+"_interface"] = str("fake")
	}
	nodeFull := func() map[string]any {
		body := map[string]any{}
		for _, r := range rowsOf(nodeTable) {
			if s, ok := nodeSample[r.name]; ok && r.flags&fCreate != 0 {
				body[r.name] = s()
			}
		}
		body["parent_node"] = otherOwned
		return body
	}
	resources := map[string]gateResource{
		"node": {path: "/v1/nodes", min: 1, patchMin: 1, rows: rowsOf(nodeTable),
			base:   func() map[string]any { return map[string]any{"driver": "fake-hardware"} },
			sample: nodeSample,
			// What Ironic answers at the field's version on an enroll node
			// whose conductor serves the default group only.
			expect: map[string]int{"driver remove": 400,
				"conductor_group post": 400, "conductor_group add": 400, "conductor_group replace": 400,
				"protected add": 409, "protected replace": 409,
				"protected_reason add": 400, "protected_reason replace": 400,
				"retired_reason add": 400, "retired_reason replace": 400},
			full:    nodeFull,
			notFull: []string{"conductor_group", "protected_reason", "retired_reason"},
		},
		"port": {path: "/v1/ports", min: 1, patchMin: 1, rows: rowsOf(portTable),
			base: func() map[string]any { return map[string]any{"node_uuid": node, "address": mac()} },
			sample: map[string]func() any{"address": mac, "node_uuid": val(node), "extra": obj, "is_smartnic": val(true),
				"local_link_connection": val(map[string]any{"port_id": "p1"}), "physical_network": str("physnet1"),
				"pxe_enabled": val(false), "name": func() any { return uniq("gate-port") }, "portgroup_uuid": val(pg), "uuid": fresh,
				"description": str("uplink"), "vendor": str("acme"), "category": str("fast"), "available_for_dynamic_portgroup": val(false)},
			expect:  map[string]int{"address remove": 400, "node_uuid remove": 400},
			skip:    map[string]string{"node_ident": "it replaces node_uuid (exactly one of them): TestPortNodeIdent"},
			notFull: []string{"physical_network"}, // the portgroup's ports have none
		},
		"portgroup": {path: "/v1/portgroups", min: 23, patchMin: 23, rows: rowsOf(portgroupTable),
			base: func() map[string]any { return map[string]any{"node_uuid": node} },
			sample: map[string]func() any{"address": mac, "extra": obj, "mode": str("active-backup"),
				"name": func() any { return uniq("gate-pg") }, "properties": obj, "standalone_ports_supported": val(false),
				"node_uuid": val(node), "uuid": fresh, "physical_network": str("physnet1"), "category": str("bond")},
			expect: map[string]int{"mode remove": 400, "node_uuid remove": 400, "standalone_ports_supported remove": 400},
		},
		"chassis": {path: "/v1/chassis", min: 1, patchMin: 1, rows: rowsOf(chassisTable),
			base:   func() map[string]any { return map[string]any{} },
			sample: map[string]func() any{"uuid": fresh, "description": str("d"), "extra": obj},
			// A chassis UUID never changes (Ironic's object refuses it).
			expect: map[string]int{"uuid add": 400, "uuid replace": 400, "uuid remove": 400},
		},
		"connector": {path: "/v1/volume/connectors", min: 32, patchMin: 32, rows: rowsOf(connectorTable),
			base: func() map[string]any {
				return map[string]any{"node_uuid": node, "type": "iqn", "connector_id": uniq("iqn.gate:")}
			},
			sample: map[string]func() any{"connector_id": func() any { return uniq("iqn.gate:") }, "type": str("iqn"),
				"extra": obj, "node_uuid": val(node), "uuid": fresh},
			// Ironic puts the node back into the patched document, so
			// removing node_uuid changes nothing.
			expect: map[string]int{"connector_id remove": 400, "type remove": 400},
		},
		"target": {path: "/v1/volume/targets", min: 32, patchMin: 32, rows: rowsOf(targetTable),
			base: func() map[string]any {
				return map[string]any{"node_uuid": node, "volume_type": "iscsi", "volume_id": uniq("vol"), "boot_index": seq.Add(1)}
			},
			sample: map[string]func() any{"boot_index": func() any { return seq.Add(1) }, "volume_id": func() any { return uniq("vol") },
				"volume_type": str("iscsi"), "properties": obj, "extra": obj, "node_uuid": val(node), "uuid": fresh},
			expect: map[string]int{"boot_index remove": 400, "volume_id remove": 400, "volume_type remove": 400},
		},
		"template": {path: "/v1/deploy_templates", min: 55, patchMin: 55, rows: rowsOf(templateTable),
			base: func() map[string]any { return map[string]any{"name": uniq("CUSTOM_GATE_"), "steps": step} },
			sample: map[string]func() any{"name": func() any { return uniq("CUSTOM_GATE_") }, "steps": val(step),
				"extra": obj, "description": str("d"), "uuid": fresh},
			expect: map[string]int{"name remove": 400, "steps remove": 400,
				// description is not part of the stored template, so the
				// patched document has no /description to change.
				"description add": 400, "description replace": 400, "description remove": 400},
		},
		"allocation": {path: "/v1/allocations", min: 52, patchMin: 57, rows: rowsOf(allocationTable),
			base: func() map[string]any { return map[string]any{"resource_class": "gate"} },
			sample: map[string]func() any{"resource_class": str("gate"), "name": func() any { return uniq("gate-al") },
				"extra": obj, "owner": str("o"), "candidate_nodes": val([]any{}), "traits": val([]any{"CUSTOM_X"}), "uuid": fresh},
			skip: map[string]string{"node": "backfilling needs an active node; allocations_test covers it at 1.57 and 1.58"},
		},
	}
	for _, name := range []string{"node", "port", "portgroup", "chassis", "connector", "target", "template", "allocation"} {
		g := resources[name]
		t.Run(name, func(t *testing.T) {
			create := func(body map[string]any, v string) resp { return h.do("POST", g.path, v, body) }
			newObject := func() string {
				r := create(g.base(), latest)
				if r.status != http.StatusCreated {
					t.Fatalf("create %s: %d %s", name, r.status, r.body)
				}
				return r.json(t)["uuid"].(string)
			}
			for _, row := range g.rows {
				if why, skip := g.skip[row.name]; skip {
					t.Logf("%s: %s", row.name, why)
					continue
				}
				writable := row.flags&(fCreate|fPatch) != 0
				sample, ok := g.sample[row.name]
				if writable && !ok {
					t.Fatalf("%s.%s is writable but the test has no sample value for it", name, row.name)
				}
				at := max(row.min, g.min)
				if row.flags&fCreate != 0 {
					if row.min-1 >= g.min {
						body := g.base()
						body[row.name] = sample()
						if r := create(body, ver(row.min-1)); r.status != http.StatusNotAcceptable {
							t.Errorf("POST %s at %s: %d, want 406: %s", row.name, ver(row.min-1), r.status, r.body)
						}
					}
					body := g.base()
					body[row.name] = sample()
					want := http.StatusCreated
					if s, ok := g.expect[row.name+" post"]; ok {
						want = s
					}
					if r := create(body, ver(at)); r.status != want {
						t.Errorf("POST %s at %s: %d, want %d: %s", row.name, ver(at), r.status, want, r.body)
					}
				} else {
					body := g.base()
					body[row.name] = "x"
					if r := create(body, latest); r.status != http.StatusBadRequest || !strings.Contains(r.faultstring(t), "Additional properties are not allowed") {
						t.Errorf("POST read-only %s: %d %s", row.name, r.status, r.body)
					}
				}
				if row.flags&fPatch == 0 {
					if !row.shown {
						continue
					}
					id := newObject()
					op := []any{map[string]any{"op": "replace", "path": "/" + row.name, "value": "x"}}
					r := h.do("PATCH", g.path+"/"+id, latest, op)
					if r.status != http.StatusBadRequest || !strings.HasPrefix(r.faultstring(t), "Cannot patch /"+row.name+". Only the following can be updated: ") {
						t.Errorf("PATCH non-patchable %s: %d %s", row.name, r.status, r.body)
					}
					continue
				}
				pat := max(row.min, g.patchMin)
				for _, op := range []string{"add", "replace", "remove"} {
					id := newObject()
					patch := func() []any {
						o := map[string]any{"op": op, "path": "/" + row.name}
						if op != "remove" {
							o["value"] = sample()
						}
						return []any{o}
					}
					if row.min-1 >= g.patchMin {
						if r := h.do("PATCH", g.path+"/"+id, ver(row.min-1), patch()); r.status != http.StatusNotAcceptable {
							t.Errorf("PATCH %s %s at %s: %d, want 406: %s", op, row.name, ver(row.min-1), r.status, r.body)
						}
					}
					want := http.StatusOK
					if s, ok := g.expect[row.name+" "+op]; ok {
						want = s
					}
					if r := h.do("PATCH", g.path+"/"+id, ver(pat), patch()); r.status != want {
						t.Errorf("PATCH %s %s at %s: %d, want %d: %s", op, row.name, ver(pat), r.status, want, r.body)
					}
				}
			}
			// Untouched fields never trip a gate: an object with its newest
			// fields set takes a PATCH of extra at the API's first version.
			body := g.base()
			if g.full != nil {
				body = g.full()
				for _, k := range g.notFull {
					delete(body, k)
				}
			} else {
				for _, row := range g.rows {
					if s, ok := g.sample[row.name]; ok && row.flags&fCreate != 0 && g.skip[row.name] == "" && !slices.Contains(g.notFull, row.name) {
						body[row.name] = s()
					}
				}
			}
			r := create(body, latest)
			if r.status != http.StatusCreated {
				t.Fatalf("create %s with every field: %d %s", name, r.status, r.body)
			}
			id := r.json(t)["uuid"].(string)
			op := []any{map[string]any{"op": "add", "path": "/extra/k2", "value": "v2"}}
			if r := h.do("PATCH", g.path+"/"+id, ver(g.patchMin), op); r.status != http.StatusOK {
				t.Errorf("PATCH /extra/k2 at %s of a %s with every field set: %d %s", ver(g.patchMin), name, r.status, r.body)
			}
		})
	}
}

// TestFieldTablesConsistent checks what the tables declare besides
// versions: Ironic's PATCH message order lists exactly the patchable
// fields, filters named after fields are flagged, and no field is newer
// than the maximum version.
func TestFieldTablesConsistent(t *testing.T) {
	check := func(name string, rows []gateRow, patchable []string) {
		var flagged []string
		for _, r := range rows {
			if r.flags&fPatch != 0 {
				flagged = append(flagged, r.name)
			}
			if r.min > MaxMinor {
				t.Errorf("%s.%s: version 1.%d is above the maximum 1.%d", name, r.name, r.min, MaxMinor)
			}
			if r.flags&fRequired != 0 && r.flags&fCreate == 0 {
				t.Errorf("%s.%s is required but not accepted on create", name, r.name)
			}
		}
		got := slices.Clone(patchable)
		slices.Sort(got)
		slices.Sort(flagged)
		if !slices.Equal(got, flagged) {
			t.Errorf("%s: patch order %v, patchable fields %v", name, patchable, flagged)
		}
	}
	check("node", rowsOf(nodeTable), nodeTable.patchable())
	check("port", rowsOf(portTable), portTable.patchable())
	check("portgroup", rowsOf(portgroupTable), portgroupTable.patchable())
	check("chassis", rowsOf(chassisTable), chassisTable.patchable())
	check("connector", rowsOf(connectorTable), connectorTable.patchable())
	check("target", rowsOf(targetTable), targetTable.patchable())
	check("template", rowsOf(templateTable), templateTable.patchable())
	check("allocation", rowsOf(allocationTable), allocationTable.patchable())
	check("conductor", rowsOf(conductorTable), conductorTable.patchable())
	for name := range nodeFilters {
		if f := nodeTable.field(name); f != nil && !f.has(fFilter) {
			t.Errorf("node filter %s is a field not flagged fFilter", name)
		}
	}
	for _, f := range nodeTable.fields {
		if _, ok := nodeFilters[f.name]; f.has(fFilter) && !ok {
			t.Errorf("node field %s is flagged fFilter but GET /v1/nodes has no such filter", f.name)
		}
	}
}
