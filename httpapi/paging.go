package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

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

// nextLink is Ironic's "next" URL: the same query with the marker moved to
// the last item, present only when the page is full.
func nextLink(r *http.Request, resource string, p storage.Page, count int, lastUUID string) string {
	if count == 0 || count < p.Limit {
		return ""
	}
	q := url.Values{}
	for k, vs := range r.URL.Query() {
		if k != "limit" && k != "marker" {
			q[k] = vs
		}
	}
	sortKey := p.SortKey
	if sortKey == "" {
		sortKey = "id"
	}
	q.Set("sort_key", sortKey)
	q.Set("sort_dir", string(p.SortDir))
	return baseURL(r) + "/v1/" + resource + "?" + q.Encode() + "&limit=" + strconv.Itoa(p.Limit) + "&marker=" + url.QueryEscape(lastUUID)
}
