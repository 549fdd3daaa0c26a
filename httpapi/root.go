package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

func versionDoc(r *http.Request, maxMinor int) map[string]any {
	return map[string]any{
		"id":          "v1",
		"links":       []link{{Href: baseURL(r) + "/v1/", Rel: "self"}},
		"status":      "CURRENT",
		"min_version": fmt.Sprintf("1.%d", MinMinor),
		"version":     fmt.Sprintf("1.%d", maxMinor),
	}
}

// getRoot is GET /: the API's versions (unauthenticated, unversioned), or
// opts.HTML for a browser that asks for text/html.
func (a *API) getRoot(w http.ResponseWriter, r *http.Request) {
	if a.opts.HTML != nil {
		w.Header().Add("Vary", "Accept")
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			a.opts.HTML.ServeHTTP(w, r)
			return
		}
	}
	_ = writeJSON(w, http.StatusOK, map[string]any{
		"name":            "OpenStack Ironic API",
		"description":     "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
		"default_version": versionDoc(r, a.opts.MaxMinor),
		"versions":        []any{versionDoc(r, a.opts.MaxMinor)},
	})
}

// v1Resources are the collections GET /v1 links to, with the version that
// introduced each (hidden below it).
var v1Resources = []struct {
	name     string
	minMinor int
}{
	{"chassis", 1}, {"nodes", 1}, {"ports", 1}, {"drivers", 1},
	{"portgroups", 23}, {"volume", 32}, {"lookup", 22}, {"heartbeat", 22},
	{"conductors", 49}, {"allocations", 52}, {"events", 54},
	{"deploy_templates", 55}, {"shards", 82}, {"continue_inspection", 84},
	{"runbooks", runbookMinMinor}, {"inspection_rules", ruleMinMinor},
}

// getV1 is GET /v1: the version document with links to each collection.
func (a *API) getV1(w http.ResponseWriter, r *http.Request) error {
	base := baseURL(r)
	v := versionOf(r)
	doc := map[string]any{
		"id": "v1",
		"links": []link{
			{Href: base + "/v1/", Rel: "self"},
			{Href: "https://docs.openstack.org//ironic/latest/contributor//webapi.html", Rel: "describedby", Type: "text/html"},
		},
		"media_types": map[string]string{"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"},
		"version":     versionDoc(r, a.opts.MaxMinor),
	}
	for _, res := range v1Resources {
		if v.AtLeast(res.minMinor) {
			doc[res.name] = []link{{Href: base + "/v1/" + res.name + "/", Rel: "self"}, {Href: base + "/" + res.name + "/", Rel: "bookmark"}}
		}
	}
	return writeJSON(w, http.StatusOK, doc)
}
