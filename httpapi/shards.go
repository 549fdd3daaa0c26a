package httpapi

import (
	"bytes"
	"net/http"
	"strconv"

	"castiron/fault"
)

// Shards (API 1.82): GET /v1/shards counts the nodes of each shard.

// listShards is GET /v1/shards. Nodes without a shard are counted under
// the name "None", as Ironic (str(None)) does.
func (a *API) listShards(w http.ResponseWriter, r *http.Request) error {
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
	return fault.New(fault.NotFound, "The resource could not be found.")
}

// postShards answers POST /v1/shards as Ironic: 405, with the version
// message below 1.82.
func (a *API) postShards(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Allow", "GET")
	writeRaw(w, http.StatusMethodNotAllowed, codeBody(http.StatusMethodNotAllowed, ""))
	return nil
}
