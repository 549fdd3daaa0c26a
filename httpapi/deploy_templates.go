package httpapi

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"castiron/engine/jsonschema"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// Deploy templates (API 1.55), as Ironic's v1/deploy_template.py serves
// them at /v1/deploy_templates[/{uuid or name}].

// templateMinMinor is MINOR_55_DEPLOY_TEMPLATES.
const templateMinMinor = 55

// deployInterfaces are conductor/steps.py DEPLOYING_INTERFACE_PRIORITY's
// keys, in its order (the schema's enum).
var deployInterfaces = []string{"vendor", "power", "management", "firmware", "deploy", "bios", "raid"}

var (
	customTraitPattern = `^CUSTOM_[A-Z0-9_]+$`
	// Standard traits are os-traits' list; like the node traits API,
	// castiron takes any upper-case name that could be one.
	standardTraitName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

func isStandardTrait(s string) bool {
	return standardTraitName.MatchString(s) && !strings.HasPrefix(s, "CUSTOM_")
}

// Ironic's DEPLOY_STEP_SCHEMA, TRAITS_SCHEMA and TEMPLATE_SCHEMA.
var (
	deployStepSchema = jsonschema.Object(true, []string{"interface", "step", "args", "priority"},
		jsonschema.P("args", jsonschema.Types("object")),
		jsonschema.P("interface", &jsonschema.Schema{Types: []string{"string"}, Enum: deployInterfaces}),
		jsonschema.P("priority", &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Types: []string{"integer"}, Minimum: jsonschema.Int64(0)},
			jsonschema.WithPattern(&jsonschema.Schema{Types: []string{"string"}, MinLength: 1}, `^[0-9]+$`),
		}}),
		jsonschema.P("step", &jsonschema.Schema{Types: []string{"string"}, MinLength: 1}),
	)
	traitSchema = &jsonschema.Schema{Types: []string{"string"}, MinLength: 1, MaxLength: 255, AnyOf: []*jsonschema.Schema{
		jsonschema.WithPattern(&jsonschema.Schema{}, customTraitPattern),
		{InEnum: isStandardTrait},
	}}
)

// stepView is one step as convert_steps shows it.
type stepView struct {
	Interface string         `json:"interface"`
	Step      string         `json:"step"`
	Args      map[string]any `json:"args"`
	Priority  int64          `json:"priority"`
}

// maskSteps masks the args of every step (convert_steps).
func maskSteps(v any) any {
	steps, ok := v.([]stepView)
	if !ok {
		return v
	}
	out := make([]stepView, len(steps))
	for i, s := range steps {
		s.Args = maskDict(s.Args)
		out[i] = s
	}
	return out
}

type templateField = field[storage.DeployTemplate]

// templates is Ironic's deploy template table in its view order. A
// description passes TEMPLATE_SCHEMA and is dropped, as Ironic's
// DeployTemplate object has no such field (so no view shows it).
var templateTable = func() *resource[storage.DeployTemplate] {
	desc := jsonschema.Types("string", "null")
	desc.MaxLength = 255
	res := newResource("template", []string{"uuid", "name"},
		templateField{"uuid", templateMinMinor, fCreate | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, t *storage.DeployTemplate) any { return t.UUID }, nil},
		templateField{"created_at", templateMinMinor, fSort, nil, nil, func(_ *viewCtx, t *storage.DeployTemplate) any { return ironicTime(t.CreatedAt) }, nil},
		templateField{"updated_at", templateMinMinor, fSort, nil, nil, func(_ *viewCtx, t *storage.DeployTemplate) any { return timeOrNil(t.UpdatedAt) }, nil},
		templateField{"name", templateMinMinor, fCreate | fPatch | fRequired | fSort, traitSchema, nil,
			func(_ *viewCtx, t *storage.DeployTemplate) any { return t.Name },
			func(t *storage.DeployTemplate, v any) error { t.Name = v.(string); return nil }},
		templateField{"extra", templateMinMinor, fCreate | fPatch, jsonschema.Types("object", "null"), nil,
			func(_ *viewCtx, t *storage.DeployTemplate) any { return t.Extra },
			func(t *storage.DeployTemplate, v any) error { t.Extra = objectOrEmpty(v); return nil }},
		templateField{"links", templateMinMinor, 0, nil, nil, func(v *viewCtx, t *storage.DeployTemplate) any { return selfLinks(v, "deploy_templates", t.UUID) }, nil},
		templateField{"steps", templateMinMinor, fCreate | fPatch | fRequired, &jsonschema.Schema{Types: []string{"array"}, Items: deployStepSchema, MinItems: 1}, maskSteps,
			func(_ *viewCtx, t *storage.DeployTemplate) any {
				out := make([]stepView, len(t.Steps))
				for i, s := range t.Steps {
					out[i] = stepView{Interface: s.Interface, Step: s.Step, Args: s.Args, Priority: s.Priority}
				}
				return out
			}, nil},
		templateField{"description", templateMinMinor, fCreate | fPatch, desc, nil, nil, nil},
	)
	res.patchOrder = []string{"extra", "name", "steps", "description"}
	// TEMPLATE_SCHEMA lists steps before name (the first missing one is
	// named).
	res.body.Required = []string{"steps", "name"}
	return res
}()

// templateFieldNames are the request schemas' field names: the view's and
// description (asking for it fails later, as in Ironic).
func templateFieldNames() []string {
	names := append(templateTable.viewNames(), "description")
	slices.Sort(names)
	return names
}

// checkTemplateFields is check_for_invalid_fields against the view's keys.
func checkTemplateFields(fields []string) error {
	var bad []string
	for _, f := range fields {
		if fld := templateTable.field(f); fld == nil || fld.get == nil {
			bad = append(bad, f)
		}
	}
	if len(bad) > 0 {
		return errInvalid("Field(s) \"%s\" are not valid", strings.Join(bad, ", "))
	}
	return nil
}

// checkTemplateIdent is args.uuid_or_name of the path's template_ident.
func checkTemplateIdent(ident string) error {
	if !volUUIDOrName(ident) {
		return errInvalid("Expected UUID or name for template_ident: %s", ident)
	}
	return nil
}

func (a *API) writeTemplate(w http.ResponseWriter, r *http.Request, status int, t *storage.DeployTemplate, fields []string) {
	templateTable.writeOne(w, a.view(r), status, t, templateTable.canonical(fields))
}

// nameSchema is request_types.name (the list's marker).
var nameSchema = jsonschema.WithPattern(&jsonschema.Schema{Types: []string{"string"}, MinLength: 1, MaxLength: 255}, `(?i)^[A-Z0-9-._~]+$`)

// listDeployTemplates is GET /v1/deploy_templates.
func (a *API) listDeployTemplates(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Has("marker") && !volLogicalName(q.Get("marker")) {
		return errInvalid("Expected name for marker: %s", q.Get("marker"))
	}
	qa, err := readQueryArgs(q, "limit", "sort_key", "sort_dir", "fields", "detail")
	if err != nil {
		return err
	}
	if q.Has("marker") {
		qa.doc["marker"] = q.Get("marker")
	}
	schema := jsonschema.Object(true, nil,
		jsonschema.P("detail", jsonschema.Types("string", "boolean")),
		jsonschema.P("fields", fieldsSchema(templateFieldNames())),
		jsonschema.P("limit", jsonschema.Types("integer")),
		jsonschema.P("marker", nameSchema),
		jsonschema.P("sort_dir", &jsonschema.Schema{Types: []string{"string"}, Enum: []string{"asc", "desc"}}),
		jsonschema.P("sort_key", jsonschema.Types("string")),
	)
	if err := jsonschema.Check("Schema error", schema, qa.doc); err != nil {
		return err
	}
	// get_request_return_fields
	var detail *bool
	if q.Has("detail") {
		detail = &qa.detail
	}
	fields, err := templateTable.listFields(qa.fields, qa.detail)
	if err != nil {
		return err
	}
	page, sortKey, err := pageOf(qa)
	if err != nil {
		return err
	}
	if sortKey == "extra" || sortKey == "steps" {
		return errUnsortable(sortKey)
	}
	ctx := r.Context()
	if page.Marker != "" {
		// DeployTemplate.get_by_uuid: a name finds nothing.
		if !argUUIDLike(page.Marker) {
			return &storage.NotFoundError{Table: "deploy_templates", Key: page.Marker}
		}
		if _, err := a.cond.Store().GetDeployTemplate(ctx, page.Marker); err != nil {
			return err
		}
	}
	if page.SortKey, err = sortColumn(sortKey, []string{"uuid", "name", "created_at", "updated_at"}); err != nil {
		return err
	}
	items, err := a.cond.Store().ListDeployTemplates(ctx, page)
	if err != nil {
		return err
	}
	if len(items) > 0 && fields != nil {
		if err := checkTemplateFields(fields); err != nil {
			return err
		}
	}
	var next string
	if n := len(items); n > 0 && n == page.Limit {
		var b strings.Builder
		b.WriteString("sort_key=" + sortKey + "&sort_dir=" + string(page.SortDir) + "&")
		if detail != nil {
			b.WriteString("detail=" + pyrepr.Bool(*detail) + "&")
		}
		if len(fields) > 0 {
			b.WriteString("fields=" + strings.Join(fields, ",") + "&")
		}
		next = baseURL(r) + "/v1/deploy_templates?" + b.String() + "limit=" + strconv.Itoa(page.Limit) + "&marker=" + items[n-1].UUID
	}
	templateTable.writeList(w, a.view(r), "deploy_templates", items, templateTable.canonical(fields), next)
	return nil
}

// volLogicalName is args.name: a logical name (a UUID is one too).
func volLogicalName(s string) bool {
	return len(s) <= 255 && nameRE.MatchString(s)
}

// getDeployTemplate is GET /v1/deploy_templates/{ident}.
func (a *API) getDeployTemplate(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if err := checkTemplateIdent(ident); err != nil {
		return err
	}
	qa, err := readQueryArgs(r.URL.Query(), "fields")
	if err != nil {
		return err
	}
	if err := jsonschema.Check("Schema error", jsonschema.Object(true, nil, jsonschema.P("fields", fieldsSchema(templateFieldNames()))), qa.doc); err != nil {
		return err
	}
	t, err := lookupWithSuffix(r, ident, a.cond.Store().GetDeployTemplate)
	if err != nil {
		return err
	}
	if err := checkTemplateFields(qa.fields); err != nil {
		return err
	}
	a.writeTemplate(w, r, http.StatusOK, t, qa.fields)
	return nil
}

// checkTemplate is TEMPLATE_VALIDATOR (schema, duplicate_steps, uuid) on a
// body or patched document named name, returning the steps it holds.
func checkTemplate(name string, doc map[string]any) ([]storage.DeployStep, error) {
	if err := jsonschema.Check("Schema error for "+name, templateTable.body, doc); err != nil {
		return nil, err
	}
	raw := doc["steps"].([]any)
	steps := make([]storage.DeployStep, len(raw))
	var dups []string
	seen := map[string]int{}
	for i, x := range raw {
		m := x.(map[string]any)
		s := storage.DeployStep{Interface: m["interface"].(string), Step: m["step"].(string), Args: m["args"].(map[string]any)}
		switch p := m["priority"].(type) {
		case int64:
			s.Priority = p
		case float64:
			s.Priority = int64(p)
		case string:
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return nil, errInvalid("Schema error for %s: %s is too large", name, pyrepr.Repr(p))
			}
			s.Priority = n
		}
		steps[i] = s
		key := fmt.Sprintf("interface: %s, step: %s", s.Interface, s.Step)
		if seen[key]++; seen[key] == 2 {
			dups = append(dups, key)
		}
	}
	if len(dups) > 0 {
		return nil, errInvalid("Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: %s.",
			strings.Join(dups, "; "))
	}
	if u, ok := doc["uuid"].(string); ok && !argUUIDLike(u) {
		return nil, errInvalid("Expected UUID for uuid: %s", u)
	}
	return steps, nil
}

// createDeployTemplate is POST /v1/deploy_templates. A description passes
// the schema and is dropped, as Ironic's DeployTemplate object has no such
// field.
func (a *API) createDeployTemplate(w http.ResponseWriter, r *http.Request) error {
	body, err := decodeObject(r, "template")
	if err != nil {
		return err
	}
	steps, err := checkTemplate("template", body)
	if err != nil {
		return err
	}
	t := &storage.DeployTemplate{Name: body["name"].(string), Steps: steps, Extra: objectOrEmpty(body["extra"])}
	if u, ok := body["uuid"].(string); ok {
		t.UUID = strings.ToLower(u)
	}
	if err := a.cond.CreateDeployTemplate(actorContext(r), t); err != nil {
		return err
	}
	return templateTable.writeCreated(w, r, a.view(r), "deploy_templates", t.UUID, t)
}

// patchDeployTemplate is PATCH /v1/deploy_templates/{ident}.
func (a *API) patchDeployTemplate(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if err := checkTemplateIdent(ident); err != nil {
		return err
	}
	ops, err := readPatch(r)
	if err != nil {
		return err
	}
	if err := templateTable.checkPatch(ops, versionOf(r)); err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdateDeployTemplate(actorContext(r), ident, func(t *storage.DeployTemplate) error {
		doc, err := applyPatch(templateTable.doc(v, t), ops)
		if err != nil {
			return err
		}
		// Each step is pruned to the step schema's keys and checked alone
		// first, then the template (pruned to its schema's keys).
		if steps, ok := doc["steps"].([]any); ok {
			for _, x := range steps {
				m, ok := x.(map[string]any)
				if !ok {
					continue
				}
				for k := range m {
					if !slices.ContainsFunc(deployStepSchema.Props, func(p jsonschema.Prop) bool { return p.Name == k }) {
						delete(m, k)
					}
				}
				if err := jsonschema.Check("Schema error for patch", deployStepSchema, m); err != nil {
					return err
				}
			}
		}
		doc = templateTable.pruned(doc)
		steps, err := checkTemplate("patch", doc)
		if err != nil {
			return err
		}
		t.Name = doc["name"].(string)
		t.Steps = steps
		t.Extra = objectOrEmpty(doc["extra"])
		return nil
	})
	if err != nil {
		return err
	}
	a.writeTemplate(w, r, http.StatusOK, updated, nil)
	return nil
}

// deleteDeployTemplate is DELETE /v1/deploy_templates/{ident}.
func (a *API) deleteDeployTemplate(w http.ResponseWriter, r *http.Request) error {
	return deleteItem(w, r, "ident", checkTemplateIdent, a.cond.DeleteDeployTemplate)
}

// deployTemplateRoutes registers /v1/deploy_templates; every version
// reaches the handlers, which answer Ironic's 404/405 below 1.55.
func (a *API) deployTemplateRoutes() {
	crudRoutes(a.under(templatesAPI), "/deploy_templates", "ident", crud{list: a.listDeployTemplates, create: a.createDeployTemplate,
		get: a.getDeployTemplate, patch: a.patchDeployTemplate, del: a.deleteDeployTemplate})
}
