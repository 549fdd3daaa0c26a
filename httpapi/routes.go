package httpapi

import "net/http"

// apiSince is an API Ironic added at version min, and how its own
// controllers answer below that version (not pecan's routing): 404 to GET
// (to every method when allNotFound, a bare pecan.abort(404)) and 405 to
// the others, with msg in the {code, title, description} body.
type apiSince struct {
	min         int
	msg         string
	allNotFound bool
}

var (
	allocationsAPI    = apiSince{52, "The API version does not allow allocations", false}
	nodeAllocationAPI = apiSince{52, "", true}
	volumeRootAPI     = apiSince{32, "The API is not supported for this version", true}
	volumeAPI         = apiSince{32, "", true}
	templatesAPI      = apiSince{55, "The API version does not allow deploy templates", false}
	shardsAPI         = apiSince{82, "The API version does not allow shards", false}
)

// apiRoute registers h under an API that answers as s says below its
// version.
func (a *API) apiRoute(method, path string, s apiSince, h handlerFunc) {
	a.route(method, path, 1, func(w http.ResponseWriter, r *http.Request) error {
		if versionOf(r).AtLeast(s.min) {
			return h(w, r)
		}
		status := http.StatusMethodNotAllowed
		if r.Method == http.MethodGet || s.allNotFound {
			status = http.StatusNotFound
		}
		writeRaw(w, status, codeBody(status, s.msg))
		return nil
	})
}

// traitsBelow37 answers /v1/nodes/{ident}/traits below 1.37 as Ironic does:
// its node controller has no traits sub-controller there, so GET reads
// "traits" as get_one's fields argument (406, traits is a 1.37 field), PUT
// finds no handler (405) and DELETE refuses the extra path part (404).
func traitsBelow37(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if versionOf(r).AtLeast(37) {
			return h(w, r)
		}
		switch r.Method {
		case http.MethodGet:
			return errNotAcceptable()
		case http.MethodPut:
			writeRaw(w, http.StatusMethodNotAllowed, codeBody(http.StatusMethodNotAllowed, ""))
			return nil
		}
		return notFoundResource()
	}
}

// routes is the whole API surface in one table.
func (a *API) routes() {
	a.mux.HandleFunc("GET /{$}", a.getRoot)
	a.mux.Handle("GET /v1", a.versioned(1, a.getV1))
	a.mux.Handle("GET /v1/{$}", a.versioned(1, a.getV1))

	// Nodes.
	a.route("GET", "/nodes", 1, a.listNodes(false))
	a.route("GET", "/nodes/detail", 1, a.listNodes(true))
	a.route("POST", "/nodes", 1, a.createNode)
	a.route("GET", "/nodes/{ident}", 1, a.getNode)
	a.route("PATCH", "/nodes/{ident}", 1, a.patchNode)
	a.route("DELETE", "/nodes/{ident}", 1, a.deleteNode)

	a.route("GET", "/nodes/{ident}/states", 1, a.getStates)
	a.route("PUT", "/nodes/{ident}/states/provision", 1, a.putProvision)
	a.route("DELETE", "/nodes/{ident}/states/provision", 1, a.deleteProvision)
	a.route("PUT", "/nodes/{ident}/states/power", 1, a.putPower)
	a.route("PUT", "/nodes/{ident}/maintenance", 1, a.putMaintenance)
	a.route("DELETE", "/nodes/{ident}/maintenance", 1, a.deleteMaintenance)
	a.route("PUT", "/nodes/{ident}/management/boot_device", 1, a.putBootDevice)
	a.route("GET", "/nodes/{ident}/management/boot_device", 1, a.getBootDevice)
	a.route("GET", "/nodes/{ident}/management/boot_device/supported", 1, a.getSupportedBootDevices)
	a.route("PUT", "/nodes/{ident}/management/inject_nmi", 29, a.putInjectNMI)
	a.route("GET", "/nodes/{ident}/management/indicators", 1, a.listIndicators)           // 1.63, not gated by Ironic
	a.route("GET", "/nodes/{ident}/management/indicators/{indicator}", 1, a.getIndicator) // 1.63, not gated by Ironic
	a.route("PUT", "/nodes/{ident}/management/indicators/{indicator}", 1, a.putIndicator) // 1.63, not gated by Ironic
	a.route("PUT", "/nodes/{ident}/states/boot_mode", 1, a.putBootMode)                   // 1.76, gated after the node lookup
	a.route("PUT", "/nodes/{ident}/states/secure_boot", 1, a.putSecureBoot)               // 1.76, gated after the node lookup
	a.route("GET", "/nodes/{ident}/validate", 1, a.getValidate)
	a.route("GET", "/nodes/{ident}/traits", 1, traitsBelow37(a.getTraits))
	a.route("PUT", "/nodes/{ident}/traits", 1, traitsBelow37(a.putTraits))
	a.route("PUT", "/nodes/{ident}/traits/{trait}", 1, traitsBelow37(a.putTraits))
	a.route("DELETE", "/nodes/{ident}/traits", 1, traitsBelow37(a.deleteTraits))
	a.route("DELETE", "/nodes/{ident}/traits/{trait}", 1, traitsBelow37(a.deleteTraits))
	a.route("GET", "/nodes/{ident}/conductor", 49, a.getNodeConductor)
	a.route("GET", "/nodes/{ident}/ports", 1, a.listPorts(false))
	a.route("GET", "/nodes/{ident}/ports/detail", 1, a.listPorts(true))
	a.route("GET", "/nodes/{ident}/history", 78, a.listHistory)
	a.route("GET", "/nodes/{ident}/history/{event}", 78, a.getHistoryEvent)
	a.route("GET", "/nodes/{ident}/inventory", 81, a.getInventory)
	a.route("GET", "/nodes/{ident}/bios", 40, a.listBIOS)
	a.route("GET", "/nodes/{ident}/bios/{setting}", 40, a.getBIOSSetting)
	a.route("GET", "/nodes/{ident}/firmware", 86, a.listFirmware)
	a.route("GET", "/nodes/{ident}/children", 83, a.getChildren)
	a.route("GET", "/nodes/{ident}/vendor_passthru/methods", 1, a.getNodeVendorMethods)
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		a.route(m, "/nodes/{ident}/vendor_passthru", 1, a.callNodeVendor)
		a.route(m, "/drivers/{name}/vendor_passthru", 1, a.callDriverVendor)
	}
	a.route("GET", "/nodes/{ident}/states/console", 1, a.getConsole)
	a.route("PUT", "/nodes/{ident}/states/console", 1, a.putConsole)
	a.route("GET", "/nodes/states/console/{ident}", 1, a.getConsole) // Ironic's pecan quirk
	a.route("PUT", "/nodes/{ident}/states/raid", 1, a.putRAID)
	a.route("GET", "/nodes/{ident}/vifs", 28, a.listVIFs)
	a.route("POST", "/nodes/{ident}/vifs", 28, a.postVIF)
	a.route("DELETE", "/nodes/{ident}/vifs/{vif}", 28, a.deleteVIF)
	a.route("GET", "/nodes/{ident}/vmedia", 89, a.getVMedia)
	a.route("POST", "/nodes/{ident}/vmedia", 89, a.postVMedia)
	a.route("DELETE", "/nodes/{ident}/vmedia", 89, a.deleteVMedia)

	// Ports.
	a.route("GET", "/ports", 1, a.listPorts(false))
	a.route("GET", "/ports/detail", 1, a.listPorts(true))
	a.route("POST", "/ports", 1, a.createPort)
	a.route("GET", "/ports/{uuid}", 1, a.getPort)
	a.route("PATCH", "/ports/{uuid}", 1, a.patchPort)
	a.route("DELETE", "/ports/{uuid}", 1, a.deletePort)

	// Chassis.
	a.route("GET", "/chassis", 1, a.listChassis(false))
	a.route("GET", "/chassis/detail", 1, a.listChassis(true))
	a.route("POST", "/chassis", 1, a.createChassis)
	a.route("GET", "/chassis/{uuid}", 1, a.getChassis)
	a.route("PATCH", "/chassis/{uuid}", 1, a.patchChassis)
	a.route("DELETE", "/chassis/{uuid}", 1, a.deleteChassis)
	a.route("GET", "/chassis/{uuid}/nodes", 1, a.listChassisNodes(false))
	a.route("GET", "/chassis/{uuid}/nodes/detail", 1, a.listChassisNodes(true))

	// Portgroups.
	a.route("GET", "/portgroups", 23, a.listPortgroups(false))
	a.route("GET", "/portgroups/detail", 23, a.listPortgroups(true))
	a.route("POST", "/portgroups", 23, a.createPortgroup)
	a.route("GET", "/portgroups/{ident}", 23, a.getPortgroup)
	a.route("PATCH", "/portgroups/{ident}", 23, a.patchPortgroup)
	a.route("DELETE", "/portgroups/{ident}", 23, a.deletePortgroup)
	a.route("GET", "/portgroups/{portgroup}/ports", 24, a.listPortgroupPorts(false))
	a.route("GET", "/portgroups/{portgroup}/ports/detail", 24, a.listPortgroupPorts(true))
	a.route("GET", "/nodes/{ident}/portgroups", 24, a.listPortgroups(false))
	a.route("GET", "/nodes/{ident}/portgroups/detail", 24, a.listPortgroups(true))

	// Allocations (1.52), events (1.54), shards (1.82): the handlers answer
	// Ironic's own responses below those versions.
	a.apiRoute("GET", "/allocations", allocationsAPI, a.listAllocations)
	a.apiRoute("POST", "/allocations", allocationsAPI, a.createAllocation)
	a.apiRoute("GET", "/allocations/{ident}", allocationsAPI, a.getAllocation)
	a.apiRoute("PATCH", "/allocations/{ident}", allocationsAPI, a.patchAllocation)
	a.apiRoute("DELETE", "/allocations/{ident}", allocationsAPI, a.deleteAllocation)
	a.apiRoute("GET", "/nodes/{ident}/allocation", nodeAllocationAPI, a.getNodeAllocation)
	a.apiRoute("DELETE", "/nodes/{ident}/allocation", nodeAllocationAPI, a.deleteNodeAllocation)
	a.route("POST", "/events", 1, a.postEvents)
	a.route("GET", "/events", 1, a.getEvents)
	a.apiRoute("GET", "/shards", shardsAPI, a.listShards)
	a.apiRoute("POST", "/shards", shardsAPI, a.postShards)
	a.apiRoute("GET", "/shards/{name}", shardsAPI, a.getShard)

	// Volume connectors and targets (1.32), deploy templates (1.55): the
	// handlers answer Ironic's own responses below those versions.
	a.volumeRoutes()
	a.deployTemplateRoutes()
	a.inspectionRuleRoutes() // 1.96: answers 404/405 below, whatever the ceiling

	// Conductors and drivers.
	a.route("GET", "/conductors", 49, a.listConductors)
	a.route("GET", "/conductors/{hostname}", 49, a.getConductor)
	a.route("GET", "/drivers", 1, a.listDrivers)
	a.route("GET", "/drivers/{name}", 1, a.getDriver)
	a.route("GET", "/drivers/{name}/properties", 1, a.getDriverProperties)
	a.route("GET", "/drivers/{name}/vendor_passthru/methods", 1, a.getDriverVendorMethods)
	a.route("GET", "/drivers/{name}/raid/logical_disk_properties", 1, a.getRAIDProperties)

	a.ramdiskRoutes()
}
