package httpapi

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
	"sync"
)

// nodeFilter is one query filter of GET /v1/nodes. A filter named after an
// fFilter field of the node table has that field's version unless minMinor
// says otherwise; the others carry their own.
type nodeFilter struct {
	minMinor int
	apply    func(q *storage.NodeQuery, val string) error
}

// minVersion is the microversion the filter needs.
func (f nodeFilter) minVersion(name string) int {
	if fld := nodeTable.field(name); fld != nil && f.minMinor == 0 {
		return fld.min
	}
	return f.minMinor
}

func strFilter(dst func(q *storage.NodeQuery) **string) func(*storage.NodeQuery, string) error {
	return func(q *storage.NodeQuery, v string) error { *dst(q) = &v; return nil }
}

func boolFilter(name string, dst func(q *storage.NodeQuery) **bool) func(*storage.NodeQuery, string) error {
	return func(q *storage.NodeQuery, v string) error {
		b, err := parseBoolString(v)
		if err != nil {
			return errInvalid("Invalid value for %s: %s is not a boolean", name, v)
		}
		*dst(q) = &b
		return nil
	}
}

var nodeFilters = map[string]nodeFilter{
	"associated":      {1, boolFilter("associated", func(q *storage.NodeQuery) **bool { return &q.Associated })},
	"maintenance":     {0, boolFilter("maintenance", func(q *storage.NodeQuery) **bool { return &q.Maintenance })},
	"instance_uuid":   {0, strFilter(func(q *storage.NodeQuery) **string { return &q.InstanceUUID })},
	"chassis_uuid":    {0, strFilter(func(q *storage.NodeQuery) **string { return &q.ChassisUUID })},
	"provision_state": {9, provisionStateFilter},
	"driver":          {16, strFilter(func(q *storage.NodeQuery) **string { return &q.Driver })},
	"resource_class":  {0, strFilter(func(q *storage.NodeQuery) **string { return &q.ResourceClass })},
	"fault":           {0, faultFilter},
	"conductor_group": {0, func(q *storage.NodeQuery, v string) error {
		q.ConductorGroups = []string{strings.ToLower(v)}
		return nil
	}},
	"owner":                {0, strFilter(func(q *storage.NodeQuery) **string { return &q.Owner })},
	"description_contains": {1, strFilter(func(q *storage.NodeQuery) **string { return &q.DescriptionContains })},
	"retired":              {0, boolFilter("retired", func(q *storage.NodeQuery) **bool { return &q.Retired })},
	"lessee":               {0, strFilter(func(q *storage.NodeQuery) **string { return &q.Lessee })},
	// project: owned or leased by it (Ironic's project filter, which its
	// policy also applies to a project-scoped caller's list).
	"project": {0, strFilter(func(q *storage.NodeQuery) **string { return &q.Project })},
	"shard": {0, func(q *storage.NodeQuery, v string) error {
		// As Ironic: trimmed, lower-cased, de-duplicated.
		for _, s := range strings.Split(v, ",") {
			if s = strings.ToLower(strings.TrimSpace(s)); s != "" && !slices.Contains(q.Shards, s) {
				q.Shards = append(q.Shards, s)
			}
		}
		return nil
	}},
	"sharded":       {82, boolFilter("sharded", func(q *storage.NodeQuery) **bool { return &q.Sharded })},
	"parent_node":   {0, strFilter(func(q *storage.NodeQuery) **string { return &q.ParentNode })},
	"instance_name": {0, strFilter(func(q *storage.NodeQuery) **string { return &q.InstanceName })},
	"include_children": {83, func(q *storage.NodeQuery, v string) error {
		b, err := parseBoolString(v)
		q.IncludeChildren = b
		return err
	}},
}

// nodeFilterRefusal is the 406 message of a filter whose Ironic check
// words its own (check_allow_filter_by_instance_name).
var nodeFilterRefusal = map[string]string{
	"instance_name": "instance_name is not acceptable in this API version",
}

// listNodes is GET /v1/nodes and /v1/nodes/detail.
func (a *API) listNodes(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ver := versionOf(r)
		qs := r.URL.Query()
		// A page made since nothing was written answers (pagecache.go);
		// ?conductor= is not kept: whether a conductor is alive changes
		// with time.
		var pageKey string
		var st uint64
		if a.views != nil && !qs.Has("conductor") && a.nodeRedactor(r) == nil {
			st = a.stamp()
			pageKey = listPageKey(r, a.view(r))
			if body := a.pages.get(pageKey, st); body != nil {
				writeRaw(w, http.StatusOK, body)
				return nil
			}
		}
		q := storage.NodeQuery{}
		if err := nodeTable.checkSortKey(r); err != nil {
			return err
		}
		for key := range qs {
			f, ok := nodeFilters[key]
			if !ok {
				continue
			}
			if !ver.AtLeast(f.minVersion(key)) {
				if msg, ok := nodeFilterRefusal[key]; ok {
					return fault.New(fault.NotAcceptable, "%s", msg)
				}
				return errNotAcceptable()
			}
			if err := f.apply(&q, qs.Get(key)); err != nil {
				return err
			}
		}
		if q.ParentNode != nil {
			q.IncludeChildren = true
			if p, err := a.cond.Store().GetNode(r.Context(), *q.ParentNode); err == nil {
				q.ParentNode = &p.UUID
			}
		} else if !ver.AtLeast(83) {
			q.IncludeChildren = true
		}
		if q.ChassisUUID != nil {
			// Ironic answers 404 for an unknown chassis, not an empty list.
			ch, err := a.cond.Store().GetChassis(r.Context(), *q.ChassisUUID)
			if err != nil {
				return err
			}
			q.ChassisUUID = &ch.UUID
		}
		if c := qs.Get("conductor"); c != "" {
			if !ver.AtLeast(49) {
				return errNotAcceptable()
			}
			groups, err := a.cond.GroupsServedBy(r.Context(), c)
			if err != nil {
				return err
			}
			if q.ConductorGroups != nil {
				groups = slices.DeleteFunc(groups, func(g string) bool { return !slices.Contains(q.ConductorGroups, g) })
			}
			q.ConductorGroups = groups
		}
		fields, page, err := nodeTable.listQuery(r, qs, listOpts{routeDetail: detail, onDetail: "Invalid parameter: detail is not allowed on /nodes/detail"})
		if err != nil {
			return err
		}
		q.Page = page
		if p := listProject(r); p != nil {
			q.Project = p
		}
		q.Columns = nodeColumns(fields)
		red := a.nodeRedactor(r)
		if red != nil {
			// Redacted views differ per caller and node: rendered whole
			// from the row, never from or into the view cache.
			q.Columns = nil
		}
		conductor := qs.Get("conductor")
		if conductor != "" && q.Columns != nil {
			q.Columns = append(q.Columns, "conductor_group", "driver")
		}
		v := a.view(r)
		if a.views != nil && red == nil {
			if done, err := a.listNodesCached(w, r, v, q, fields, conductor, pageKey, st); done || err != nil {
				return err
			}
		}
		list, err := a.cond.Store().ListNodes(r.Context(), q)
		if err != nil {
			return err
		}
		list = onConductor(a, list, conductor, func(n *storage.Node) *storage.Node { return n })
		if red != nil {
			for i, n := range list {
				list[i] = red(n)
			}
		}
		nodeTable.writePage(w, r, v, "nodes", "nodes", list, func(n *storage.Node) string { return n.UUID }, fields, page)
		return nil
	}
}

// listPageKey names what shapes a node list page besides the store: the
// request (path, so /detail, and query), what shapes each node's view
// (viewKey: microversion, the secrets policy shows the caller, base URL of
// the links) and the project a scoped caller's list is limited to.
func listPageKey(r *http.Request, v *viewCtx) string {
	p := ""
	if lp := listProject(r); lp != nil {
		p = "\x00" + *lp
	}
	return viewKey(v, nil) + "\x00" + r.URL.RequestURI() + p
}

// onConductor keeps the nodes of list that the ring gives to conductor
// (all of them when conductor is ""). The groups of ?conductor= narrowed
// the query; like Ironic, the filter applies to the page read, which may
// then be shorter than the limit.
func onConductor[T any](a *API, list []*T, conductor string, node func(*T) *storage.Node) []*T {
	if conductor == "" {
		return list
	}
	return slices.DeleteFunc(list, func(x *T) bool {
		h := a.cond.ConductorFor(node(x))
		return h == nil || *h != conductor
	})
}

// nodeColumns names the stored columns the given view fields need (nil for
// all fields), so a summary list reads 8 columns instead of 60.
func nodeColumns(fields []string) []string {
	if fields == nil {
		return nil
	}
	cols := []string{"uuid"}
	for _, f := range fields {
		switch f {
		case "links", "ports", "states", "portgroups", "volume":
		case "conductor":
			cols = append(cols, "conductor_group", "driver")
		default:
			cols = append(cols, f)
		}
	}
	return cols
}

// getNode is GET /v1/nodes/{ident}.
func (a *API) getNode(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	fields, err := nodeTable.parseFields(r.URL.Query().Get("fields"), ver)
	if err != nil {
		return err
	}
	v := a.view(r)
	if red := a.nodeRedactor(r); red != nil {
		n, err := lookupWithSuffix(r, r.PathValue("ident"), a.cond.Store().GetNode)
		if err != nil {
			return err
		}
		return nodeTable.writeOK(w, v, red(n), fields)
	}
	var key string
	var st uint64
	if a.views != nil {
		key = viewKey(v, fields)
		// Nothing written since the view was made or checked: it answers
		// without the store.
		st = a.stamp()
		if u, err := uuid.Parse(r.PathValue("ident")); err == nil {
			if body := a.views.fresh(key, u.String(), st); body != nil {
				writeRaw(w, http.StatusOK, body)
				return nil
			}
		}
	}
	if a.views != nil && a.views.mayHave(key, r.PathValue("ident")) {
		// The node's row version first: a view made from it answers.
		stamp, err := lookupWithSuffix(r, r.PathValue("ident"), a.cond.Store().GetNodeVersion)
		if err != nil {
			return err
		}
		if body := a.views.get(key, stamp.UUID, stamp.RowVersion, a.shownConductor(v, fields, stamp), st); body != nil {
			writeRaw(w, http.StatusOK, body)
			return nil
		}
	}
	n, err := lookupWithSuffix(r, r.PathValue("ident"), a.cond.Store().GetNode)
	if err != nil {
		return err
	}
	if a.views == nil {
		return nodeTable.writeOK(w, v, n, fields)
	}
	writeRaw(w, http.StatusOK, a.renderNodeView(v, key, fields, n, st))
	return nil
}

// createNode is POST /v1/nodes.
func (a *API) createNode(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := decodeObject(r, "node")
	if err != nil {
		return err
	}
	if body["conductor_group"] == "" {
		// Ironic's reject_fields_in_newer_versions takes "" as the unset
		// conductor group at any version.
		delete(body, "conductor_group")
	}
	if err := nodeTable.checkBody(body, ver); err != nil {
		return err
	}
	n := &storage.Node{}
	if u, ok := body["uuid"]; ok && u != nil {
		s, isStr := u.(string)
		if _, err := uuid.Parse(s); !isStr || err != nil {
			return errInvalid("Schema error for node: %s is not a 'uuid'", pyrepr.Repr(u))
		}
		n.UUID = strings.ToLower(s)
	}
	return nodeTable.create(w, r, a.view(r), "nodes", n, body, func() error {
		if o := forcedOwner(r); o != nil {
			n.Owner = o // a project admin's node is its project's
		}
		if !ver.AtLeast(10) && n.Name != nil && !regexpHostname().MatchString(*n.Name) {
			// Before 1.10 names had to be host names.
			return errInvalid("Cannot create node with invalid name '%s'", *n.Name)
		}
		if n.ParentNode != nil && *n.ParentNode != "" { // Ironic skips a falsy parent_node
			p, err := a.resolveParent(r, n.Owner, *n.ParentNode)
			if err != nil {
				return err
			}
			n.ParentNode = &p.UUID
		}
		return nil
	}, func(ctx context.Context, n *storage.Node) error { return a.cond.CreateNode(ctx, n, ver.AtLeast(11)) })
}

// patchNode is PATCH /v1/nodes/{ident} with an RFC 6902 JSON patch, checked
// and applied as Ironic does: the patch schema, the node table's patchable
// fields and versions, then the patched node (so that operations are
// judged together, not one by one).
func (a *API) patchNode(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	resetIfaces := false
	if s := r.URL.Query().Get("reset_interfaces"); s != "" {
		if !ver.AtLeast(45) {
			return errNotAcceptable()
		}
		var err error
		if resetIfaces, err = parseBoolString(s); err != nil {
			return errInvalid("Invalid value for reset_interfaces: %s", s)
		}
	}
	ops, err := nodeTable.patchOps(r)
	if err != nil {
		return err
	}
	if resetIfaces && len(patchValues(ops, "/driver")) == 0 {
		return errInvalid("The reset_interfaces parameter can be set only when the node driver is updated.")
	}
	identWithSuffix(r, "ident", a.cond.Store().GetNode)
	ident := r.PathValue("ident")
	parent, err := a.patchParent(r, ident, ops)
	if err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdateNode(actorContext(r), ident, func(n *storage.Node) error {
		before := nodeTable.doc(v, n)
		after, err := applyPatch(before, ops)
		if err != nil {
			return err
		}
		if parent != "" {
			after["parent_node"] = parent
		}
		if _, ok := after["driver"]; !ok {
			return errInvalid("'driver' is a required property and cannot be removed")
		}
		if err := nodeTable.setChanged(n, before, after); err != nil {
			return err
		}
		syncInstanceName(n, before, after)
		if !ver.AtLeast(10) && n.Name != nil && before["name"] != *n.Name && !regexpHostname().MatchString(*n.Name) {
			return errInvalid("Node %s: Cannot change name to invalid name '%s'", ident, *n.Name)
		}
		return checkChassisRemoval(ver, before["chassis_uuid"], n)
	}, resetIfaces)
	if err != nil {
		return err
	}
	if red := a.nodeRedactor(r); red != nil {
		updated = red(updated)
	}
	return nodeTable.writeOK(w, a.view(r), updated, nil)
}

// patchParent is the parent's UUID a patch's parent_node names (checked
// before the patch applies, as Ironic does: the first value set, against
// the node's owner before the patch), or "" when the patch sets none or
// names the node itself (Ironic then keeps the value as given).
func (a *API) patchParent(r *http.Request, ident string, ops []patchOp) (string, error) {
	vals := patchValues(ops, "/parent_node")
	if len(vals) == 0 {
		return "", nil
	}
	n, err := a.cond.Store().GetNode(r.Context(), ident)
	if err != nil {
		return "", err
	}
	p, err := a.resolveParent(r, n.Owner, vals[0])
	if err != nil || p.UUID == n.UUID {
		return "", err
	}
	return p.UUID, nil
}

// syncInstanceName is Ironic's forward compatibility of 1.104, at every
// version: a patch that changes instance_info while the node has no
// instance_name takes instance_info.display_name as the name.
func syncInstanceName(n *storage.Node, before, after map[string]any) {
	if n.InstanceName != nil && *n.InstanceName != "" || jsonEqual(before["instance_info"], after["instance_info"]) {
		return
	}
	if name, ok := n.InstanceInfo["display_name"].(string); ok && name != "" {
		n.InstanceName = &name
	}
}

// deleteNode is DELETE /v1/nodes/{ident}.
func (a *API) deleteNode(w http.ResponseWriter, r *http.Request) error {
	identWithSuffix(r, "ident", a.cond.Store().GetNode)
	return deleteItem(w, r, "ident", nil, func(ctx context.Context, ident string) error {
		if a.views == nil {
			return a.cond.DeleteNode(ctx, ident)
		}
		// The cache is keyed by uuid; a name is resolved first.
		nv, lookErr := a.cond.Store().GetNodeVersion(ctx, ident)
		if err := a.cond.DeleteNode(ctx, ident); err != nil {
			return err
		}
		if lookErr == nil {
			a.views.forget(nv.UUID)
		}
		return nil
	})
}

// regexpHostname is Ironic's old is_hostname_safe check for names before 1.10.
var regexpHostname = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?(\.[a-z0-9\-_]{0,62}[a-z0-9])*\.?$`)
})
