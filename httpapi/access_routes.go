package httpapi

import (
	"sync"

	"castiron/httpapi/policy"
)

// target is what a route's rule is checked against, and how (access.go).
type target int

const (
	// onCreds: the caller's credentials alone (check_policy).
	onCreds target = iota
	// onNode: the node named by param (check_node_policy_and_retrieve).
	onNode
	// onNodePatch: node PATCH, the rules of the patched paths.
	onNodePatch
	// onNodeDelete: node:delete, else delete:self_owned_node.
	onNodeDelete
	// onNodeProvision: set_provision_state, and the steps' rules.
	onNodeProvision
	// onNodeCreate: node:create, or create:self_owned_node (owner forced).
	onNodeCreate
	// onNodeList: node:list_all, else node:list on the caller's project.
	onNodeList
	// onPortList, onPortgroupList, onVolumeList: the same per kind; param
	// names the parent node ("ident") or portgroup ("portgroup").
	onPortList
	onPortgroupList
	onVolumeList
	// onPort, onPortgroup, onVolumeConnector, onVolumeTarget: the object
	// named by param, judged by its node (check_port_policy_and_retrieve).
	onPort
	onPortgroup
	onVolumeConnector
	onVolumeTarget
	// onChildCreate: the node the body's node_uuid names.
	onChildCreate
	// onAnyone: no rule; the handler answers everyone alike (an unknown
	// sub-resource Ironic refuses before any policy).
	onAnyone
	// onAllocation: the allocation named by param, by its owner.
	onAllocation
	onAllocationList
	onAllocationCreate
)

// access is a route's rule and target.
type access struct {
	rule  string
	on    target
	param string
}

func creds(rule string) access                { return access{rule, onCreds, ""} }
func node(rule string) access                 { return access{rule, onNode, "ident"} }
func nodeAs(rule, p string) access            { return access{rule, onNode, p} }
func object(on target, rule, p string) access { return access{rule, on, p} }

// routeAccess maps each route (method and path as registered, without /v1)
// to Ironic's rule. Castiron's own routes (boot timelines, the event
// stream) take the rule of the nearest Ironic read. TestRouteAccess fails
// for a route without a row: add one when adding a route.
var routeAccess = map[string]access{
	// Nodes.
	"GET /nodes":                                           {"baremetal:node:list", onNodeList, ""},
	"GET /nodes/detail":                                    {"baremetal:node:list", onNodeList, ""},
	"POST /nodes":                                          {"baremetal:node:create", onNodeCreate, ""},
	"GET /nodes/{ident}":                                   node("baremetal:node:get"),
	"PATCH /nodes/{ident}":                                 {"baremetal:node:update", onNodePatch, "ident"},
	"DELETE /nodes/{ident}":                                {"baremetal:node:delete", onNodeDelete, "ident"},
	"GET /nodes/{ident}/states":                            node("baremetal:node:get_states"),
	"PUT /nodes/{ident}/states/provision":                  {"baremetal:node:set_provision_state", onNodeProvision, "ident"},
	"DELETE /nodes/{ident}/states/provision":               node("baremetal:node:set_provision_state"),
	"PUT /nodes/{ident}/states/power":                      node("baremetal:node:set_power_state"),
	"PUT /nodes/{ident}/maintenance":                       node("baremetal:node:set_maintenance"),
	"DELETE /nodes/{ident}/maintenance":                    node("baremetal:node:clear_maintenance"),
	"PUT /nodes/{ident}/management/boot_device":            node("baremetal:node:set_boot_device"),
	"GET /nodes/{ident}/management/boot_device":            node("baremetal:node:get_boot_device"),
	"GET /nodes/{ident}/management/boot_device/supported":  node("baremetal:node:get_boot_device"),
	"PUT /nodes/{ident}/management/inject_nmi":             node("baremetal:node:inject_nmi"),
	"GET /nodes/{ident}/management/indicators":             node("baremetal:node:get_indicator_state"),
	"GET /nodes/{ident}/management/indicators/{indicator}": node("baremetal:node:get_indicator_state"),
	"PUT /nodes/{ident}/management/indicators/{indicator}": node("baremetal:node:set_indicator_state"),
	"PUT /nodes/{ident}/states/boot_mode":                  node("baremetal:node:set_boot_mode"),
	"PUT /nodes/{ident}/states/secure_boot":                node("baremetal:node:set_secure_boot"),
	"GET /nodes/{ident}/validate":                          node("baremetal:node:validate"),
	"GET /nodes/{ident}/traits":                            node("baremetal:node:traits:list"),
	"PUT /nodes/{ident}/traits":                            node("baremetal:node:traits:set"),
	"PUT /nodes/{ident}/traits/{trait}":                    node("baremetal:node:traits:set"),
	"DELETE /nodes/{ident}/traits":                         node("baremetal:node:traits:delete"),
	"DELETE /nodes/{ident}/traits/{trait}":                 node("baremetal:node:traits:delete"),
	"GET /nodes/{ident}/conductor":                         node("baremetal:node:get"),
	"GET /nodes/{ident}/ports":                             {"baremetal:port:list", onPortList, "ident"},
	"GET /nodes/{ident}/ports/detail":                      {"baremetal:port:list", onPortList, "ident"},
	"GET /nodes/{ident}/history":                           node("baremetal:node:history:get"),
	"GET /nodes/{ident}/history/{event}":                   node("baremetal:node:history:get"),
	"GET /nodes/{ident}/inventory":                         node("baremetal:node:inventory:get"),
	"GET /nodes/{ident}/bios":                              node("baremetal:node:bios:get"),
	"GET /nodes/{ident}/bios/{setting}":                    node("baremetal:node:bios:get"),
	"GET /nodes/{ident}/firmware":                          node("baremetal:node:firmware:get"),
	"GET /nodes/{ident}/children":                          node("baremetal:node:get"),
	"GET /nodes/{ident}/vendor_passthru/methods":           node("baremetal:node:vendor_passthru"),
	"GET /nodes/{ident}/vendor_passthru":                   node("baremetal:node:vendor_passthru"),
	"POST /nodes/{ident}/vendor_passthru":                  node("baremetal:node:vendor_passthru"),
	"PUT /nodes/{ident}/vendor_passthru":                   node("baremetal:node:vendor_passthru"),
	"PATCH /nodes/{ident}/vendor_passthru":                 node("baremetal:node:vendor_passthru"),
	"DELETE /nodes/{ident}/vendor_passthru":                node("baremetal:node:vendor_passthru"),
	"GET /nodes/{ident}/states/console":                    node("baremetal:node:get_console"),
	"PUT /nodes/{ident}/states/console":                    node("baremetal:node:set_console_state"),
	"GET /nodes/states/console/{ident}":                    node("baremetal:node:get_console"),
	"PUT /nodes/{ident}/states/raid":                       node("baremetal:node:set_raid_state"),
	"PUT /nodes/{ident}/states/{action}":                   {"", onAnyone, ""},
	"GET /nodes/{ident}/vifs":                              node("baremetal:node:vif:list"),
	"POST /nodes/{ident}/vifs":                             node("baremetal:node:vif:attach"),
	"DELETE /nodes/{ident}/vifs/{vif}":                     node("baremetal:node:vif:detach"),
	"GET /nodes/{ident}/vmedia":                            node("baremetal:node:vmedia:get"),
	"POST /nodes/{ident}/vmedia":                           node("baremetal:node:vmedia:attach"),
	"DELETE /nodes/{ident}/vmedia":                         node("baremetal:node:vmedia:detach"),
	"GET /nodes/{ident}/boot_timeline":                     node("baremetal:node:get"),
	"GET /boot_timeline":                                   creds("baremetal:node:list_all"),

	// Ports.
	"GET /ports":           {"baremetal:port:list", onPortList, ""},
	"GET /ports/detail":    {"baremetal:port:list", onPortList, ""},
	"POST /ports":          {"baremetal:port:create", onChildCreate, ""},
	"GET /ports/{uuid}":    object(onPort, "baremetal:port:get", "uuid"),
	"PATCH /ports/{uuid}":  object(onPort, "baremetal:port:update", "uuid"),
	"DELETE /ports/{uuid}": object(onPort, "baremetal:port:delete", "uuid"),

	// Chassis: system resources.
	"GET /chassis":                     creds("baremetal:chassis:get"),
	"GET /chassis/detail":              creds("baremetal:chassis:get"),
	"POST /chassis":                    creds("baremetal:chassis:create"),
	"GET /chassis/{uuid}":              creds("baremetal:chassis:get"),
	"PATCH /chassis/{uuid}":            creds("baremetal:chassis:update"),
	"DELETE /chassis/{uuid}":           creds("baremetal:chassis:delete"),
	"GET /chassis/{uuid}/nodes":        {"baremetal:node:list", onNodeList, ""},
	"GET /chassis/{uuid}/nodes/detail": {"baremetal:node:list", onNodeList, ""},

	// Portgroups.
	"GET /portgroups":                          {"baremetal:portgroup:list", onPortgroupList, ""},
	"GET /portgroups/detail":                   {"baremetal:portgroup:list", onPortgroupList, ""},
	"POST /portgroups":                         {"baremetal:portgroup:create", onChildCreate, ""},
	"GET /portgroups/{ident}":                  object(onPortgroup, "baremetal:portgroup:get", "ident"),
	"PATCH /portgroups/{ident}":                object(onPortgroup, "baremetal:portgroup:update", "ident"),
	"DELETE /portgroups/{ident}":               object(onPortgroup, "baremetal:portgroup:delete", "ident"),
	"GET /portgroups/{portgroup}/ports":        {"baremetal:port:list", onPortList, "portgroup"},
	"GET /portgroups/{portgroup}/ports/detail": {"baremetal:port:list", onPortList, "portgroup"},
	"GET /nodes/{ident}/portgroups":            {"baremetal:portgroup:list", onPortgroupList, "ident"},
	"GET /nodes/{ident}/portgroups/detail":     {"baremetal:portgroup:list", onPortgroupList, "ident"},

	// Allocations.
	"GET /allocations":                 {"baremetal:allocation:list", onAllocationList, ""},
	"POST /allocations":                {"baremetal:allocation:create", onAllocationCreate, ""},
	"GET /allocations/{ident}":         object(onAllocation, "baremetal:allocation:get", "ident"),
	"PATCH /allocations/{ident}":       object(onAllocation, "baremetal:allocation:update", "ident"),
	"DELETE /allocations/{ident}":      object(onAllocation, "baremetal:allocation:delete", "ident"),
	"GET /nodes/{ident}/allocation":    node("baremetal:node:get"),
	"DELETE /nodes/{ident}/allocation": node("baremetal:allocation:delete"),

	// Events, shards.
	"POST /events":       creds("baremetal:events:post"),
	"GET /events":        creds("baremetal:node:list_all"),
	"GET /shards":        creds("baremetal:shards:get"),
	"POST /shards":       creds("baremetal:shards:get"),
	"GET /shards/{name}": creds("baremetal:shards:get"),

	// Volume.
	"GET /volume":                                    creds("baremetal:volume:get"),
	"GET /nodes/{ident}/volume":                      node("baremetal:volume:get"),
	"GET /volume/connectors":                         {"baremetal:volume:list", onVolumeList, ""},
	"POST /volume/connectors":                        {"baremetal:volume:create", onChildCreate, ""},
	"GET /volume/connectors/{uuid}":                  object(onVolumeConnector, "baremetal:volume:get", "uuid"),
	"PATCH /volume/connectors/{uuid}":                object(onVolumeConnector, "baremetal:volume:update", "uuid"),
	"DELETE /volume/connectors/{uuid}":               object(onVolumeConnector, "baremetal:volume:delete", "uuid"),
	"GET /volume/targets":                            {"baremetal:volume:list", onVolumeList, ""},
	"POST /volume/targets":                           {"baremetal:volume:create", onChildCreate, ""},
	"GET /volume/targets/{uuid}":                     object(onVolumeTarget, "baremetal:volume:get", "uuid"),
	"PATCH /volume/targets/{uuid}":                   object(onVolumeTarget, "baremetal:volume:update", "uuid"),
	"DELETE /volume/targets/{uuid}":                  object(onVolumeTarget, "baremetal:volume:delete", "uuid"),
	"GET /nodes/{ident}/volume/connectors":           {"baremetal:volume:list", onVolumeList, "ident"},
	"POST /nodes/{ident}/volume/connectors":          {"baremetal:volume:create", onChildCreate, ""},
	"GET /nodes/{ident}/volume/connectors/{uuid}":    object(onVolumeConnector, "baremetal:volume:get", "uuid"),
	"PATCH /nodes/{ident}/volume/connectors/{uuid}":  object(onVolumeConnector, "baremetal:volume:update", "uuid"),
	"DELETE /nodes/{ident}/volume/connectors/{uuid}": object(onVolumeConnector, "baremetal:volume:delete", "uuid"),
	"GET /nodes/{ident}/volume/targets":              {"baremetal:volume:list", onVolumeList, "ident"},
	"POST /nodes/{ident}/volume/targets":             {"baremetal:volume:create", onChildCreate, ""},
	"GET /nodes/{ident}/volume/targets/{uuid}":       object(onVolumeTarget, "baremetal:volume:get", "uuid"),
	"PATCH /nodes/{ident}/volume/targets/{uuid}":     object(onVolumeTarget, "baremetal:volume:update", "uuid"),
	"DELETE /nodes/{ident}/volume/targets/{uuid}":    object(onVolumeTarget, "baremetal:volume:delete", "uuid"),

	// Deploy templates, inspection rules: system resources.
	"GET /deploy_templates":            creds("baremetal:deploy_template:get"),
	"POST /deploy_templates":           creds("baremetal:deploy_template:create"),
	"GET /deploy_templates/{ident}":    creds("baremetal:deploy_template:get"),
	"PATCH /deploy_templates/{ident}":  creds("baremetal:deploy_template:update"),
	"DELETE /deploy_templates/{ident}": creds("baremetal:deploy_template:delete"),
	"GET /inspection_rules":            creds("baremetal:inspection_rule:get"),
	"POST /inspection_rules":           creds("baremetal:inspection_rule:create"),
	"GET /inspection_rules/{uuid}":     creds("baremetal:inspection_rule:get"),
	"PATCH /inspection_rules/{uuid}":   creds("baremetal:inspection_rule:update"),
	"DELETE /inspection_rules/{uuid}":  creds("baremetal:inspection_rule:delete"),

	// Conductors, drivers.
	"GET /conductors":                                  creds("baremetal:conductor:get"),
	"GET /conductors/{hostname}":                       creds("baremetal:conductor:get"),
	"GET /drivers":                                     creds("baremetal:driver:get"),
	"GET /drivers/{name}":                              creds("baremetal:driver:get"),
	"GET /drivers/{name}/properties":                   creds("baremetal:driver:get_properties"),
	"GET /drivers/{name}/vendor_passthru/methods":      creds("baremetal:driver:vendor_passthru"),
	"GET /drivers/{name}/raid/logical_disk_properties": creds("baremetal:driver:get_raid_logical_disk_properties"),
	"GET /drivers/{name}/vendor_passthru":              creds("baremetal:driver:vendor_passthru"),
	"POST /drivers/{name}/vendor_passthru":             creds("baremetal:driver:vendor_passthru"),
	"PUT /drivers/{name}/vendor_passthru":              creds("baremetal:driver:vendor_passthru"),
	"PATCH /drivers/{name}/vendor_passthru":            creds("baremetal:driver:vendor_passthru"),
	"DELETE /drivers/{name}/vendor_passthru":           creds("baremetal:driver:vendor_passthru"),
}

// defaultPolicy is Ironic's defaults, parsed once.
var defaultPolicy = sync.OnceValue(func() *policy.Enforcer {
	e, err := policy.New(nil)
	if err != nil {
		panic("httpapi: Ironic's default policy does not parse: " + err.Error())
	}
	return e
})
