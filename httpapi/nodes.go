package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"

	"castiron/fault"
	"castiron/storage"
)

// nodeSortable are the keys GET /v1/nodes may sort by (Ironic refuses JSON
// columns and computed fields).
var nodeSortable = []string{
	"uuid", "name", "created_at", "updated_at", "provision_state", "provision_updated_at",
	"power_state", "driver", "maintenance", "instance_uuid", "resource_class",
	"conductor_group", "owner", "lessee", "fault", "description", "shard",
	"inspection_started_at", "inspection_finished_at", "retired", "protected",
}

// nodeFilter is one query filter of GET /v1/nodes with its version gate.
type nodeFilter struct {
	minMinor int
	apply    func(q *storage.NodeQuery, val string) error
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
	"maintenance":     {1, boolFilter("maintenance", func(q *storage.NodeQuery) **bool { return &q.Maintenance })},
	"instance_uuid":   {1, strFilter(func(q *storage.NodeQuery) **string { return &q.InstanceUUID })},
	"chassis_uuid":    {1, strFilter(func(q *storage.NodeQuery) **string { return &q.ChassisUUID })},
	"provision_state": {9, provisionStateFilter},
	"driver":          {16, strFilter(func(q *storage.NodeQuery) **string { return &q.Driver })},
	"resource_class":  {21, strFilter(func(q *storage.NodeQuery) **string { return &q.ResourceClass })},
	"fault":           {42, faultFilter},
	"conductor_group": {46, func(q *storage.NodeQuery, v string) error {
		q.ConductorGroups = []string{strings.ToLower(v)}
		return nil
	}},
	"owner":                {50, strFilter(func(q *storage.NodeQuery) **string { return &q.Owner })},
	"description_contains": {1, strFilter(func(q *storage.NodeQuery) **string { return &q.DescriptionContains })},
	"retired":              {61, boolFilter("retired", func(q *storage.NodeQuery) **bool { return &q.Retired })},
	"lessee":               {65, strFilter(func(q *storage.NodeQuery) **string { return &q.Lessee })},
	"shard": {82, func(q *storage.NodeQuery, v string) error {
		// As Ironic: trimmed, lower-cased, de-duplicated.
		for _, s := range strings.Split(v, ",") {
			if s = strings.ToLower(strings.TrimSpace(s)); s != "" && !slices.Contains(q.Shards, s) {
				q.Shards = append(q.Shards, s)
			}
		}
		return nil
	}},
	"sharded":     {82, boolFilter("sharded", func(q *storage.NodeQuery) **bool { return &q.Sharded })},
	"parent_node": {83, strFilter(func(q *storage.NodeQuery) **string { return &q.ParentNode })},
	"include_children": {83, func(q *storage.NodeQuery, v string) error {
		b, err := parseBoolString(v)
		q.IncludeChildren = b
		return err
	}},
}

// listNodes is GET /v1/nodes and /v1/nodes/detail.
func (a *API) listNodes(detail bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		detail := detail // per request: ?detail=true must not stick to the route
		ver := versionOf(r)
		qs := r.URL.Query()
		q := storage.NodeQuery{}
		if err := sortKeyGate(r, nodeFields, nodeFieldIndex); err != nil {
			return err
		}
		for key := range qs {
			f, ok := nodeFilters[key]
			if !ok {
				continue
			}
			if !ver.AtLeast(f.minMinor) {
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
		if d := qs.Get("detail"); d != "" {
			b, err := parseBoolString(d)
			if err != nil {
				return errInvalid("Invalid value for detail: %s", d)
			}
			if !ver.AtLeast(43) {
				return errInvalid("Invalid query parameter ?detail=%s received.", pyRepr(b))
			}
			if detail && qs.Has("detail") {
				return errInvalid("Invalid parameter: detail is not allowed on /nodes/detail")
			}
			detail = detail || b
		}
		fields, err := parseFields(qs.Get("fields"), ver, nodeFields, nodeFieldIndex)
		if err != nil {
			return err
		}
		if fields != nil && detail {
			return errInvalid("Can not specify ?detail=True and fields in the same request.")
		}
		if fields == nil && !detail {
			fields = summaryFields
		}
		page, err := parsePage(qs, nodeSortable)
		if err != nil {
			return err
		}
		q.Page = page
		q.Columns = nodeColumns(fields)
		nodes, err := a.cond.Store().ListNodes(r.Context(), q)
		if err != nil {
			return err
		}
		renderList(w, r, a.view(r), "nodes", nodes, func(n *storage.Node) string { return n.UUID },
			nodeFields, nodeFieldIndex, fields, page)
		return nil
	}
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
	fields, err := parseFields(r.URL.Query().Get("fields"), ver, nodeFields, nodeFieldIndex)
	if err != nil {
		return err
	}
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	return a.writeNode(w, r, http.StatusOK, n, fields)
}

func (a *API) writeNode(w http.ResponseWriter, r *http.Request, status int, n *storage.Node, fields []string) error {
	var buf bytes.Buffer
	a.view(r).renderNode(&buf, n, fields)
	writeRaw(w, status, buf.Bytes())
	return nil
}

// createNode is POST /v1/nodes.
func (a *API) createNode(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	body, err := decodeObject(r, "node")
	if err != nil {
		return err
	}
	var unexpected []string
	for k := range body {
		s, ok := nodeSettable[k]
		if !ok || !s.onCreate {
			if _, known := nodeFieldIndex[k]; !known {
				unexpected = append(unexpected, k)
				continue
			}
			return errInvalid("Schema error for node: Additional properties are not allowed ('%s' was unexpected)", k)
		}
		if !ver.AtLeast(s.minMinor) && body[k] != nil && !(k == "conductor_group" && body[k] == "") {
			// Ironic's reject_fields_in_newer_versions lets an empty value through.
			return errNotAcceptable()
		}
	}
	if len(unexpected) > 0 {
		slices.Sort(unexpected)
		return errInvalid("Schema error for node: Additional properties are not allowed ('%s' was unexpected)", strings.Join(unexpected, "', '"))
	}
	if _, ok := body["driver"]; !ok {
		return errInvalid("Schema error for node: 'driver' is a required property")
	}
	n := &storage.Node{}
	if u, ok := body["uuid"]; ok && u != nil {
		s, isStr := u.(string)
		if _, err := uuid.Parse(s); !isStr || err != nil {
			return errInvalid("Schema error for node: %s is not a 'uuid'", pyRepr(u))
		}
		n.UUID = strings.ToLower(s)
	}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if s := nodeSettable[k]; s.set != nil {
			if err := s.set(n, body[k]); err != nil {
				return err
			}
		}
	}
	if !ver.AtLeast(10) && n.Name != nil {
		// Before 1.10 names had to be host names.
		if !regexpHostname.MatchString(*n.Name) {
			return errInvalid("Cannot create node with invalid name '%s'", *n.Name)
		}
	}
	if err := a.cond.CreateNode(actorContext(r), n, ver.AtLeast(11)); err != nil {
		return err
	}
	w.Header().Set("Location", baseURL(r)+"/v1/nodes/"+n.UUID)
	return a.writeNode(w, r, http.StatusCreated, n, nil)
}

// patchNode is PATCH /v1/nodes/{ident} with an RFC 6902 JSON patch.
func (a *API) patchNode(w http.ResponseWriter, r *http.Request) error {
	ver := versionOf(r)
	raw, err := decodeAny(r)
	if err != nil {
		return err
	}
	ops, err := checkPatch(raw, ver)
	if err != nil {
		return err
	}
	resetIfaces := false
	if s := r.URL.Query().Get("reset_interfaces"); s != "" {
		if !ver.AtLeast(45) {
			return errNotAcceptable()
		}
		if resetIfaces, err = parseBoolString(s); err != nil {
			return errInvalid("Invalid value for reset_interfaces: %s", s)
		}
	}
	ident := r.PathValue("ident")
	patchJSON, _ := json.Marshal(ops)
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return errInvalid("Invalid JSON patch: %v", err)
	}
	touchedDriver := false
	for _, op := range ops {
		touchedDriver = touchedDriver || rootOf(op["path"].(string)) == "driver"
	}
	if resetIfaces && !touchedDriver {
		return errInvalid("The reset_interfaces parameter can be set only when the node driver is updated.")
	}
	updated, err := a.cond.UpdateNode(actorContext(r), ident, func(n *storage.Node) error {
		doc := a.nodeAsMap(r, n)
		docJSON, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		out, err := patch.ApplyWithOptions(docJSON, &jsonpatch.ApplyOptions{EnsurePathExistsOnAdd: false, AllowMissingPathOnRemove: false})
		if err != nil {
			return errInvalid("Adding a new attribute or patching a path that does not exist is not allowed: %v", err)
		}
		var result map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&result); err != nil {
			return err
		}
		result = normalizeNumbers(result).(map[string]any)
		for _, name := range patchableAt(ver) {
			newVal, present := result[name]
			oldJSON, _ := json.Marshal(doc[name])
			newJSON, _ := json.Marshal(newVal)
			if present && bytes.Equal(oldJSON, newJSON) {
				continue
			}
			if name == "driver" && !present {
				return errInvalid("'driver' is a required property and cannot be removed")
			}
			if strings.HasSuffix(name, "_interface") && !present {
				newVal = nil // removing an interface resets it to the default
			}
			if err := nodeSettable[name].set(n, newVal); err != nil {
				return err
			}
		}
		if !ver.AtLeast(10) && n.Name != nil && doc["name"] != *n.Name && !regexpHostname.MatchString(*n.Name) {
			return errInvalid("Node %s: Cannot change name to invalid name '%s'", ident, *n.Name)
		}
		return checkChassisRemoval(ver, doc["chassis_uuid"], n)
	}, resetIfaces)
	if err != nil {
		return err
	}
	return a.writeNode(w, r, http.StatusOK, updated, nil)
}

func rootOf(path string) string {
	p := strings.TrimPrefix(path, "/")
	root, _, _ := strings.Cut(p, "/")
	return root
}

// checkPatch validates a JSON patch document as Ironic does before applying
// it: a list of operations on patchable root fields.
func checkPatch(raw any, ver Version) ([]map[string]any, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, errInvalid("Invalid input for field/attribute patch. Value: '%s'. Value should be a list of JSON patch operations", pyRepr(raw))
	}
	if len(list) == 0 {
		return nil, errInvalid("Invalid input for field/attribute patch. The patch is empty.")
	}
	patchable := patchableAt(ver)
	ops := make([]map[string]any, 0, len(list))
	for _, item := range list {
		op, ok := item.(map[string]any)
		if !ok {
			return nil, errInvalid("Invalid patch operation %s: not an object", pyRepr(item))
		}
		verb, _ := op["op"].(string)
		path, _ := op["path"].(string)
		switch verb {
		case "add", "replace", "test":
			if _, has := op["value"]; !has {
				return nil, errInvalid("Invalid patch operation %s: 'value' is required for '%s'", pyRepr(item), verb)
			}
		case "remove":
		case "move", "copy":
			if _, ok := op["from"].(string); !ok {
				return nil, errInvalid("Invalid patch operation %s: 'from' is required for '%s'", pyRepr(item), verb)
			}
		default:
			return nil, errInvalid("Invalid patch operation: '%s' is not one of ['add', 'replace', 'remove', 'move', 'copy', 'test']", verb)
		}
		if !strings.HasPrefix(path, "/") || path == "/" {
			return nil, errInvalid("Invalid patch path '%s': it must start with '/' and name a field", path)
		}
		root := rootOf(path)
		if !slices.Contains(patchable, root) {
			if s, ok := nodeSettable[root]; ok && s.onPatch && !ver.AtLeast(s.minMinor) {
				return nil, errNotAcceptable()
			}
			return nil, errInvalid("Cannot patch /%s. Only the following can be updated: %s", root, strings.Join(patchable, ", "))
		}
		if verb == "move" || verb == "copy" {
			if from := rootOf(op["from"].(string)); !slices.Contains(patchable, from) {
				return nil, errInvalid("Cannot patch /%s. Only the following can be updated: %s", from, strings.Join(patchable, ", "))
			}
		}
		if verb == "add" && !strings.Contains(strings.TrimPrefix(path, "/"), "/") {
			// Adding a root field that exists is a replace in Ironic.
			op = map[string]any{"op": "replace", "path": path, "value": op["value"]}
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// deleteNode is DELETE /v1/nodes/{ident}.
func (a *API) deleteNode(w http.ResponseWriter, r *http.Request) error {
	if err := a.cond.DeleteNode(actorContext(r), r.PathValue("ident")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// regexpHostname is Ironic's old is_hostname_safe check for names before 1.10.
var regexpHostname = regexp.MustCompile(`^[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?(\.[a-z0-9\-_]{0,62}[a-z0-9])*\.?$`)

var _ = strconv.Itoa
var _ = fault.Invalid
