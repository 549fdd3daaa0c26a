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
	// onRunbook: the runbook named by param, by its owner (a public one
	// may be read by anyone with the rule's roles); on PATCH the rules of
	// the patched paths (update:owner, update:public, update).
	onRunbook
	// onRunbookList: runbook:list_all, else runbook:list on the caller's
	// project (its runbooks and the public ones).
	onRunbookList
)

// access is a route's rule and target.
type access struct {
	rule  string
	on    target
	param string
	// since, when set, is the version below which the route's handler
	// answers its own 404/405 (an apiSince route): Ironic checks that
	// version before any policy there, so the guard lets it answer.
	since int
}

func creds(rule string) access                { return access{rule: rule, on: onCreds} }
func node(rule string) access                 { return access{rule: rule, on: onNode, param: "ident"} }
func nodeAs(rule, p string) access            { return access{rule: rule, on: onNode, param: p} }
func object(on target, rule, p string) access { return access{rule, on, p, 0} }

// since marks acc as an apiSince route of version minor.
func since(minor int, acc access) access { acc.since = minor; return acc }

// routeAccess maps each route (method and path as registered, without /v1)
// to Ironic's rule. Castiron's own routes (boot timelines, the event
// stream) take the rule of the nearest Ironic read. TestRouteAccess fails
// for a route without a row: add one when adding a route.
var routeAccess = map[string]access{
	// Nodes.
	"GET /nodes":                                           access{"baremetal:node:list", onNodeList, "", 0},
	"GET /nodes/detail":                                    access{"baremetal:node:list", onNodeList, "", 0},
	"POST /nodes":                                          access{"baremetal:node:create", onNodeCreate, "", 0},
	"GET /nodes/{ident}":                                   node("baremetal:node:get"),
	"PATCH /nodes/{ident}":                                 access{"baremetal:node:update", onNodePatch, "ident", 0},
	"DELETE /nodes/{ident}":                                access{"baremetal:node:delete", onNodeDelete, "ident", 0},
	"GET /nodes/{ident}/states":                            node("baremetal:node:get_states"),
	"PUT /nodes/{ident}/states/provision":                  access{"baremetal:node:set_provision_state", onNodeProvision, "ident", 0},
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
	"GET /nodes/{ident}/ports":                             access{"baremetal:port:list", onPortList, "ident", 0},
	"GET /nodes/{ident}/ports/detail":                      access{"baremetal:port:list", onPortList, "ident", 0},
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
	"PUT /nodes/{ident}/states/{action}":                   access{"", onAnyone, "", 0},
	"GET /nodes/{ident}/vifs":                              node("baremetal:node:vif:list"),
	"POST /nodes/{ident}/vifs":                             node("baremetal:node:vif:attach"),
	"DELETE /nodes/{ident}/vifs/{vif}":                     node("baremetal:node:vif:detach"),
	"GET /nodes/{ident}/vmedia":                            node("baremetal:node:vmedia:get"),
	"POST /nodes/{ident}/vmedia":                           node("baremetal:node:vmedia:attach"),
	"DELETE /nodes/{ident}/vmedia":                         node("baremetal:node:vmedia:detach"),
	"PUT /nodes/{ident}/vmedia":                            access{"", onAnyone, "", 0}, // 405 whoever asks
	"PATCH /nodes/{ident}/vmedia":                          access{"", onAnyone, "", 0},
	"GET /nodes/{ident}/boot_timeline":                     node("baremetal:node:get"),
	"GET /boot_timeline":                                   creds("baremetal:node:list_all"),
	// Watching the serial console (castiron): whoever sees the node; typing
	// needs baremetal:node:set_console_state, judged in the handler.
	"GET /nodes/{ident}/states/console/stream": node("baremetal:node:get"),
	// Every node's newest boot event (the UI's fleet list): all nodes, so
	// list_all; a project-scoped reader gets 403 and the UI shows no column.
	"GET /boot_timeline/latest": creds("baremetal:node:list_all"),

	// Ports.
	"GET /ports":           access{"baremetal:port:list", onPortList, "", 0},
	"GET /ports/detail":    access{"baremetal:port:list", onPortList, "", 0},
	"POST /ports":          access{"baremetal:port:create", onChildCreate, "", 0},
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
	"GET /chassis/{uuid}/nodes":        access{"baremetal:node:list", onNodeList, "", 0},
	"GET /chassis/{uuid}/nodes/detail": access{"baremetal:node:list", onNodeList, "", 0},

	// Portgroups.
	"GET /portgroups":                          access{"baremetal:portgroup:list", onPortgroupList, "", 0},
	"GET /portgroups/detail":                   access{"baremetal:portgroup:list", onPortgroupList, "", 0},
	"POST /portgroups":                         access{"baremetal:portgroup:create", onChildCreate, "", 0},
	"GET /portgroups/{ident}":                  object(onPortgroup, "baremetal:portgroup:get", "ident"),
	"PATCH /portgroups/{ident}":                object(onPortgroup, "baremetal:portgroup:update", "ident"),
	"DELETE /portgroups/{ident}":               object(onPortgroup, "baremetal:portgroup:delete", "ident"),
	"GET /portgroups/{portgroup}/ports":        access{"baremetal:port:list", onPortList, "portgroup", 0},
	"GET /portgroups/{portgroup}/ports/detail": access{"baremetal:port:list", onPortList, "portgroup", 0},
	"GET /nodes/{ident}/portgroups":            access{"baremetal:portgroup:list", onPortgroupList, "ident", 0},
	"GET /nodes/{ident}/portgroups/detail":     access{"baremetal:portgroup:list", onPortgroupList, "ident", 0},

	// Allocations.
	"GET /allocations":                 since(allocationsAPI.min, access{"baremetal:allocation:list", onAllocationList, "", 0}),
	"POST /allocations":                since(allocationsAPI.min, access{"baremetal:allocation:create", onAllocationCreate, "", 0}),
	"GET /allocations/{ident}":         since(allocationsAPI.min, object(onAllocation, "baremetal:allocation:get", "ident")),
	"PATCH /allocations/{ident}":       since(allocationsAPI.min, object(onAllocation, "baremetal:allocation:update", "ident")),
	"DELETE /allocations/{ident}":      since(allocationsAPI.min, object(onAllocation, "baremetal:allocation:delete", "ident")),
	"GET /nodes/{ident}/allocation":    since(allocationsAPI.min, node("baremetal:node:get")),
	"DELETE /nodes/{ident}/allocation": since(allocationsAPI.min, node("baremetal:allocation:delete")),

	// Events, shards.
	"POST /events":       creds("baremetal:events:post"),
	"GET /events":        creds("baremetal:node:list_all"),
	"GET /shards":        since(shardsAPI.min, creds("baremetal:shards:get")),
	"POST /shards":       since(shardsAPI.min, creds("baremetal:shards:get")),
	"GET /shards/{name}": since(shardsAPI.min, creds("baremetal:shards:get")),

	// Volume.
	"GET /volume":                                    since(volumeAPI.min, creds("baremetal:volume:get")),
	"GET /nodes/{ident}/volume":                      since(volumeAPI.min, node("baremetal:volume:get")),
	"GET /volume/connectors":                         since(volumeAPI.min, access{"baremetal:volume:list", onVolumeList, "", 0}),
	"POST /volume/connectors":                        since(volumeAPI.min, access{"baremetal:volume:create", onChildCreate, "", 0}),
	"GET /volume/connectors/{uuid}":                  since(volumeAPI.min, object(onVolumeConnector, "baremetal:volume:get", "uuid")),
	"PATCH /volume/connectors/{uuid}":                since(volumeAPI.min, object(onVolumeConnector, "baremetal:volume:update", "uuid")),
	"DELETE /volume/connectors/{uuid}":               since(volumeAPI.min, object(onVolumeConnector, "baremetal:volume:delete", "uuid")),
	"GET /volume/targets":                            since(volumeAPI.min, access{"baremetal:volume:list", onVolumeList, "", 0}),
	"POST /volume/targets":                           since(volumeAPI.min, access{"baremetal:volume:create", onChildCreate, "", 0}),
	"GET /volume/targets/{uuid}":                     since(volumeAPI.min, object(onVolumeTarget, "baremetal:volume:get", "uuid")),
	"PATCH /volume/targets/{uuid}":                   since(volumeAPI.min, object(onVolumeTarget, "baremetal:volume:update", "uuid")),
	"DELETE /volume/targets/{uuid}":                  since(volumeAPI.min, object(onVolumeTarget, "baremetal:volume:delete", "uuid")),
	"GET /nodes/{ident}/volume/connectors":           since(volumeAPI.min, access{"baremetal:volume:list", onVolumeList, "ident", 0}),
	"POST /nodes/{ident}/volume/connectors":          since(volumeAPI.min, access{"baremetal:volume:create", onChildCreate, "", 0}),
	"GET /nodes/{ident}/volume/connectors/{uuid}":    since(volumeAPI.min, object(onVolumeConnector, "baremetal:volume:get", "uuid")),
	"PATCH /nodes/{ident}/volume/connectors/{uuid}":  since(volumeAPI.min, object(onVolumeConnector, "baremetal:volume:update", "uuid")),
	"DELETE /nodes/{ident}/volume/connectors/{uuid}": since(volumeAPI.min, object(onVolumeConnector, "baremetal:volume:delete", "uuid")),
	"GET /nodes/{ident}/volume/targets":              since(volumeAPI.min, access{"baremetal:volume:list", onVolumeList, "ident", 0}),
	"POST /nodes/{ident}/volume/targets":             since(volumeAPI.min, access{"baremetal:volume:create", onChildCreate, "", 0}),
	"GET /nodes/{ident}/volume/targets/{uuid}":       since(volumeAPI.min, object(onVolumeTarget, "baremetal:volume:get", "uuid")),
	"PATCH /nodes/{ident}/volume/targets/{uuid}":     since(volumeAPI.min, object(onVolumeTarget, "baremetal:volume:update", "uuid")),
	"DELETE /nodes/{ident}/volume/targets/{uuid}":    since(volumeAPI.min, object(onVolumeTarget, "baremetal:volume:delete", "uuid")),

	// Deploy templates, inspection rules: system resources.
	"GET /deploy_templates":            since(templatesAPI.min, creds("baremetal:deploy_template:get")),
	"POST /deploy_templates":           since(templatesAPI.min, creds("baremetal:deploy_template:create")),
	"GET /deploy_templates/{ident}":    since(templatesAPI.min, creds("baremetal:deploy_template:get")),
	"PATCH /deploy_templates/{ident}":  since(templatesAPI.min, creds("baremetal:deploy_template:update")),
	"DELETE /deploy_templates/{ident}": since(templatesAPI.min, creds("baremetal:deploy_template:delete")),
	// Runbooks: the list as check_list_policy, the rest by the runbook's
	// owner as check_runbook_policy_and_retrieve (runbook:use is checked
	// when a node runs one: provisionRunbook).
	"GET /runbooks":                           since(runbooksAPI.min, access{"baremetal:runbook:list", onRunbookList, "", 0}),
	"POST /runbooks":                          since(runbooksAPI.min, creds("baremetal:runbook:create")),
	"GET /runbooks/{ident}":                   since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:get", "ident")),
	"PATCH /runbooks/{ident}":                 since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:update", "ident")),
	"DELETE /runbooks/{ident}":                since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:delete", "ident")),
	"GET /runbooks/{ident}/traits":            since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:get", "ident")),
	"PUT /runbooks/{ident}/traits":            since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:update", "ident")),
	"PUT /runbooks/{ident}/traits/{trait}":    since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:update", "ident")),
	"DELETE /runbooks/{ident}/traits":         since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:update", "ident")),
	"DELETE /runbooks/{ident}/traits/{trait}": since(runbooksAPI.min, object(onRunbook, "baremetal:runbook:update", "ident")),
	"GET /inspection_rules":                   since(rulesAPI.min, creds("baremetal:inspection_rule:get")),
	"POST /inspection_rules":                  since(rulesAPI.min, creds("baremetal:inspection_rule:create")),
	"GET /inspection_rules/{uuid}":            since(rulesAPI.min, creds("baremetal:inspection_rule:get")),
	"PATCH /inspection_rules/{uuid}":          since(rulesAPI.min, creds("baremetal:inspection_rule:update")),
	"DELETE /inspection_rules/{uuid}":         since(rulesAPI.min, creds("baremetal:inspection_rule:delete")),
	"DELETE /inspection_rules":                since(rulesAPI.min, creds("baremetal:inspection_rule:delete")),

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
