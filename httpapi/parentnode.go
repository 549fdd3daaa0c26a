package httpapi

import (
	"net/http"

	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/httpapi/identity"
	"castiron/storage"
)

// parentNodeMaxLen is Ironic's node schema limit on parent_node: a UUID,
// since the API stores the parent's UUID whatever named it.
const parentNodeMaxLen = 36

// resolveParent is Ironic's authorize_node_link for parent_node: the
// requested parent (a name or a UUID) must exist, be visible to the caller
// and have the same owner as the child (childOwner; nil is None). The
// caller stores the returned node's UUID. Every refusal is the same 400 so
// that nobody learns whether a node they cannot see exists.
func (a *API) resolveParent(r *http.Request, childOwner *string, want any) (*storage.Node, error) {
	refuse := errInvalid("Unable to apply the requested parent_node '%s'. Requested value was invalid.", pyrepr.Str(want))
	ident, ok := want.(string)
	if !ok {
		return nil, refuse // Ironic's get_rpc_node rejects a non-string
	}
	p, err := a.cond.Store().GetNode(r.Context(), ident)
	if err != nil {
		if fault.Is(err, fault.NotFound) {
			return nil, refuse
		}
		return nil, err
	}
	if id := identity.From(r.Context()); id != nil && !id.Unrestricted &&
		!a.enforcer().Allowed("baremetal:node:get", nodeTarget(p), id.Creds) {
		return nil, refuse
	}
	if !sameOwner(childOwner, p.Owner) {
		return nil, refuse
	}
	return p, nil
}

// sameOwner is Python's == on two optional owners (None == None).
func sameOwner(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// parentNodeField is node.parent_node (1.83). Ironic's node schema checks
// it ('string' or null, at most 36 characters): a POST answers the
// schema's message; a PATCH, whose value is the resolved UUID unless it
// names the node itself, answers the patch schema's.
func parentNodeField() nodeField {
	p := func(n *storage.Node) **string { return &n.ParentNode }
	value := jsonschema.Types("string", "null")
	value.MaxLength = parentNodeMaxLen
	return nodeField{"parent_node", 83, fCreate | fPatch | fFilter, value, nil,
		func(_ *viewCtx, n *storage.Node) any { return strOrNil(*p(n)) },
		setStr("parent_node", p, func(s string) (string, error) {
			if len([]rune(s)) > parentNodeMaxLen {
				return "", errInvalid("Schema error for patch: %s is too long", pyrepr.Repr(s))
			}
			return s, nil
		})}
}
