package httpapi

import (
	"bytes"
	"net/http"
	"strconv"

	"castiron/fault"
)

// Shards (API 1.82): GET /v1/shards counts the nodes of each shard.

// shardsVersionGate answers Ironic's responses below 1.82: 404 for GET,
// 405 otherwise. It reports whether it answered.
func shardsVersionGate(w http.ResponseWriter, r *http.Request) bool {
	if versionOf(r).AtLeast(82) {
		return false
	}
	status := http.StatusMethodNotAllowed
	if r.Method == http.MethodGet {
		status = http.StatusNotFound
	}
	writeRaw(w, status, codeBody(status, "The API version does not allow shards"))
	return true
}

// listShards is GET /v1/shards. Nodes without a shard are counted under
// the name "None", as Ironic (str(None)) does.
func (a *API) listShards(w http.ResponseWriter, r *http.Request) error {
	if shardsVersionGate(w, r) {
		return nil
	}
	shards, err := a.cond.Store().ListShards(r.Context())
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString(`{"shards": [`)
	for i, sh := range shards {
		if i > 0 {
			buf.WriteString(", ")
		}
		name := "None"
		if sh.Name != nil {
			name = *sh.Name
		}
		buf.WriteString(`{"name": `)
		appendJSONString(&buf, name)
		buf.WriteString(`, "count": ` + strconv.Itoa(sh.Count) + `}`)
	}
	buf.WriteString("]}")
	writeRaw(w, http.StatusOK, buf.Bytes())
	return nil
}

// getShard is GET /v1/shards/{name}, which Ironic explicitly refuses.
func (a *API) getShard(w http.ResponseWriter, r *http.Request) error {
	if shardsVersionGate(w, r) {
		return nil
	}
	return fault.New(fault.NotFound, "The resource could not be found.")
}

// postShards answers POST /v1/shards as Ironic: 405, with the version
// message below 1.82.
func (a *API) postShards(w http.ResponseWriter, r *http.Request) error {
	if shardsVersionGate(w, r) {
		return nil
	}
	w.Header().Set("Allow", "GET")
	writeRaw(w, http.StatusMethodNotAllowed, codeBody(http.StatusMethodNotAllowed, ""))
	return nil
}
