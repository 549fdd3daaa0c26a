package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"castiron/engine"
	"castiron/engine/jsonschema"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// Runbooks (API 1.92; traits and description 1.112), as Ironic's
// v1/runbook.py serves them at /v1/runbooks[/{uuid or name}[/traits[/{trait}]]],
// and their use by PUT /v1/nodes/{id}/states/provision {"runbook": ...}.
//
// Callers policy restricts (access.go) are judged as Ironic judges them:
// the list filtered to a project's own and the public runbooks, a
// project caller's new runbook its project's and never public, and
// baremetal:runbook:use on the runbook a node runs. Unrestricted callers
// are answered as a system-scoped admin.

const (
	runbookMinMinor  = 92  // MINOR_92_RUNBOOKS
	runbookTraitsMin = 112 // MINOR_112_RUNBOOK_TRAITS
)

// runbooksAPI answers below 1.92 as RunbooksController._route does.
var runbooksAPI = apiSince{runbookMinMinor, "The API version does not allow runbooks", false}

// Ironic's RUNBOOK_STEP_SCHEMA, RUNBOOK_NAME_SCHEMA and the steps of
// RUNBOOK_SCHEMA.
var (
	runbookStepSchema = jsonschema.Object(true, []string{"interface", "step", "order"},
		jsonschema.P("args", jsonschema.Types("object")),
		jsonschema.P("interface", &jsonschema.Schema{Types: []string{"string"}, Enum: deployInterfaces}),
		jsonschema.P("step", &jsonschema.Schema{Types: []string{"string"}, MinLength: 1}),
		jsonschema.P("order", stepRankSchema()),
	)
	runbookNameSchema  = jsonschema.WithPattern(&jsonschema.Schema{Types: []string{"string"}, MinLength: 1, MaxLength: 255}, `^[A-Za-z0-9\-._~]+$`)
	runbookStepsSchema = &jsonschema.Schema{Types: []string{"array"}, Items: runbookStepSchema, MinItems: 1}
)

// runbookStepView is one step as convert_steps shows a runbook's.
type runbookStepView struct {
	Interface string         `json:"interface"`
	Step      string         `json:"step"`
	Args      map[string]any `json:"args"`
	Order     int64          `json:"order"`
}

// maskRunbookSteps masks the args of every step (step_sanitize).
var maskRunbookSteps = maskStepArgs(func(s *runbookStepView) *map[string]any { return &s.Args })

type runbookField = field[storage.Runbook]

// newRunbookTable is Ironic's runbook view and schema at a version: before
// 1.112 (RUNBOOK_SCHEMA: the name is a trait; no description, no traits)
// or from it (RUNBOOK_MUTATION_SCHEMA_V112 for writes, traits shown).
func newRunbookTable(v112 bool) *resource[storage.Runbook] {
	name := traitSchema
	if v112 {
		name = runbookNameSchema
	}
	optBool := func(fname string, p func(*storage.Runbook) *bool) runbookField {
		return runbookField{fname, runbookMinMinor, fCreate | fPatch | fSort, jsonschema.Types("boolean", "null"), nil,
			func(_ *viewCtx, r *storage.Runbook) any { return *p(r) },
			// The object's BooleanField defaults to false; null is taken as
			// that default rather than Ironic's failure to store it.
			func(r *storage.Runbook, v any) error { b, _ := v.(bool); *p(r) = b; return nil }}
	}
	fields := []runbookField{
		{"uuid", runbookMinMinor, fCreate | fSort, jsonschema.Types("string", "null"), nil,
			func(_ *viewCtx, r *storage.Runbook) any { return r.UUID },
			func(r *storage.Runbook, v any) error { u, _ := v.(string); r.UUID = strings.ToLower(u); return nil }},
		{"created_at", runbookMinMinor, fSort, nil, nil, func(_ *viewCtx, r *storage.Runbook) any { return ironicTime(r.CreatedAt) }, nil},
		{"updated_at", runbookMinMinor, fSort, nil, nil, func(_ *viewCtx, r *storage.Runbook) any { return timeOrNil(r.UpdatedAt) }, nil},
		{"name", runbookMinMinor, fCreate | fPatch | fRequired | fSort, name, nil,
			func(_ *viewCtx, r *storage.Runbook) any { return r.Name },
			func(r *storage.Runbook, v any) error { r.Name = v.(string); return nil }},
	}
	if v112 {
		fields = append(fields, strField[storage.Runbook]("description", runbookTraitsMin, fCreate|fPatch|fSort, 255,
			func(r *storage.Runbook) **string { return &r.Description }))
	}
	fields = append(fields,
		objField("extra", runbookMinMinor, nil, func(r *storage.Runbook) *storage.JSONObject { return &r.Extra }),
		optBool("public", func(r *storage.Runbook) *bool { return &r.Public }),
		strField[storage.Runbook]("owner", runbookMinMinor, fCreate|fPatch|fSort, 255, func(r *storage.Runbook) **string { return &r.Owner }),
		optBool("disable_ramdisk", func(r *storage.Runbook) *bool { return &r.DisableRamdisk }),
		runbookField{"links", runbookMinMinor, 0, nil, nil, func(v *viewCtx, r *storage.Runbook) any { return selfLinks(v, "runbooks", r.UUID) }, nil},
		runbookField{"steps", runbookMinMinor, fCreate | fPatch | fRequired, runbookStepsSchema, maskRunbookSteps,
			func(_ *viewCtx, r *storage.Runbook) any {
				out := make([]runbookStepView, len(r.Steps))
				for i, s := range r.Steps {
					out[i] = runbookStepView{Interface: s.Interface, Step: s.Step, Args: s.Args, Order: s.Order}
				}
				return out
			},
			func(r *storage.Runbook, v any) (err error) { r.Steps, err = runbookSteps("patch", v); return err }},
	)
	if v112 {
		fields = append(fields, runbookField{"traits", runbookTraitsMin, 0, nil, nil,
			func(_ *viewCtx, r *storage.Runbook) any { return r.Traits }, nil})
	}
	res := newResource("runbook", []string{"uuid", "name"}, fields...)
	// _PATCH_ALLOWED_FIELDS_BASE, then description from 1.112.
	res.patchOrder = []string{"disable_ramdisk", "extra", "name", "owner", "public", "steps"}
	if v112 {
		res.patchOrder = append(res.patchOrder, "description")
	}
	// RUNBOOK_SCHEMA lists steps before name (the first missing one is
	// named).
	res.body.Required = []string{"steps", "name"}
	return res
}

var (
	runbookTable    = newRunbookTable(false)
	runbookTable112 = newRunbookTable(true)
)

// runbookTableAt is the runbook table a request's version reads.
func runbookTableAt(ver Version) *resource[storage.Runbook] {
	if ver.AtLeast(runbookTraitsMin) {
		return runbookTable112
	}
	return runbookTable
}

// runbookSteps reads a checked document's steps; name is the schema
// error's ("runbook", "patch") for an order too large to store.
func runbookSteps(name string, v any) ([]storage.RunbookStep, error) {
	return readStepList(name, "order", v, func(d stepDoc) storage.RunbookStep {
		return storage.RunbookStep{Interface: d.Interface, Step: d.Step, Args: d.Args, Order: d.Rank}
	})
}

// checkRunbook is the runbook validator after the schema (duplicate_steps,
// then the uuid).
func checkRunbook(name string, doc map[string]any) error {
	return checkStepList(name, "order", doc)
}

// checkRunbookIdent is args.uuid_or_name of the path's runbook_ident.
var checkRunbookIdent = identCheck("runbook_ident")

// getRunbook is get_rpc_runbook: by uuid, else by logical name, else 400.
func (a *API) getRunbook(ctx context.Context, ident string) (*storage.Runbook, error) {
	if !argUUIDLike(ident) && !argLogicalName(ident) {
		return nil, errInvalid("Expected a logical name or UUID but received %s.", ident)
	}
	return a.cond.Store().GetRunbook(ctx, ident)
}

// listRunbooks is GET /v1/runbooks (args.validate, then the controller's
// checks in its order).
func (a *API) listRunbooks(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	qa, err := readNameListArgs(q)
	if err != nil {
		return err
	}
	var project bool
	if q.Has("project") {
		if project, err = parseBoolString(strings.TrimSpace(q.Get("project"))); err != nil {
			return invalidBool("project", q.Get("project"))
		}
	}
	if sd := q.Get("sort_dir"); q.Has("sort_dir") && sd != "asc" && sd != "desc" {
		return errInvalid("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", sd)
	}
	res := runbookTableAt(versionOf(r))
	ctx := r.Context()
	l, err := res.schemaListQuery(ctx, q, qa, "runbooks", a.cond.Store().GetRunbook,
		[]string{"uuid", "name", "description", "disable_ramdisk", "public", "owner", "created_at", "updated_at"},
		[]string{"extra", "steps", "traits"})
	if err != nil {
		return err
	}
	// project is an args.boolean in Ironic's controller: for an admin the
	// filter becomes owner == <that boolean> OR public, in effect the
	// public runbooks when true and no filter when false.
	// listProject: a project caller's own and the public runbooks.
	items, err := a.cond.Store().ListRunbooks(ctx, storage.RunbookQuery{Page: l.page, PublicOnly: project, Project: listProject(r)})
	if err != nil {
		return err
	}
	return res.writeSchemaList(w, r, a.view(r), l, "runbooks", "runbooks", items,
		func(rb *storage.Runbook) string { return rb.UUID }, func(s string) string { return s })
}

// getRunbookOne is GET /v1/runbooks/{ident}.
func (a *API) getRunbookOne(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if err := checkRunbookIdent(ident); err != nil {
		return err
	}
	qa, err := readQueryArgs(r.URL.Query(), "fields")
	if err != nil {
		return err
	}
	rb, err := lookupWithSuffix(r, ident, a.getRunbook)
	if err != nil {
		return err
	}
	return runbookTableAt(versionOf(r)).writeShown(w, a.view(r), rb, qa.fields)
}

// createRunbook is POST /v1/runbooks.
func (a *API) createRunbook(w http.ResponseWriter, r *http.Request) error {
	res := runbookTableAt(versionOf(r))
	body, err := decodeObject(r, "runbook")
	if err != nil {
		return err
	}
	if err := jsonschema.Check(res.schemaError, res.body, body); err != nil {
		return err
	}
	if err := checkRunbook("runbook", body); err != nil {
		return err
	}
	if err := runbookCreateOwner(r, body); err != nil {
		return err
	}
	return res.create(w, r, a.view(r), "runbooks", &storage.Runbook{}, body, nil, a.cond.CreateRunbook)
}

// patchRunbook is PATCH /v1/runbooks/{ident}: the fields the version may
// patch, the owner/public rules, then each step alone and the whole
// against RUNBOOK_MUTATION_SCHEMA_V112 at every version (Ironic's choice,
// so that 1.112-style names stay patchable at older versions).
func (a *API) patchRunbook(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if err := checkRunbookIdent(ident); err != nil {
		return err
	}
	res := runbookTableAt(versionOf(r))
	ops, err := readPatch(r)
	if err != nil {
		return err
	}
	if err := res.checkPatch(ops, versionOf(r)); err != nil {
		return err
	}
	if _, err := a.getRunbook(r.Context(), ident); err != nil {
		return err
	}
	owner, public := patchValues(ops, "/owner"), patchValues(ops, "/public")
	v := a.view(r)
	updated, err := a.cond.UpdateRunbook(actorContext(r), ident, func(rb *storage.Runbook) error {
		if len(owner) > 0 {
			publicValue := len(public) > 0 && public[0] == true
			if rb.Public && len(public) == 0 || publicValue {
				return errInvalid("Couldn't apply patch '%s'. Reason: There cannot be an owner for a public runbook", patchRepr(ops))
			}
		}
		if len(public) > 0 {
			rb.Owner = nil
		}
		return runbookTable112.patch(v, rb, ops, patchHooks{pre: checkPatchedRunbookSteps,
			post: func(_, after map[string]any) error { return checkRunbook("patch", runbookTable112.pruned(after)) }})
	})
	if err != nil {
		return err
	}
	return res.writeOK(w, v, updated, nil)
}

// patchRepr is a whole patch as Ironic's PatchError shows it (a Python
// list of its operations).
func patchRepr(ops []patchOp) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = op.repr()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// checkPatchedRunbookSteps checks each patched step alone against
// RUNBOOK_STEP_SCHEMA.
var checkPatchedRunbookSteps = patchedStepsCheck(runbookStepSchema)

// deleteRunbook is DELETE /v1/runbooks/{ident}.
func (a *API) deleteRunbook(w http.ResponseWriter, r *http.Request) error {
	ident := r.PathValue("ident")
	if err := checkRunbookIdent(ident); err != nil {
		return err
	}
	rb, err := a.getRunbook(r.Context(), ident)
	if err != nil {
		return err
	}
	return removed(w, r, func(ctx context.Context) error { return a.cond.DeleteRunbook(ctx, rb.UUID) })
}

// Runbook traits (1.112): RunbookTraitsController.

// runbookTraitsOnly answers /v1/runbooks/{ident}/traits below 1.112 as the
// controller's _lookup does: 404 whatever the method.
func runbookTraitsOnly(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !versionOf(r).AtLeast(runbookTraitsMin) {
			writeRaw(w, http.StatusNotFound, codeBody(http.StatusNotFound, "The API version does not allow runbook traits"))
			return nil
		}
		return h(w, r)
	}
}

func (a *API) getRunbookTraits(w http.ResponseWriter, r *http.Request) error {
	rb, err := a.getRunbook(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"traits": rb.Traits})
}

// runbookTraitsBody is RUNBOOK_TRAITS_SCHEMA.
var runbookTraitsBody = jsonschema.Object(true, nil, jsonschema.P("traits", &jsonschema.Schema{Types: []string{"array"}, Items: traitSchema}))

// putRunbookTraits is PUT /traits {"traits": [...]} (replace the set) and
// PUT /traits/{trait} (add one, no body).
func (a *API) putRunbookTraits(w http.ResponseWriter, r *http.Request) error {
	ident, trait := r.PathValue("ident"), r.PathValue("trait")
	raw, err := readBody(r)
	if err != nil {
		return err
	}
	var body map[string]any
	if len(strings.TrimSpace(string(raw))) > 0 {
		v, err := decodeJSON(raw)
		if err != nil {
			return err
		}
		body, _ = v.(map[string]any)
		if body == nil {
			return errInvalid("Schema error for body: %s is not of type 'object'", pyrepr.Repr(v))
		}
	}
	if trait != "" {
		if err := jsonschema.Check("Schema error for trait", traitSchema, trait); err != nil {
			return err
		}
	}
	if body != nil {
		if err := jsonschema.Check("Schema error for body", runbookTraitsBody, body); err != nil {
			return err
		}
	}
	rb, err := a.getRunbook(r.Context(), ident)
	if err != nil {
		return err
	}
	list, hasList := body["traits"].([]any)
	if (trait != "") == hasList {
		return errInvalid("A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body.")
	}
	if trait != "" {
		if len(body) > 0 {
			return errInvalid("No body should be provided when adding a trait")
		}
		if _, err := a.cond.UpdateRunbook(actorContext(r), rb.UUID, func(rb *storage.Runbook) error {
			if !slices.Contains(rb.Traits, trait) {
				rb.Traits = append(rb.Traits, trait)
			}
			return nil
		}); err != nil {
			return err
		}
		w.Header().Set("Location", baseURL(r)+"/v1/runbooks/"+ident+"/traits/"+trait)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	traits := []string{}
	for _, t := range list {
		if s := t.(string); !slices.Contains(traits, s) {
			traits = append(traits, s)
		}
	}
	_, err = a.cond.UpdateRunbook(actorContext(r), rb.UUID, func(rb *storage.Runbook) error { rb.Traits = traits; return nil })
	return noContent(w, err)
}

// deleteRunbookTraits is DELETE /traits/{trait} (one; an absent trait is no
// error) and DELETE /traits (all).
func (a *API) deleteRunbookTraits(w http.ResponseWriter, r *http.Request) error {
	trait := r.PathValue("trait")
	rb, err := a.getRunbook(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	return removed(w, r, func(ctx context.Context) error {
		_, err := a.cond.UpdateRunbook(ctx, rb.UUID, func(rb *storage.Runbook) error {
			if trait == "" {
				rb.Traits = []string{}
			} else {
				rb.Traits = slices.DeleteFunc(rb.Traits, func(t string) bool { return t == trait })
			}
			return nil
		})
		return err
	})
}

// runbookRoutes registers /v1/runbooks; every version reaches the
// handlers, which answer Ironic's 404/405 below 1.92 (and 404 to the
// traits below 1.112).
func (a *API) runbookRoutes() {
	crudRoutes(a.under(runbooksAPI), "/runbooks", "ident", crud{list: a.listRunbooks, create: a.createRunbook,
		get: a.getRunbookOne, patch: a.patchRunbook, del: a.deleteRunbook})
	reg := a.under(runbooksAPI)
	reg("GET", "/runbooks/{ident}/traits", runbookTraitsOnly(a.getRunbookTraits))
	reg("PUT", "/runbooks/{ident}/traits", runbookTraitsOnly(a.putRunbookTraits))
	reg("PUT", "/runbooks/{ident}/traits/{trait}", runbookTraitsOnly(a.putRunbookTraits))
	reg("DELETE", "/runbooks/{ident}/traits", runbookTraitsOnly(a.deleteRunbookTraits))
	reg("DELETE", "/runbooks/{ident}/traits/{trait}", runbookTraitsOnly(a.deleteRunbookTraits))
}

// provisionRunbook is _handle_runbook of PUT /v1/nodes/{id}/states/provision
// with "runbook": run by engine.Provision once the node is known and the
// verb fits its state (Ironic's order). The runbook's steps replace the
// clean or service steps, and its disable_ramdisk applies.
func (a *API) provisionRunbook(ver Version, ident string, use func(*storage.Runbook) error) func(context.Context, *storage.Node, *engine.ProvisionRequest) error {
	return func(ctx context.Context, n *storage.Node, req *engine.ProvisionRequest) error {
		if !ver.AtLeast(runbookMinMinor) {
			return errNotAcceptable()
		}
		rb, err := a.getRunbook(ctx, ident)
		if err != nil {
			return err
		}
		if use != nil {
			if err := use(rb); err != nil {
				return err
			}
		}
		if ver.AtLeast(runbookTraitsMin) {
			if len(rb.Traits) == 0 {
				return errInvalid("Runbook %s has no traits configured. Please ask an administrator to add traits to the runbook.", rb.UUID)
			}
			if !slices.ContainsFunc(rb.Traits, func(t string) bool { return slices.Contains(n.Traits, t) }) {
				sorted := slices.Sorted(slices.Values(rb.Traits))
				return errInvalid("This runbook has not been approved for use on this node %s. The node does not have any of the runbook's traits %s. Please ask an administrator to add a matching trait to your node.",
					n.UUID, pyrepr.Repr(anyList(sorted)))
			}
		} else if !slices.Contains(n.Traits, rb.Name) {
			return errInvalid("This runbook has not been approved for use on this node %s. Please ask an administrator to add it to your node traits.", n.UUID)
		}
		steps := make([]map[string]any, len(rb.Steps))
		for i, s := range rb.Steps {
			steps[i] = map[string]any{"interface": s.Interface, "step": s.Step, "args": map[string]any(s.Args), "order": s.Order}
		}
		switch req.Target {
		case "clean":
			if len(req.CleanSteps) > 0 {
				return errInvalid("Please provide either \"clean_steps\" or a runbook, but not both.")
			}
			req.CleanSteps = steps
		case "service":
			if len(req.ServiceSteps) > 0 {
				return errInvalid("Please provide either \"service_steps\" or a runbook, but not both.")
			}
			req.ServiceSteps = steps
		}
		disable := rb.DisableRamdisk
		req.DisableRamdisk = &disable
		// check_allow_disable_ramdisk with the runbook's value, which is
		// never None: service takes it from 1.108, other verbs never.
		if err := disableRamdiskGate(req.Target, req.DisableRamdisk, ver); err != nil {
			return err
		}
		if (len(req.CleanSteps) > 0 && req.Target != "clean") || (len(req.ServiceSteps) > 0 && req.Target != "service") {
			return errInvalid("\"runbooks\" is only valid when setting target provision state to any of ['clean', 'service']")
		}
		return nil
	}
}
