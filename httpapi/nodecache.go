package httpapi

import (
	"bytes"
	"net/http"
	"slices"

	"castiron/storage"
)

// The node reads that answer from the view cache (viewcache.go).

// conductorShown reports whether a node view with fields at v shows the
// node's conductor.
func conductorShown(v *viewCtx, fields []string) bool {
	if fields == nil {
		return nodeTable.shown(nodeTable.field("conductor"), v.ver)
	}
	return slices.Contains(fields, "conductor")
}

// shownConductor is the conductor the view of the node v versions shows
// ("" for none, or when the view has no conductor field): part of what a
// cached view is checked against, as it changes with the ring and not
// with the row.
func (a *API) shownConductor(v *viewCtx, fields []string, nv *storage.NodeVersion) string {
	if !conductorShown(v, fields) {
		return ""
	}
	return hostOrNone(a.cond.ConductorFor(nv.Node()))
}

// hostOrNone is a conductor's hostname, "" for none.
func hostOrNone(h *string) string {
	if h == nil {
		return ""
	}
	return *h
}

// renderNodeView renders n's view, keeps it under key and returns it. The
// conductor is asked once and the view shows that answer, so the view
// and the conductor it is kept with agree.
func (a *API) renderNodeView(v *viewCtx, key string, fields []string, n *storage.Node, st uint64) []byte {
	pv := *v
	pv.pinned = true
	if conductorShown(v, fields) {
		pv.conductor = a.cond.ConductorFor(n)
	}
	shown := hostOrNone(pv.conductor)
	var buf bytes.Buffer
	nodeTable.render(&buf, &pv, n, fields)
	// An exact-size copy: the buffer's doubling leaves up to half of its
	// array unused, which the cache would keep.
	body := bytes.Clone(buf.Bytes())
	a.views.put(key, n.UUID, n.RowVersion, shown, st, body)
	return body
}

// listNodesCached answers a node list from cached views: it reads the
// page's uuids and row versions (the same query, four columns), takes the
// views it has for those versions, and reads and renders the others in one
// query by uuid. When one of those was written between the two queries it
// answers nothing (false): the caller's one-query path does. The page is
// also kept under pageKey ("" for not) at stamp st, read before the store.
func (a *API) listNodesCached(w http.ResponseWriter, r *http.Request, v *viewCtx, q storage.NodeQuery, fields []string, conductor string,
	pageKey string, st uint64) (bool, error) {
	store := a.cond.Store()
	key := viewKey(v, fields)
	sq := q
	sq.Columns = []string{"row_version"}
	if conductorShown(v, fields) || conductor != "" {
		sq.Columns = nil // and what places the nodes on the ring
	}
	stamps, err := store.ListNodeVersions(r.Context(), sq)
	if err != nil {
		return true, err
	}
	stamps = onConductor(a, stamps, conductor, (*storage.NodeVersion).Node)
	bodies := make([][]byte, len(stamps))
	misses := a.views.getAll(key, stamps, func(nv *storage.NodeVersion) string { return a.shownConductor(v, fields, nv) }, bodies)
	if len(misses) > 0 {
		uuids := make([]string, len(misses))
		for j, i := range misses {
			uuids[j] = stamps[i].UUID
		}
		fq := storage.NodeQuery{UUIDs: uuids, IncludeChildren: true}
		if q.Columns != nil {
			fq.Columns = append(slices.Clip(q.Columns), "row_version")
		}
		got, err := store.ListNodes(r.Context(), fq)
		if err != nil {
			return true, err
		}
		byUUID := make(map[string]*storage.Node, len(got))
		for _, n := range got {
			byUUID[n.UUID] = n
		}
		for _, i := range misses {
			n := byUUID[stamps[i].UUID]
			if n == nil || n.RowVersion != stamps[i].RowVersion {
				return false, nil
			}
			bodies[i] = a.renderNodeView(v, key, fields, n, st)
		}
	}
	next := ""
	if len(stamps) > 0 {
		next = nextLink(r, "nodes", q.Page, len(stamps), stamps[len(stamps)-1].UUID)
	}
	page := joinBodies("nodes", bodies, next)
	if pageKey != "" {
		a.pages.put(pageKey, st, page)
	}
	writeRaw(w, http.StatusOK, page)
	return true, nil
}
