package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"castiron/engine/inspectrules"
	"castiron/engine/jsonschema"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// Inspection rules (API 1.96), as Ironic's v1/inspection_rule.py serves
// them at /v1/inspection_rules[/{uuid}].

// ruleMinMinor is MINOR_96_INSPECTION_RULES.
const ruleMinMinor = 96

// rulesAPI answers below 1.96 as the controller's api_version decorators
// do: 404 to GET, 405 to the rest.
var rulesAPI = apiSince{ruleMinMinor, "The API version does not allow inspection rules", false}

// Ironic's create_request_body schema, by field; ruleTable.body is the
// whole (also the patched rule's).
var (
	opArgs      = jsonschema.Types("array", "object")
	ruleActions = &jsonschema.Schema{Types: []string{"array"}, MinItems: 1,
		Items: jsonschema.Object(false, []string{"op", "args"},
			jsonschema.P("op", &jsonschema.Schema{Enum: inspectrules.ActionOps}),
			jsonschema.P("args", opArgs),
			jsonschema.P("loop", opArgs),
		)}
	ruleConditions = &jsonschema.Schema{Types: []string{"array"},
		Items: jsonschema.Object(false, []string{"op", "args"},
			jsonschema.P("op", &jsonschema.Schema{Enum: append(slices.Clone(inspectrules.ConditionOps), invertedOps()...)}),
			jsonschema.P("args", opArgs),
			jsonschema.P("multiple", &jsonschema.Schema{Enum: []string{"any", "all", "first", "last"}}),
			jsonschema.P("loop", opArgs),
		)}
	ruleFieldsQuery = &jsonschema.Schema{Types: []string{"array"}, Items: jsonschema.Types("string")}
)

func invertedOps() []string {
	out := make([]string, len(inspectrules.ConditionOps))
	for i, op := range inspectrules.ConditionOps {
		out[i] = "!" + op
	}
	return out
}

type ruleField = field[storage.InspectionRule]

// ruleOps is convert_actions/convert_conditions: op and args, loop when
// there is one (and multiple with it, for conditions). A sensitive rule
// shows neither conditions nor actions.
func ruleOps(r *storage.InspectionRule, ops []map[string]any, conditions bool) any {
	if r.Sensitive {
		return nil
	}
	out := make([]map[string]any, len(ops))
	for i, op := range ops {
		m := map[string]any{"op": op["op"], "args": op["args"]}
		if loop, has := op["loop"]; has && !emptyJSON(loop) {
			m["loop"] = loop
			if conditions {
				m["multiple"] = "any"
				if mult, has := op["multiple"]; has {
					m["multiple"] = mult
				}
			}
		}
		out[i] = m
	}
	return out
}

func emptyJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	case bool:
		return !x
	case string:
		return x == ""
	}
	return false
}

// ruleTable is the rule view in object_to_dict's key order. Its links
// name the resource "inspection", as Ironic's convert_with_links does.
var ruleTable = func() *resource[storage.InspectionRule] {
	str := func(max int) *jsonschema.Schema { s := jsonschema.Types("string", "null"); s.MaxLength = max; return s }
	res := newResource("inspection_rule", ruleDefaultFields,
		ruleField{"uuid", ruleMinMinor, fCreate | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, r *storage.InspectionRule) any { return r.UUID },
			func(r *storage.InspectionRule, v any) error {
				u, _ := v.(string)
				r.UUID = strings.ToLower(u)
				return nil
			}},
		ruleField{"created_at", ruleMinMinor, fSort, nil, nil, func(_ *viewCtx, r *storage.InspectionRule) any { return ironicTime(r.CreatedAt) }, nil},
		ruleField{"updated_at", ruleMinMinor, fSort, nil, nil, func(_ *viewCtx, r *storage.InspectionRule) any { return timeOrNil(r.UpdatedAt) }, nil},
		strField("description", ruleMinMinor, fCreate|fPatch|fSort, 255, func(r *storage.InspectionRule) **string { return &r.Description }),
		ruleField{"priority", ruleMinMinor, fCreate | fPatch | fSort, &jsonschema.Schema{Types: []string{"integer"}, Minimum: jsonschema.Int64(0)}, nil,
			func(_ *viewCtx, r *storage.InspectionRule) any { return r.Priority },
			func(r *storage.InspectionRule, v any) error { r.Priority, _ = v.(int64); return nil }},
		ruleField{"sensitive", ruleMinMinor, fCreate | fPatch | fSort, jsonschema.Types("boolean", "null"), nil,
			func(_ *viewCtx, r *storage.InspectionRule) any { return r.Sensitive },
			func(r *storage.InspectionRule, v any) error { r.Sensitive, _ = v.(bool); return nil }},
		ruleField{"phase", ruleMinMinor, fCreate | fPatch | fSort, str(16), nil,
			func(_ *viewCtx, r *storage.InspectionRule) any { return r.Phase },
			func(r *storage.InspectionRule, v any) error { r.Phase, _ = v.(string); return nil }},
		ruleField{"conditions", ruleMinMinor, fCreate | fPatch, ruleConditions, nil,
			func(_ *viewCtx, r *storage.InspectionRule) any { return ruleOps(r, r.Conditions, true) },
			func(r *storage.InspectionRule, v any) error { r.Conditions = opDocs(v); return nil }},
		ruleField{"actions", ruleMinMinor, fCreate | fPatch | fRequired, ruleActions, nil,
			func(_ *viewCtx, r *storage.InspectionRule) any { return ruleOps(r, r.Actions, false) },
			func(r *storage.InspectionRule, v any) error { r.Actions = opDocs(v); return nil }},
		ruleField{"links", ruleMinMinor, 0, nil, nil, func(v *viewCtx, r *storage.InspectionRule) any { return selfLinks(v, "inspection", r.UUID) }, nil},
	)
	res.schemaError = "Schema error"
	res.patchDoc = ruleDoc
	return res
}()

// ruleDefaultFields is DEFAULT_RETURN_FIELDS of the list.
var ruleDefaultFields = []string{"uuid", "priority", "phase", "description"}

// checkRuleUUID is the path parameter schema ({"format": "uuid"}).
func checkRuleUUID(id string) error {
	if !argUUIDLike(id) {
		return errInvalid("Schema error: %s is not a 'uuid'", pyrepr.Repr(id))
	}
	return nil
}

// ruleQuerySchema is index_request_query (show_request_query: fields only).
func ruleQuerySchema(list bool) *jsonschema.Schema {
	if !list {
		return jsonschema.Object(true, nil, jsonschema.P("fields", ruleFieldsQuery))
	}
	return jsonschema.Object(true, nil,
		jsonschema.P("detail", jsonschema.Types("boolean")),
		jsonschema.P("fields", ruleFieldsQuery),
		jsonschema.P("marker", jsonschema.Types("string")),
		jsonschema.P("limit", jsonschema.Types("integer")),
		jsonschema.P("phase", jsonschema.Types("string")),
		jsonschema.P("sort_dir", &jsonschema.Schema{Types: []string{"string"}, Enum: []string{"asc", "desc"}}),
		jsonschema.P("sort_key", &jsonschema.Schema{}),
	)
}

// unknownQuery puts the query parameters readQueryArgs did not read into
// the document the query schema checks (a closed schema refuses them).
func unknownQuery(q url.Values, qa *queryArgs) {
	for k := range q {
		if _, done := qa.doc[k]; !done {
			qa.doc[k] = q.Get(k)
		}
	}
}

// listInspectionRules is GET /v1/inspection_rules.
func (a *API) listInspectionRules(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	qa, err := readQueryArgs(q, "limit", "sort_key", "sort_dir", "fields", "detail", "phase")
	if err != nil {
		return err
	}
	unknownQuery(q, qa)
	if err := jsonschema.Check("Schema error", ruleQuerySchema(true), qa.doc); err != nil {
		return err
	}
	if sk := q.Get("sort_key"); sk == "actions" || sk == "conditions" {
		return errInvalid("Schema error: %s should not be valid under {'type': 'string', 'enum': ['actions', 'conditions']}", pyrepr.Repr(sk))
	}
	ctx := r.Context()
	l, err := ruleTable.schemaListQuery(ctx, q, qa, "inspection_rules", a.cond.Store().GetInspectionRule,
		[]string{"uuid", "description", "priority", "sensitive", "phase", "created_at", "updated_at"}, nil)
	if err != nil {
		return err
	}
	query := storage.InspectionRuleQuery{Page: l.page}
	var filters [][2]string
	if q.Has("phase") {
		phase := q.Get("phase")
		query.Phase = &phase
		filters = append(filters, [2]string{"phase", phase})
	}
	items, err := a.cond.Store().ListInspectionRules(ctx, query)
	if err != nil {
		return err
	}
	// The collection url is "inspection", as Ironic's get_next has it.
	return ruleTable.writeSchemaList(w, r, a.view(r), l, "inspection_rules", "inspection", items,
		func(rule *storage.InspectionRule) string { return rule.UUID }, url.QueryEscape, filters...)
}

// getInspectionRule is GET /v1/inspection_rules/{uuid}.
func (a *API) getInspectionRule(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("uuid")
	if err := checkRuleUUID(id); err != nil {
		return err
	}
	qa, err := readQueryArgs(r.URL.Query(), "fields")
	if err != nil {
		return err
	}
	unknownQuery(r.URL.Query(), qa)
	if err := jsonschema.Check("Schema error", ruleQuerySchema(false), qa.doc); err != nil {
		return err
	}
	rule, err := a.cond.Store().GetInspectionRule(r.Context(), id)
	if err != nil {
		return err
	}
	return ruleTable.writeShown(w, a.view(r), rule, qa.fields)
}

// opDocs is a checked document's conditions or actions.
func opDocs(v any) []map[string]any {
	items, _ := v.([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.(map[string]any)
	}
	return out
}

// createInspectionRule is POST /v1/inspection_rules.
func (a *API) createInspectionRule(w http.ResponseWriter, r *http.Request) error {
	body, err := ruleTable.readBody(r)
	if err != nil {
		return err
	}
	return ruleTable.create(w, r, a.view(r), "inspection_rules", &storage.InspectionRule{}, body, nil, a.cond.CreateInspectionRule)
}

// ruleDoc is the rule as its object's as_dict() gives it to a patch.
func ruleDoc(rule *storage.InspectionRule) map[string]any {
	ops := func(in []map[string]any) []any {
		out := make([]any, len(in))
		for i, m := range in {
			out[i] = m
		}
		return out
	}
	return map[string]any{
		"id": rule.ID, "uuid": rule.UUID, "description": strOrNil(rule.Description), "priority": rule.Priority,
		"sensitive": rule.Sensitive, "phase": rule.Phase,
		"conditions": ops(rule.Conditions), "actions": ops(rule.Actions),
		"created_at": ironicTime(rule.CreatedAt), "updated_at": timeOrNil(rule.UpdatedAt),
	}
}

// patchInspectionRule is PATCH /v1/inspection_rules/{uuid}.
func (a *API) patchInspectionRule(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("uuid")
	if !argUUIDLike(id) {
		return errInvalid("Expected UUID for inspection_rule_uuid: %s", id)
	}
	ops, err := ruleTable.patchOps(r)
	if err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdateInspectionRule(actorContext(r), id, func(rule *storage.InspectionRule) error {
		if rule.Sensitive {
			if err := keepsSensitive(ops); err != nil {
				return err
			}
		}
		return ruleTable.patch(v, rule, ops, patchHooks{})
	})
	if err != nil {
		return err
	}
	return ruleTable.writeOK(w, v, updated, nil)
}

// keepsSensitive refuses a patch that unsets a sensitive rule's flag,
// before the patch is applied (Ironic's order).
func keepsSensitive(ops []patchOp) error {
	for _, op := range ops {
		if op.path == "/sensitive" && (op.op == "remove" || op.value != nil && !pyrepr.Truth(op.value)) {
			reprs := make([]string, len(ops))
			for i, o := range ops {
				reprs[i] = o.repr()
			}
			return errInvalid("Couldn't apply patch '[%s]'. Reason: Inspection rules cannot have the sensitive flag unset.", strings.Join(reprs, ", "))
		}
	}
	return nil
}

// deleteInspectionRule is DELETE /v1/inspection_rules/{uuid}.
func (a *API) deleteInspectionRule(w http.ResponseWriter, r *http.Request) error {
	return deleteItem(w, r, "uuid", checkRuleUUID, a.cond.DeleteInspectionRule)
}

// inspectionRuleRoutes registers /v1/inspection_rules; every version
// reaches the handlers, which answer Ironic's 404/405 below 1.96.
func (a *API) inspectionRuleRoutes() {
	crudRoutes(a.under(rulesAPI), "/inspection_rules", "uuid", crud{list: a.listInspectionRules, create: a.createInspectionRule,
		get: a.getInspectionRule, patch: a.patchInspectionRule, del: a.deleteInspectionRule})
	a.apiRoute("DELETE", "/inspection_rules", rulesAPI, func(w http.ResponseWriter, r *http.Request) error {
		return removed(w, r, a.cond.DeleteAllInspectionRules)
	})
}
