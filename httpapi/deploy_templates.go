package httpapi

import (
	"net/http"
	"regexp"
	"slices"
	"strings"

	"castiron/engine/jsonschema"
	"castiron/storage"
	"sync"
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
	standardTraitName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`) })
)

func isStandardTrait(s string) bool {
	return standardTraitName().MatchString(s) && !strings.HasPrefix(s, "CUSTOM_")
}

// Ironic's DEPLOY_STEP_SCHEMA, TRAITS_SCHEMA and TEMPLATE_SCHEMA.
var (
	deployStepSchema = jsonschema.Object(true, []string{"interface", "step", "args", "priority"},
		jsonschema.P("args", jsonschema.Types("object")),
		jsonschema.P("interface", &jsonschema.Schema{Types: []string{"string"}, Enum: deployInterfaces}),
		jsonschema.P("priority", stepRankSchema()),
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
var maskSteps = maskStepArgs(func(s *stepView) *map[string]any { return &s.Args })

type templateField = field[storage.DeployTemplate]

// templates is Ironic's deploy template table in its view order. A
// description passes TEMPLATE_SCHEMA and is dropped, as Ironic's
// DeployTemplate object has no such field (so no view shows it).
var templateTable = func() *resource[storage.DeployTemplate] {
	desc := jsonschema.Types("string", "null")
	desc.MaxLength = 255
	res := newResource("template", []string{"uuid", "name"},
		templateField{"uuid", templateMinMinor, fCreate | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, t *storage.DeployTemplate) any { return t.UUID },
			func(t *storage.DeployTemplate, v any) error {
				u, _ := v.(string)
				t.UUID = strings.ToLower(u)
				return nil
			}},
		templateField{"created_at", templateMinMinor, fSort, nil, nil, func(_ *viewCtx, t *storage.DeployTemplate) any { return ironicTime(t.CreatedAt) }, nil},
		templateField{"updated_at", templateMinMinor, fSort, nil, nil, func(_ *viewCtx, t *storage.DeployTemplate) any { return timeOrNil(t.UpdatedAt) }, nil},
		templateField{"name", templateMinMinor, fCreate | fPatch | fRequired | fSort, traitSchema, nil,
			func(_ *viewCtx, t *storage.DeployTemplate) any { return t.Name },
			func(t *storage.DeployTemplate, v any) error { t.Name = v.(string); return nil }},
		objField("extra", templateMinMinor, nil, func(t *storage.DeployTemplate) *storage.JSONObject { return &t.Extra }),
		templateField{"links", templateMinMinor, 0, nil, nil, func(v *viewCtx, t *storage.DeployTemplate) any { return selfLinks(v, "deploy_templates", t.UUID) }, nil},
		templateField{"steps", templateMinMinor, fCreate | fPatch | fRequired, &jsonschema.Schema{Types: []string{"array"}, Items: deployStepSchema, MinItems: 1}, maskSteps,
			func(_ *viewCtx, t *storage.DeployTemplate) any {
				out := make([]stepView, len(t.Steps))
				for i, s := range t.Steps {
					out[i] = stepView{Interface: s.Interface, Step: s.Step, Args: s.Args, Priority: s.Priority}
				}
				return out
			},
			func(t *storage.DeployTemplate, v any) (err error) { t.Steps, err = deploySteps("patch", v); return err }},
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

// checkTemplateIdent is args.uuid_or_name of the path's template_ident.
var checkTemplateIdent = identCheck("template_ident")

// nameSchema is request_types.name (the list's marker).
var nameSchema = jsonschema.WithPattern(&jsonschema.Schema{Types: []string{"string"}, MinLength: 1, MaxLength: 255}, `(?i)^[A-Z0-9-._~]+$`)

// listDeployTemplates is GET /v1/deploy_templates.
func (a *API) listDeployTemplates(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	qa, err := readNameListArgs(q)
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
	ctx := r.Context()
	l, err := templateTable.schemaListQuery(ctx, q, qa, "deploy_templates", a.cond.Store().GetDeployTemplate,
		[]string{"uuid", "name", "created_at", "updated_at"}, []string{"extra", "steps"})
	if err != nil {
		return err
	}
	items, err := a.cond.Store().ListDeployTemplates(ctx, l.page)
	if err != nil {
		return err
	}
	return templateTable.writeSchemaList(w, r, a.view(r), l, "deploy_templates", "deploy_templates", items,
		func(t *storage.DeployTemplate) string { return t.UUID }, func(s string) string { return s })
}

// volLogicalName is args.name: a logical name (a UUID is one too).
func volLogicalName(s string) bool {
	return len(s) <= 255 && nameRE().MatchString(s)
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
	return templateTable.writeShown(w, a.view(r), t, qa.fields)
}

// deploySteps reads a checked document's steps; name is the schema error's
// ("template", "patch") for a priority too large to store.
func deploySteps(name string, v any) ([]storage.DeployStep, error) {
	return readStepList(name, "priority", v, func(d stepDoc) storage.DeployStep {
		return storage.DeployStep{Interface: d.Interface, Step: d.Step, Args: d.Args, Priority: d.Rank}
	})
}

// checkTemplate is TEMPLATE_VALIDATOR after the schema (duplicate_steps,
// uuid) on a body or patched document named name.
func checkTemplate(name string, doc map[string]any) error {
	return checkStepList(name, "priority", doc)
}

// checkPatchedSteps is the patch's check of each step alone, before the
// template's.
var checkPatchedSteps = patchedStepsCheck(deployStepSchema)

// createDeployTemplate is POST /v1/deploy_templates. A description passes
// the schema and is dropped, as Ironic's DeployTemplate object has no such
// field.
func (a *API) createDeployTemplate(w http.ResponseWriter, r *http.Request) error {
	body, err := templateTable.readBody(r)
	if err != nil {
		return err
	}
	if err := checkTemplate("template", body); err != nil {
		return err
	}
	return templateTable.create(w, r, a.view(r), "deploy_templates", &storage.DeployTemplate{}, body, nil, a.cond.CreateDeployTemplate)
}

// patchDeployTemplate is PATCH /v1/deploy_templates/{ident}: each step is
// checked alone first, then the template (Ironic's order).
func (a *API) patchDeployTemplate(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if err := checkTemplateIdent(ident); err != nil {
		return err
	}
	ops, err := templateTable.patchOps(r)
	if err != nil {
		return err
	}
	v := a.view(r)
	updated, err := a.cond.UpdateDeployTemplate(actorContext(r), ident, func(t *storage.DeployTemplate) error {
		return templateTable.patch(v, t, ops, patchHooks{pre: checkPatchedSteps,
			post: func(_, after map[string]any) error { return checkTemplate("patch", templateTable.pruned(after)) }})
	})
	if err != nil {
		return err
	}
	return templateTable.writeOK(w, v, updated, nil)
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
