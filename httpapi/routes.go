package httpapi

import (
	"context"
	"net/http"
)

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

// register adds one route: a.route at a version (at) or a.apiRoute under
// an API of its own (under).
type register func(method, path string, h handlerFunc)

func (a *API) at(minMinor int) register {
	return func(method, path string, h handlerFunc) { a.route(method, path, minMinor, h) }
}

func (a *API) under(s apiSince) register {
	return func(method, path string, h handlerFunc) { a.apiRoute(method, path, s, h) }
}

// crud are the handlers of a collection (list, its /detail form when
// detail is not nil, create) and of its items (get, patch, del).
type crud struct {
	list, detail, create, get, patch, del handlerFunc
}

// crudRoutes registers h's routes on path and path/{item}.
func crudRoutes(reg register, path, item string, h crud) {
	reg("GET", path, h.list)
	if h.detail != nil {
		reg("GET", path+"/detail", h.detail)
	}
	reg("POST", path, h.create)
	one := path + "/{" + item + "}"
	reg("GET", one, h.get)
	reg("PATCH", one, h.patch)
	reg("DELETE", one, h.del)
}

// deleteItem is the DELETE of one item: the path value param, checked by
// check (nil: any), removed by del; 204 with no body.
func deleteItem(w http.ResponseWriter, r *http.Request, param string, check func(string) error, del func(context.Context, string) error) error {
	ident := r.PathValue(param)
	if check != nil {
		if err := check(ident); err != nil {
			return err
		}
	}
	return removed(w, r, func(ctx context.Context) error { return del(ctx, ident) })
}

// removed answers a DELETE whose removal is del: 204 with no body.
func removed(w http.ResponseWriter, r *http.Request, del func(context.Context) error) error {
	return noContent(w, del(actorContext(r)))
}

// noContent answers 204 unless err.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// methodNotAllowed is pecan's 405 for a method or custom action its
// controller does not have.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	writeRaw(w, http.StatusMethodNotAllowed, codeBody(http.StatusMethodNotAllowed, ""))
	return nil
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
	crudRoutes(a.at(1), "/nodes", "ident", crud{a.listNodes(false), a.listNodes(true), a.createNode, a.getNode, a.patchNode, a.deleteNode})

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
	// castiron's own: the serial console over a WebSocket (consolestream.go).
	a.route("GET", "/nodes/{ident}/states/console/stream", 1, a.consoleStream)
	a.route("PUT", "/nodes/{ident}/states/raid", 1, a.putRAID)
	a.route("PUT", "/nodes/{ident}/states/{action}", 1, methodNotAllowed) // pecan: no such custom action
	a.route("GET", "/nodes/{ident}/vifs", 28, a.listVIFs)
	a.route("POST", "/nodes/{ident}/vifs", 28, a.postVIF)
	a.route("DELETE", "/nodes/{ident}/vifs/{vif}", 28, a.deleteVIF)
	a.route("GET", "/nodes/{ident}/vmedia", 93, a.getVMedia)
	a.route("POST", "/nodes/{ident}/vmedia", 89, a.postVMedia)
	a.route("DELETE", "/nodes/{ident}/vmedia", 89, a.deleteVMedia)
	a.route("PUT", "/nodes/{ident}/vmedia", 89, methodNotAllowed)   // 404 below 1.89: the version gate first
	a.route("PATCH", "/nodes/{ident}/vmedia", 89, methodNotAllowed) // likewise

	// Ports.
	crudRoutes(a.at(1), "/ports", "uuid", crud{a.listPorts(false), a.listPorts(true), a.createPort, a.getPort, a.patchPort, a.deletePort})

	// Chassis.
	crudRoutes(a.at(1), "/chassis", "uuid", crud{a.listChassis(false), a.listChassis(true), a.createChassis, a.getChassis, a.patchChassis, a.deleteChassis})
	a.route("GET", "/chassis/{uuid}/nodes", 1, a.listChassisNodes(false))
	a.route("GET", "/chassis/{uuid}/nodes/detail", 1, a.listChassisNodes(true))

	// Portgroups.
	crudRoutes(a.at(23), "/portgroups", "ident", crud{a.listPortgroups(false), a.listPortgroups(true), a.createPortgroup, a.getPortgroup, a.patchPortgroup, a.deletePortgroup})
	a.route("GET", "/portgroups/{portgroup}/ports", 24, a.listPortgroupPorts(false))
	a.route("GET", "/portgroups/{portgroup}/ports/detail", 24, a.listPortgroupPorts(true))
	a.route("GET", "/nodes/{ident}/portgroups", 24, a.listPortgroups(false))
	a.route("GET", "/nodes/{ident}/portgroups/detail", 24, a.listPortgroups(true))

	// Allocations (1.52), events (1.54), shards (1.82): the handlers answer
	// Ironic's own responses below those versions.
	crudRoutes(a.under(allocationsAPI), "/allocations", "ident", crud{list: a.listAllocations, create: a.createAllocation,
		get: a.getAllocation, patch: a.patchAllocation, del: a.deleteAllocation})
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
	a.runbookRoutes()        // 1.92: answers 404/405 below, whatever the ceiling
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
