package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// Allocations (API 1.52; PATCH 1.57, backfill 1.58, owner 1.60), as
// Ironic's AllocationsController and NodeAllocationController serve them.

type allocationField = field[storage.Allocation]

// allocations is Ironic's allocation table (API 1.52) in its view order;
// node (1.58, backfill) is accepted on create and never shown.
var allocationTable = func() *resource[storage.Allocation] {
	res := newResource[storage.Allocation]("allocation", nil,
		allocationField{"uuid", 1, fCreate | fSort, jsonschema.Types("string", "null"), nil, func(_ *viewCtx, a *storage.Allocation) any { return a.UUID }, nil},
		allocationField{"created_at", 1, fSort, nil, nil, func(_ *viewCtx, a *storage.Allocation) any { return ironicTime(a.CreatedAt) }, nil},
		allocationField{"updated_at", 1, fSort, nil, nil, func(_ *viewCtx, a *storage.Allocation) any { return timeOrNil(a.UpdatedAt) }, nil},
		allocationField{"candidate_nodes", 1, fCreate, &jsonschema.Schema{Types: []string{"array", "null"}, Items: jsonschema.Types("string")}, nil,
			func(_ *viewCtx, a *storage.Allocation) any { return nonNilList(a.CandidateNodes) }, nil},
		allocationField{"extra", 1, fCreate | fPatch, jsonschema.Types("object", "null"), nil,
			func(_ *viewCtx, a *storage.Allocation) any { return nonNilMap(a.Extra) },
			func(a *storage.Allocation, v any) error { a.Extra = objectOrEmpty(v); return nil }},
		strField("last_error", 1, fSort, 0, func(a *storage.Allocation) **string { return &a.LastError }),
		strField("name", 1, fCreate|fPatch|fSort, 0, func(a *storage.Allocation) **string { return &a.Name }),
		strField("owner", 60, fCreate|fSort, 0, func(a *storage.Allocation) **string { return &a.Owner }),
		strField("resource_class", 1, fCreate|fSort, 80, func(a *storage.Allocation) **string { return &a.ResourceClass }),
		allocationField{"state", 1, fSort, nil, nil, func(_ *viewCtx, a *storage.Allocation) any { return a.State }, nil},
		allocationField{"traits", 1, fCreate, &jsonschema.Schema{Types: []string{"array", "null"}, Items: traitSchema}, nil,
			func(_ *viewCtx, a *storage.Allocation) any { return nonNilList(a.Traits) }, nil},
		allocationField{"links", 1, 0, nil, nil, func(v *viewCtx, a *storage.Allocation) any { return selfLinks(v, "allocations", a.UUID) }, nil},
		allocationField{"node_uuid", 1, 0, nil, nil, func(_ *viewCtx, a *storage.Allocation) any { return strOrNil(a.NodeUUID) }, nil},
		allocationField{"node", 1, fCreate, jsonschema.Types("string", "null"), nil, nil, nil},
	)
	res.patchOrder = []string{"name", "extra"}
	return res
}()

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func nonNilMap(m storage.JSONObject) storage.JSONObject {
	if m == nil {
		return storage.JSONObject{}
	}
	return m
}

// allocationUnsortable are the keys Ironic refuses to sort by with its own
// message; the model's columns are the table's fSort fields and
// conductor_affinity.
var allocationUnsortable = []string{"extra", "candidate_nodes", "traits"}

// checkQueryArgs refuses query parameters a handler does not take, as
// Ironic's args.validate does.
func checkQueryArgs(q url.Values, allowed ...string) error {
	var extra []string
	for k := range q {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return errInvalid("Unexpected arguments: %s", strings.Join(extra, ", "))
}

// allocationViewFields parses ?fields= for the allocation view and puts
// them in the view's order, which Ironic keeps whatever the request's. A
// present but empty list leaves only the links, as in Ironic.
func allocationViewFields(q url.Values, ver Version) ([]string, error) {
	raw := q.Get("fields")
	if q.Has("fields") && strings.Trim(raw, ", ") == "" {
		return []string{"links"}, nil
	}
	fields, err := allocationTable.parseFields(strings.ToLower(raw), ver)
	return allocationTable.canonical(fields), err
}

// listAllocations is GET /v1/allocations.
func (a *API) listAllocations(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	qs := r.URL.Query()
	if err := checkQueryArgs(qs, "node", "resource_class", "state", "marker", "limit", "sort_key", "sort_dir", "fields", "owner"); err != nil {
		return err
	}
	if node := qs.Get("node"); qs.Has("node") && !jsvLogicalName(node) && !argUUIDLike(node) {
		return errInvalid("Expected UUID or name for node: %s", node)
	}
	if m := qs.Get("marker"); qs.Has("marker") && !argUUIDLike(m) {
		return errInvalid("Expected UUID for marker: %s", m)
	}
	if l := qs.Get("limit"); qs.Has("limit") {
		if _, err := strconv.Atoi(strings.TrimSpace(l)); err != nil {
			return errInvalid("Expected an integer for limit: %s", l)
		}
	}
	fields, err := allocationViewFields(qs, ver)
	if err != nil {
		return err
	}
	q := storage.AllocationQuery{}
	if qs.Has("owner") {
		if !ver.AtLeast(60) {
			return errNotAcceptable()
		}
		o := qs.Get("owner")
		q.Owner = &o
	}
	page, err := parsePage(qs, append(allocationTable.names(fSort), append([]string{"conductor_affinity"}, allocationUnsortable...)...))
	if err != nil {
		return err
	}
	if slices.Contains(allocationUnsortable, page.SortKey) {
		return errInvalid("The sort_key value %s is an invalid field for sorting", page.SortKey)
	}
	if page.Marker != "" {
		if _, err := a.cond.Store().GetAllocation(r.Context(), page.Marker); err != nil {
			return err
		}
	}
	if qs.Has("node") {
		n, err := a.cond.Store().GetNode(r.Context(), qs.Get("node"))
		if err != nil {
			return asBadRequest(err)
		}
		q.NodeUUID = &n.UUID
	}
	if qs.Has("resource_class") {
		rc := qs.Get("resource_class")
		q.ResourceClass = &rc
	}
	if qs.Has("state") {
		st := qs.Get("state")
		q.State = &st
	}
	q.Page = page
	if p := listProject(r); p != nil {
		q.Owner = p // a project member lists its project's allocations
	}
	list, err := a.cond.Store().ListAllocations(r.Context(), q)
	if err != nil {
		return err
	}
	allocationTable.writePage(w, r, a.view(r), "allocations", "allocations", list, func(al *storage.Allocation) string { return al.UUID }, fields, page)
	return nil
}

// asBadRequest turns a NotFound into the 400 Ironic answers when the
// missing thing is a parameter, not the resource addressed.
func asBadRequest(err error) error {
	if fault.Is(err, fault.NotFound) {
		return fault.New(fault.Invalid, "%s", engine.Word(err).Error())
	}
	return err
}

// lookupAllocation is Ironic's get_rpc_allocation_with_suffix: a UUID or a
// logical name (lookupWithSuffix).
// An ident that can be neither is refused with the API's argument message
// for GET and DELETE, with InvalidUuidOrName's for PATCH.
func (a *API) lookupAllocation(r *http.Request, ident string) (*storage.Allocation, error) {
	if !jsvLogicalName(ident) && !argUUIDLike(ident) {
		if r.Method == http.MethodPatch {
			return nil, errInvalid("Expected a logical name or UUID but received %s.", ident)
		}
		return nil, errInvalid("Expected UUID or name for allocation_ident: %s", ident)
	}
	return lookupWithSuffix(r, ident, a.cond.Store().GetAllocation)
}

// getAllocation is GET /v1/allocations/{ident}.
func (a *API) getAllocation(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	if err := checkQueryArgs(qs, "fields"); err != nil {
		return err
	}
	al, err := a.lookupAllocation(r, r.PathValue("ident"))
	if err != nil {
		return err
	}
	fields, err := allocationViewFields(qs, versionOf(r))
	if err != nil {
		return err
	}
	return allocationTable.writeOK(w, a.view(r), al, fields)
}

// checkAllocationDoc is Ironic's ALLOCATION_VALIDATOR on a body or patched
// document named name: the table's schema, then uuid must be a UUID.
func checkAllocationDoc(name string, doc map[string]any) error {
	if err := jsonschema.Check("Schema error for "+name, allocationTable.body, doc); err != nil {
		return err
	}
	if u, ok := doc["uuid"].(string); ok && !argUUIDLike(u) {
		return errInvalid("Expected UUID for uuid: %s", u)
	}
	return nil
}

func optString(v any) *string {
	if s, ok := v.(string); ok {
		return &s
	}
	return nil
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		out = append(out, x.(string))
	}
	return out
}

// createAllocation is POST /v1/allocations.
func (a *API) createAllocation(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := decodeObject(r, "allocation")
	if err != nil {
		return err
	}
	if err := checkAllocationDoc("allocation", body); err != nil {
		return err
	}
	if _, ok := body["owner"]; ok && !ver.AtLeast(60) {
		return errNotAcceptable()
	}
	if name := body["name"]; pyrepr.Truth(name) && !jsvLogicalName(name) {
		return errInvalid("Cannot create allocation with invalid name '%s'", pyrepr.Str(name))
	}
	ctx := r.Context()
	var node *storage.Node
	if ident := body["node"]; pyrepr.Truth(ident) {
		if !ver.AtLeast(58) {
			return errInvalid("Cannot set node when creating an allocation in this API version")
		}
		if node, err = a.cond.Store().GetNode(ctx, ident.(string)); err != nil {
			return asBadRequest(err)
		}
	}
	al := &storage.Allocation{
		Name:          optString(body["name"]),
		Owner:         optString(body["owner"]),
		ResourceClass: optString(body["resource_class"]),
		Traits:        stringList(body["traits"]),
		Extra:         storage.JSONObject{},
	}
	if o := forcedOwner(r); o != nil {
		al.Owner = o // Ironic's _authorize_create_allocation
	}
	if m, ok := body["extra"].(map[string]any); ok {
		al.Extra = m
	}
	if !pyrepr.Truth(body["resource_class"]) {
		if node == nil {
			return errInvalid("The resource_class field is mandatory when not backfilling")
		}
		al.ResourceClass = node.ResourceClass
	}
	if idents := stringList(body["candidate_nodes"]); len(idents) > 0 {
		if al.CandidateNodes, err = a.candidateNodeUUIDs(r, idents); err != nil {
			return err
		}
	}
	if u, ok := body["uuid"].(string); ok && u != "" {
		al.UUID = u
	} else if node != nil && node.InstanceUUID != nil {
		// Backfilling without a UUID: the instance's is the one wanted.
		al.UUID = *node.InstanceUUID
	} else {
		al.UUID = uuid.NewString()
	}
	backfill := ""
	if node != nil {
		backfill = node.UUID
	}
	if err := a.cond.CreateAllocation(actorContext(r), al, backfill); err != nil {
		return err
	}
	return allocationTable.writeCreated(w, r, a.view(r), "allocations", al.UUID, al)
}

// candidateNodeUUIDs is Ironic's check_node_list: every ident must name an
// existing node (by UUID or name); the result keeps the request's order.
func (a *API) candidateNodeUUIDs(r *http.Request, idents []string) ([]string, error) {
	var missing []string
	out := make([]string, 0, len(idents))
	for _, ident := range idents {
		if !argUUIDLike(ident) && !jsvLogicalName(ident) {
			missing = append(missing, ident)
			continue
		}
		n, err := a.cond.Store().GetNode(r.Context(), ident)
		if fault.Is(err, fault.NotFound) {
			missing = append(missing, ident)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, n.UUID)
	}
	if len(missing) > 0 {
		return nil, errInvalid("Nodes cannot be found: %s", strings.Join(slices.Compact(missing), ", "))
	}
	return out, nil
}

// patchAllocation is PATCH /v1/allocations/{ident} (1.57).
func (a *API) patchAllocation(w http.ResponseWriter, r *http.Request) error {
	raw, err := decodeAny(r)
	if err != nil {
		return err
	}
	ops, err := parsePatch(raw)
	if err != nil {
		return err
	}
	// Ironic checks the version after the patch's schema.
	if !versionOf(r).AtLeast(57) {
		return fault.New(fault.MethodNotAllowed, "The API version does not allow updating allocations")
	}
	current, err := a.lookupAllocation(r, r.PathValue("ident"))
	if err != nil {
		return err
	}
	if err := allocationTable.checkPatch(ops, versionOf(r)); err != nil {
		return err
	}
	for _, op := range ops {
		if op.path == "/name" && pyrepr.Truth(op.value) && !jsvLogicalName(op.value) {
			return errInvalid("Cannot update allocation with invalid name '%s'", pyrepr.Str(op.value))
		}
	}
	// The document Ironic patches: the allocation's stored fields.
	doc := map[string]any{
		"uuid": current.UUID, "name": strOrNil(current.Name),
		"owner": strOrNil(current.Owner), "resource_class": strOrNil(current.ResourceClass),
		"traits": anyList(current.Traits), "candidate_nodes": anyList(current.CandidateNodes),
		"extra": jsonCopy(map[string]any(nonNilMap(current.Extra))),
	}
	patched, err := applyPatch(doc, ops)
	if err != nil {
		return err
	}
	patched = allocationTable.pruned(patched)
	if err := checkAllocationDoc("patch", patched); err != nil {
		return err
	}
	name := optString(patched["name"])
	extra, _ := patched["extra"].(map[string]any)
	if extra == nil {
		extra = storage.JSONObject{}
	}
	if reflect.DeepEqual(name, current.Name) && reflect.DeepEqual(extra, map[string]any(nonNilMap(current.Extra))) {
		// Nothing changes: Ironic saves nothing, updated_at stays.
		return allocationTable.writeOK(w, a.view(r), current, nil)
	}
	updated, err := a.cond.UpdateAllocation(actorContext(r), current.UUID, func(al *storage.Allocation) error {
		al.Name = name
		al.Extra = extra
		return nil
	})
	if err != nil {
		return err
	}
	return allocationTable.writeOK(w, a.view(r), updated, nil)
}

func anyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// deleteAllocation is DELETE /v1/allocations/{ident}.
func (a *API) deleteAllocation(w http.ResponseWriter, r *http.Request) error {
	al, err := a.lookupAllocation(r, r.PathValue("ident"))
	if err != nil {
		return err
	}
	return removed(w, r, func(ctx context.Context) error { return a.cond.DeleteAllocation(ctx, al.UUID) })
}

// allocationOfNode finds the allocation a node holds.
func (a *API) allocationOfNode(r *http.Request, n *storage.Node, ident string) (*storage.Allocation, error) {
	list, err := a.cond.Store().ListAllocations(r.Context(), storage.AllocationQuery{NodeUUID: &n.UUID, Page: storage.Page{Limit: 1}})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fault.New(fault.NotFound, "Allocation for node %s was not found", ident)
	}
	return list[0], nil
}

// getNodeAllocation is GET /v1/nodes/{ident}/allocation.
func (a *API) getNodeAllocation(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	if err := checkQueryArgs(qs, "fields"); err != nil {
		return err
	}
	fields, err := allocationViewFields(qs, versionOf(r))
	if err != nil {
		return err
	}
	ident := r.PathValue("ident")
	n, err := a.cond.Store().GetNode(r.Context(), ident)
	if err != nil {
		return asBadRequest(err)
	}
	al, err := a.allocationOfNode(r, n, ident)
	if err != nil {
		return err
	}
	return allocationTable.writeOK(w, a.view(r), al, fields)
}

// deleteNodeAllocation is DELETE /v1/nodes/{ident}/allocation.
func (a *API) deleteNodeAllocation(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	n, err := a.cond.Store().GetNode(r.Context(), ident)
	if err != nil {
		return err
	}
	al, err := a.allocationOfNode(r, n, ident)
	if err != nil {
		return err
	}
	return removed(w, r, func(ctx context.Context) error { return a.cond.DeleteAllocation(ctx, al.UUID) })
}
