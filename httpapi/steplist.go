package httpapi

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"castiron/engine/jsonschema"
	"castiron/fault/pyrepr"
)

// The step lists deploy templates (1.55) and runbooks (1.92) share: Ironic
// checks both with the same schema shape, the same duplicate_steps
// validator and the same list arguments; only the step's rank key differs
// (a template's "priority", a runbook's "order").

// stepRankSchema is the schema of a step's rank: a non-negative integer or
// a string of digits.
func stepRankSchema() *jsonschema.Schema {
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
		{Types: []string{"integer"}, Minimum: jsonschema.Int64(0)},
		jsonschema.WithPattern(&jsonschema.Schema{Types: []string{"string"}, MinLength: 1}, `^[0-9]+$`),
	}}
}

// stepDoc is one step of a schema-checked document; Rank is its priority
// or order.
type stepDoc struct {
	Interface, Step string
	Args            map[string]any
	Rank            int64
}

// readStepList reads a checked document's steps, their rank under the key
// rank, each made a stored step S by as; name is the schema error's
// ("template", "runbook", "patch") for a rank too large to store.
func readStepList[S any](name, rank string, v any, as func(stepDoc) S) ([]S, error) {
	raw, _ := v.([]any)
	steps := make([]S, len(raw))
	for i, x := range raw {
		m := x.(map[string]any)
		args, _ := m["args"].(map[string]any)
		s := stepDoc{Interface: m["interface"].(string), Step: m["step"].(string), Args: args}
		switch p := m[rank].(type) {
		case int64:
			s.Rank = p
		case float64:
			s.Rank = int64(p)
		case string:
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return nil, errInvalid("Schema error for %s: %s is too large", name, pyrepr.Repr(p))
			}
			s.Rank = n
		}
		steps[i] = as(s)
	}
	return steps, nil
}

// checkStepList is the validator after the schema on a body or patched
// document named name (duplicate_steps, whose error is the deploy
// template's for runbooks too in Ironic, then the uuid).
func checkStepList(name, rank string, doc map[string]any) error {
	steps, err := readStepList(name, rank, doc["steps"], func(s stepDoc) stepDoc { return s })
	if err != nil {
		return err
	}
	var dups []string
	seen := map[string]int{}
	for _, s := range steps {
		key := "interface: " + s.Interface + ", step: " + s.Step
		if seen[key]++; seen[key] == 2 {
			dups = append(dups, key)
		}
	}
	if len(dups) > 0 {
		return errInvalid("Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: %s.",
			strings.Join(dups, "; "))
	}
	if u, ok := doc["uuid"].(string); ok && !argUUIDLike(u) {
		return errInvalid("Expected UUID for uuid: %s", u)
	}
	return nil
}

// patchedStepsCheck is a patch's check of each step alone, before the
// whole's (patched_validate_with_schema): pruned to the step schema's keys,
// then against it.
func patchedStepsCheck(step *jsonschema.Schema) func(_, after map[string]any) error {
	return func(_, after map[string]any) error {
		steps, _ := after["steps"].([]any)
		for _, x := range steps {
			m, ok := x.(map[string]any)
			if !ok {
				continue
			}
			for k := range m {
				if !slices.ContainsFunc(step.Props, func(p jsonschema.Prop) bool { return p.Name == k }) {
					delete(m, k)
				}
			}
			if err := jsonschema.Check("Schema error for patch", step, m); err != nil {
				return err
			}
		}
		return nil
	}
}

// maskStepArgs masks the args of every shown step (convert_steps,
// step_sanitize); args points into one step view of type S.
func maskStepArgs[S any](args func(*S) *map[string]any) func(any) any {
	return func(v any) any {
		steps, ok := v.([]S)
		if !ok {
			return v
		}
		out := make([]S, len(steps)) // [] for none, as before
		copy(out, steps)
		for i := range out {
			a := args(&out[i])
			*a = maskDict(*a)
		}
		return out
	}
}

// identCheck is args.uuid_or_name of a path's ident parameter, named param
// in the error ("template_ident", "runbook_ident").
func identCheck(param string) func(string) error {
	return func(ident string) error {
		if !volUUIDOrName(ident) {
			return errInvalid("Expected UUID or name for %s: %s", param, ident)
		}
		return nil
	}
}

// readNameListArgs is args.validate of a list whose marker is a name, and
// the list arguments templates and runbooks share.
func readNameListArgs(q url.Values) (*queryArgs, error) {
	if q.Has("marker") && !volLogicalName(q.Get("marker")) {
		return nil, errInvalid("Expected name for marker: %s", q.Get("marker"))
	}
	return readQueryArgs(q, "limit", "sort_key", "sort_dir", "fields", "detail")
}
