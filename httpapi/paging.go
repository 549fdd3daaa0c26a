package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"castiron/fault/pyrepr"
	"castiron/storage"
)

// MaxLimit is Ironic's api.max_limit: the most items one page returns.
const MaxLimit = 1000

// parsePage reads limit, marker, sort_key and sort_dir. sortable lists the
// keys the resource may be sorted by.
func parsePage(q url.Values, sortable []string) (storage.Page, error) {
	p := storage.Page{Limit: MaxLimit, SortDir: storage.Asc}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return p, errInvalid("Invalid value for limit: %s is not an integer", s)
		}
		if n <= 0 {
			return p, errInvalid("Limit must be positive")
		}
		p.Limit = min(n, MaxLimit)
	}
	p.Marker = q.Get("marker")
	switch d := strings.ToLower(q.Get("sort_dir")); d {
	case "", "asc":
	case "desc":
		p.SortDir = storage.Desc
	default:
		return p, errInvalid("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", q.Get("sort_dir"))
	}
	if k := q.Get("sort_key"); k != "" && k != "id" {
		if !slices.Contains(sortable, k) {
			return p, errInvalid("The sort_key value \"%s\" is an invalid field for sorting", k)
		}
		p.SortKey = k
	}
	return p, nil
}

// listOpts are how one resource's list reads its query.
type listOpts struct {
	// routeDetail: the route is the /detail one.
	routeDetail bool
	// onDetail, when set, refuses ?detail= on the /detail route with it.
	onDetail string
	// fieldsFirst reads ?fields= before ?detail=, as the conductors'
	// list does, so a bad fields wins over a bad detail.
	fieldsFirst bool
}

// listQuery reads a resource list's ?detail= (from 1.43), ?fields= and
// page from qs (the request's query, parsed once by the caller), in
// Ironic's order.
func (res *resource[T]) listQuery(r *http.Request, qs url.Values, o listOpts) ([]string, storage.Page, error) {
	ver := versionOf(r)
	var fields []string
	var err error
	readFields := func() ([]string, error) { return res.parseFields(qs.Get("fields"), ver) }
	if o.fieldsFirst {
		if fields, err = readFields(); err != nil {
			return nil, storage.Page{}, err
		}
	}
	detail := o.routeDetail
	if d := qs.Get("detail"); d != "" {
		b, err := parseBoolString(d)
		if err != nil {
			return nil, storage.Page{}, errInvalid("Invalid value for detail: %s", d)
		}
		if !ver.AtLeast(43) {
			return nil, storage.Page{}, errInvalid("Invalid query parameter ?detail=%s received.", pyrepr.Repr(b))
		}
		if o.routeDetail && o.onDetail != "" {
			return nil, storage.Page{}, errInvalid("%s", o.onDetail)
		}
		detail = detail || b
	}
	if !o.fieldsFirst {
		if fields, err = readFields(); err != nil {
			return nil, storage.Page{}, err
		}
	}
	if fields, err = res.listFields(fields, detail); err != nil {
		return nil, storage.Page{}, err
	}
	page, err := parsePage(qs, res.names(fSort))
	return fields, page, err
}

// collQuery is listQuery for the collections whose ?detail= is an
// args.boolean and whose marker must be a uuid (chassis, portgroups): on
// the /detail route fields are not read; sorting by a field of unsortable
// (Ironic's invalid_sort_key_list) is a 400.
func (res *resource[T]) collQuery(r *http.Request, routeDetail bool, unsortable []string) ([]string, storage.Page, error) {
	qs := r.URL.Query()
	var fields []string
	if !routeDetail {
		d, given, err := collDetailParam(r)
		if err != nil {
			return nil, storage.Page{}, err
		}
		if fields, err = res.parseFields(qs.Get("fields"), versionOf(r)); err != nil {
			return nil, storage.Page{}, err
		}
		if fields, err = res.listFields(fields, given && d); err != nil {
			return nil, storage.Page{}, err
		}
	}
	if err := res.checkSortKey(r); err != nil {
		return nil, storage.Page{}, err
	}
	if k := qs.Get("sort_key"); slices.Contains(unsortable, k) {
		return nil, storage.Page{}, errInvalid("The sort_key value %s is an invalid field for sorting", k)
	}
	if err := collMarkerParam(r); err != nil {
		return nil, storage.Page{}, err
	}
	page, err := parsePage(qs, res.names(fSort))
	return fields, page, err
}

// nextLink is Ironic's "next" URL: the same query with the marker moved to
// the last item, present only when the page is full.
func nextLink(r *http.Request, resource string, p storage.Page, count int, lastUUID string) string {
	if count == 0 || count < p.Limit {
		return ""
	}
	return pageAfter(r, "/v1/"+resource, p, "id", lastUUID)
}

// pageAfter is the URL of the page after last on path: the request's query
// with sort_key (defaultKey when p has none), sort_dir, limit and marker
// set to p's.
func pageAfter(r *http.Request, path string, p storage.Page, defaultKey, last string) string {
	q := url.Values{}
	for k, vs := range r.URL.Query() {
		if k != "limit" && k != "marker" {
			q[k] = vs
		}
	}
	sortKey := p.SortKey
	if sortKey == "" {
		sortKey = defaultKey
	}
	q.Set("sort_key", sortKey)
	q.Set("sort_dir", string(p.SortDir))
	return baseURL(r) + path + "?" + q.Encode() + "&limit=" + strconv.Itoa(p.Limit) + "&marker=" + url.QueryEscape(last)
}
