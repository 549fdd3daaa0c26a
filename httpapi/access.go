package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"castiron/fault"
	"castiron/httpapi/identity"
	"castiron/httpapi/policy"
	"castiron/storage"
)

// Policy enforcement in Ironic's order (ironic/api/controllers/v1/utils.py):
// a route's object is found first (404 when it does not exist), then the
// caller must be allowed to see it (baremetal:node:get on its node, else
// 404 as if it did not exist), then the route's own rule (else 403). Lists
// fall back from <kind>:list_all to <kind>:list restricted to the caller's
// project (the nodes it owns or leases). The table of which rule guards
// which route is access_routes.go.

// guard wraps a route's handler with its policy (access_routes.go); the
// handler runs unchanged for noauth and unrestricted callers.
func (a *API) guard(method, path string, h handlerFunc) handlerFunc {
	a.routeKeys = append(a.routeKeys, method+" "+path)
	acc, known := routeAccess[method+" "+path]
	return func(w http.ResponseWriter, r *http.Request) error {
		id := identity.From(r.Context())
		if id == nil || id.Unrestricted || (acc.since > 0 && !versionOf(r).AtLeast(acc.since)) {
			return h(w, r)
		}
		if !known {
			// A route without a policy row is refused, never open; the
			// route table's test names it.
			return fault.New(fault.Forbidden, "Access was denied to the following resource: %s %s", method, path)
		}
		r2, err := a.enforce(r, id, acc)
		if err != nil {
			return err
		}
		return h(w, r2)
	}
}

// enforcer is the effective policy (the defaults unless Options.Policy).
func (a *API) enforcer() *policy.Enforcer {
	if a.opts.Policy != nil {
		return a.opts.Policy
	}
	return defaultPolicy()
}

// forbidden is Ironic's HTTPForbidden for a refused rule; a token of the
// wrong scope is refused the same way (oslo.policy's InvalidScope, which
// Ironic does not map, would be a 500).
func forbidden(err error) error {
	var d *policy.Denied
	if errors.As(err, &d) {
		return fault.New(fault.Forbidden, "Access was denied to the following resource: %s", d.Rule)
	}
	return err
}

// nodeTarget is check_owner_policy's target for a node: its owner always
// (None when unset), its lessee only when set.
func nodeTarget(n *storage.Node) policy.Target {
	t := policy.Target{"node.owner": strOrNil(n.Owner)}
	if n.Lessee != nil && *n.Lessee != "" {
		t["node.lessee"] = *n.Lessee
	}
	return t
}

// childTarget is check_port_policy_and_retrieve's target: the node's owner
// and lessee, both always present (None when unset or no node).
func childTarget(n *storage.Node) policy.Target {
	if n == nil {
		return policy.Target{"node.owner": nil, "node.lessee": nil}
	}
	return policy.Target{"node.owner": strOrNil(n.Owner), "node.lessee": strOrNil(n.Lessee)}
}

type listScopeKey struct{}
type forcedOwnerKey struct{}

// listProject is the project a list is restricted to (nil: everything the
// query asks for).
func listProject(r *http.Request) *string {
	p, _ := r.Context().Value(listScopeKey{}).(*string)
	return p
}

// forcedOwner is the owner a project-scoped creator's node or allocation
// gets (nil: as the body says).
func forcedOwner(r *http.Request) *string {
	p, _ := r.Context().Value(forcedOwnerKey{}).(*string)
	return p
}

func withValue(r *http.Request, k, v any) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), k, v))
}

// enforce applies acc for id; it returns the request the handler gets
// (with a list restriction or a forced owner) or the refusal.
func (a *API) enforce(r *http.Request, id *identity.Identity, acc access) (*http.Request, error) {
	e := a.enforcer()
	c := id.Creds
	store := a.cond.Store()
	ctx := r.Context()
	switch acc.on {
	case onAnyone:
		return r, nil
	case onCreds:
		return r, forbidden(e.Authorize(acc.rule, nil, c))

	case onNode, onNodePatch, onNodeDelete, onNodeProvision:
		n, err := lookupWithSuffix(r, r.PathValue(acc.param), store.GetNode)
		if err != nil {
			return r, passNotFound(err) // the handler answers its own 404
		}
		rules := []string{acc.rule}
		switch acc.on {
		case onNodePatch:
			// A patch that does not parse keeps the generic rule: the
			// handler then answers its 400 to whoever may update.
			if pr, err := nodePatchRules(r); err == nil {
				rules = pr
			}
		case onNodeProvision:
			if extra, err := provisionRules(r); err == nil {
				rules = append(rules, extra...)
			}
		}
		t := nodeTarget(n)
		if !e.Allowed("baremetal:node:get", t, c) {
			return r, fault.NodeNotFound(r.PathValue(acc.param))
		}
		for i, rule := range rules {
			err := e.Authorize(rule, t, c)
			if err != nil && i == 0 && acc.on == onNodeDelete {
				// Ironic's project_admin_can_manage_own_nodes (default on).
				err = e.Authorize("baremetal:node:delete:self_owned_node", t, c)
			}
			if err != nil {
				return r, forbidden(err)
			}
		}
		return r, nil

	case onNodeCreate:
		// project_admin_can_manage_own_nodes: a project admin may create
		// nodes its project owns.
		if e.Allowed("baremetal:node:create:self_owned_node", nil, c) {
			if c.System {
				return r, nil
			}
			body, err := peekJSON(r)
			if err != nil {
				// Unreadable: only a full node:create may go on to the
				// handler's 400.
				return r, forbidden(e.Authorize("baremetal:node:create", nil, c))
			}
			if o, ok := body["owner"].(string); ok && o != "" && o != c.ProjectID {
				return r, errInvalid("Cannot create a node as a project scoped admin with an owner other than your own project.")
			}
			p := c.ProjectID
			return withValue(r, forcedOwnerKey{}, &p), nil
		}
		return r, forbidden(e.Authorize("baremetal:node:create", nil, c))

	case onNodeList:
		p, err := listScope(e, c, "node", r.URL.Query().Get("project"))
		if err != nil {
			return r, err
		}
		return withValue(r, listScopeKey{}, p), nil

	case onPortList, onPortgroupList, onVolumeList:
		kind := map[target]string{onPortList: "port", onPortgroupList: "portgroup", onVolumeList: "volume"}[acc.on]
		if acc.param != "" {
			// Under a node (or a portgroup): the caller must see the node.
			var n *storage.Node
			var err error
			if acc.param == "portgroup" {
				pg, perr := store.GetPortgroup(ctx, r.PathValue("portgroup"))
				if perr != nil {
					return r, passNotFound(perr)
				}
				n, err = store.GetNode(ctx, pg.NodeUUID)
				if err == nil && !e.Allowed("baremetal:node:get", nodeTarget(n), c) {
					return r, fault.New(fault.NotFound, "Portgroup %s could not be found.", r.PathValue("portgroup"))
				}
			} else {
				n, err = lookupWithSuffix(r, r.PathValue(acc.param), store.GetNode)
				if err == nil && !e.Allowed("baremetal:node:get", nodeTarget(n), c) {
					return r, fault.NodeNotFound(r.PathValue(acc.param))
				}
			}
			if err != nil {
				return r, passNotFound(err)
			}
		}
		p, err := listScope(e, c, kind, "")
		if err != nil {
			return r, err
		}
		return withValue(r, listScopeKey{}, p), nil

	case onPort, onPortgroup, onVolumeConnector, onVolumeTarget:
		ident := r.PathValue(acc.param)
		var nodeUUID, what string
		switch acc.on {
		case onPort:
			p, err := store.GetPort(ctx, ident)
			if err != nil {
				return r, passNotFound(err)
			}
			nodeUUID, what = p.NodeUUID, "Port %s could not be found."
		case onPortgroup:
			pg, err := store.GetPortgroup(ctx, ident)
			if err != nil {
				return r, passNotFound(err)
			}
			nodeUUID, what = pg.NodeUUID, "Portgroup %s could not be found."
		case onVolumeConnector:
			v, err := store.GetVolumeConnector(ctx, ident)
			if err != nil {
				return r, passNotFound(err)
			}
			nodeUUID, what = v.NodeUUID, "Volume connector %s could not be found."
		default:
			v, err := store.GetVolumeTarget(ctx, ident)
			if err != nil {
				return r, passNotFound(err)
			}
			nodeUUID, what = v.NodeUUID, "Volume target %s could not be found."
		}
		n, err := store.GetNode(ctx, nodeUUID)
		if err != nil {
			n = nil
		}
		t := childTarget(n)
		if !e.Allowed("baremetal:node:get", t, c) {
			return r, fault.New(fault.NotFound, what, ident)
		}
		return r, forbidden(e.Authorize(acc.rule, t, c))

	case onChildCreate:
		// POST /ports, /portgroups, /volume/...: the rule on the node the
		// body names, 403 when refused (Ironic does not conceal it).
		// A body that does not parse or names no known node is judged as
		// a node nobody owns (system callers then get the handler's 400).
		body, _ := peekJSON(r)
		ident, _ := body["node_uuid"].(string)
		if ident == "" {
			ident, _ = body["node_id"].(string)
		}
		n, err := store.GetNode(ctx, ident)
		if err != nil {
			if passNotFound(err) != nil {
				return r, err
			}
			return r, forbidden(e.Authorize(acc.rule, childTarget(nil), c))
		}
		return r, forbidden(e.Authorize(acc.rule, nodeTarget(n), c))

	case onAllocation:
		al, err := store.GetAllocation(ctx, r.PathValue(acc.param))
		if err != nil {
			return r, passNotFound(err)
		}
		t := policy.Target{"allocation.owner": strOrNil(al.Owner)}
		if !e.Allowed("baremetal:allocation:get", t, c) {
			return r, fault.New(fault.NotFound, "Allocation %s could not be found.", r.PathValue(acc.param))
		}
		return r, forbidden(e.Authorize(acc.rule, t, c))

	case onRunbook:
		rb, err := store.GetRunbook(ctx, r.PathValue(acc.param))
		if err != nil {
			return r, passNotFound(err)
		}
		t := policy.Target{"runbook.owner": strOrNil(rb.Owner)}
		rules := []string{acc.rule}
		if r.Method == http.MethodPatch {
			rules = runbookPatchRules(r)
		}
		for _, rule := range rules {
			err := e.Authorize(rule, t, c)
			if err != nil && rule == "baremetal:runbook:get" && rb.Public && !strings.HasSuffix(r.URL.Path, "/traits") {
				err = nil // check_and_retrieve_public_runbook
			}
			if err != nil {
				return r, forbidden(err)
			}
		}
		return r, nil

	case onRunbookList:
		// project is an args.boolean there: a project caller's true is an
		// owner other than its project, refused as such.
		requested := ""
		if b, err := parseBoolString(strings.TrimSpace(r.URL.Query().Get("project"))); err == nil && b {
			requested = "True"
		}
		p, err := listScope(e, c, "runbook", requested)
		if err != nil {
			return r, err
		}
		return withValue(r, listScopeKey{}, p), nil

	case onAllocationList:
		p, err := listScope(e, c, "allocation", r.URL.Query().Get("owner"))
		if err != nil {
			return r, err
		}
		return withValue(r, listScopeKey{}, p), nil

	case onAllocationCreate:
		if e.Allowed("baremetal:allocation:create", nil, c) && e.Allowed("baremetal:allocation:create_restricted", nil, c) {
			return r, nil
		}
		// Ironic's _authorize_create_allocation: a project member's
		// allocation is its project's.
		body, err := peekJSON(r)
		if err != nil {
			return r, forbidden(&policy.Denied{Rule: "baremetal:allocation:create_restricted"})
		}
		if err := e.Authorize("baremetal:allocation:create", nil, c); err != nil {
			return r, forbidden(err)
		}
		if o, ok := body["owner"].(string); ok && o != "" && c.ProjectID != "" && o != c.ProjectID {
			return r, forbidden(&policy.Denied{Rule: "baremetal:allocation:create_restricted"})
		}
		if c.ProjectID == "" {
			return r, forbidden(e.Authorize("baremetal:allocation:create_restricted", nil, c))
		}
		p := c.ProjectID
		return withValue(r, forcedOwnerKey{}, &p), nil
	}
	return r, fault.New(fault.Forbidden, "Access was denied to the following resource: %s", acc.rule)
}

// passNotFound is nil for an object that does not exist (or an ident that
// is not one), which the handler then answers itself; any other failure to
// read it is returned, so policy is never skipped.
func passNotFound(err error) error {
	if fault.Is(err, fault.NotFound) || fault.Is(err, fault.Invalid) {
		return nil
	}
	return err
}

// listScope is check_list_policy: everything with <kind>:list_all, else
// the caller's project with <kind>:list; asking for another project's
// objects is refused.
func listScope(e *policy.Enforcer, c policy.Creds, kind, requested string) (*string, error) {
	all := e.Authorize("baremetal:"+kind+":list_all", nil, c)
	if all == nil {
		return nil, nil
	}
	p := c.ProjectID
	if p == "" || (requested != "" && requested != p) {
		return nil, forbidden(all)
	}
	if err := e.Authorize("baremetal:"+kind+":list", nil, c); err != nil {
		return nil, forbidden(err)
	}
	return &p, nil
}

// hidesTargetProperties reports whether the caller is refused
// baremetal:volume:view_target_properties (volume targets' properties are
// then replaced by Ironic's notice).
func (a *API) hidesTargetProperties(r *http.Request) bool {
	id := identity.From(r.Context())
	return id != nil && !id.Unrestricted && !a.enforcer().Allowed("baremetal:volume:view_target_properties", nil, id.Creds)
}

// secretsShown is node_sanitize's show_password and show_instance_secrets
// for the caller (by default "!": secrets are masked for everyone). As in
// Ironic they are checked under every auth strategy, noauth included (the
// caller then has no roles), and once per caller, as Ironic does for node
// lists: a rule naming %(node.owner)s is judged without the node.
func (a *API) secretsShown(r *http.Request) (driver, instance bool) {
	e := a.enforcer()
	if e.Never("show_password") && e.Never("show_instance_secrets") {
		return false, false
	}
	var c policy.Creds
	if id := identity.From(r.Context()); id != nil {
		c = id.Creds
	}
	return e.Allowed("show_password", nil, c), e.Allowed("show_instance_secrets", nil, c)
}

// nodeRedactor is node_sanitize's extended sanitization for callers that
// do not pass baremetal:node:get:filter_threshold (project-scoped users):
// last_error, reservation, driver_internal_info and (for those without
// baremetal:node:get:driver_info, such as lessees) driver_info are replaced
// by Ironic's notices. Nil when the caller sees nodes whole.
func (a *API) nodeRedactor(r *http.Request) func(*storage.Node) *storage.Node {
	id := identity.From(r.Context())
	if id == nil || id.Unrestricted {
		return nil
	}
	e := a.enforcer()
	if e.Allowed("baremetal:node:get:filter_threshold", nil, id.Creds) {
		return nil
	}
	return func(n *storage.Node) *storage.Node {
		t := policy.Target{}
		if n.Owner != nil && *n.Owner != "" {
			t["node.owner"] = *n.Owner
		}
		if n.Lessee != nil && *n.Lessee != "" {
			t["node.lessee"] = *n.Lessee
		}
		c := *n
		if !e.Allowed("baremetal:node:get:last_error", t, id.Creds) {
			s := "** Value Redacted - Requires baremetal:node:get:last_error permission. **"
			c.LastError = &s
		}
		if !e.Allowed("baremetal:node:get:reservation", t, id.Creds) {
			s := "** Redacted - requires baremetal:node:get:reservation permission. **"
			c.Reservation = &s
		}
		if !e.Allowed("baremetal:node:get:driver_internal_info", t, id.Creds) {
			c.DriverInternalInfo = storage.JSONObject{"content": "** Redacted - Requires baremetal:node:get:driver_internal_info permission. **"}
		}
		if !e.Allowed("baremetal:node:get:driver_info", t, id.Creds) {
			c.DriverInfo = storage.JSONObject{"content": "** Redacted - requires baremetal:node:get:driver_info permission. **"}
		}
		return &c
	}
}

// Caller is what the web UI learns about who it is serving.
type Caller struct {
	// Auth is the strategy: noauth, http_basic or keystone.
	Auth    string   `json:"auth"`
	User    string   `json:"user"`
	Scope   string   `json:"scope"` // system, project or domain; "" without roles
	Project string   `json:"project,omitempty"`
	Roles   []string `json:"roles"`
	// ReadOnly: policy would refuse this caller every change to any node
	// (provision, power, maintenance, update, create), so the UI offers
	// none.
	ReadOnly bool `json:"read_only"`
	// Can maps each node action the UI offers (uiActions) to the nodes
	// policy lets the caller do it on, by how its project relates to the
	// node: "owner" (its project owns it), "lessee" (leases it), "other"
	// (neither: for a system caller, any node). "create" is node creation
	// (import), judged on the caller alone. Absent (noauth, or an
	// http_basic user without a users file): everything.
	Can map[string][]string `json:"can,omitempty"`
}

// writeRules are the node changes the UI offers.
var writeRules = []string{"baremetal:node:set_provision_state", "baremetal:node:set_power_state",
	"baremetal:node:set_maintenance", "baremetal:node:update"}

// uiActions are the UI's node actions with the rules Ironic checks for
// them (any one suffices; delete:self_owned_node is Ironic's
// project_admin_can_manage_own_nodes).
var uiActions = map[string][]string{
	"provision":       {"baremetal:node:set_provision_state"},
	"power":           {"baremetal:node:set_power_state"},
	"maintenance on":  {"baremetal:node:set_maintenance"},
	"maintenance off": {"baremetal:node:clear_maintenance"},
	"delete":          {"baremetal:node:delete", "baremetal:node:delete:self_owned_node"},
}

// authName is the --auth-strategy auth amounts to.
func authName(auth Authenticator) string {
	switch {
	case auth == nil:
		return "noauth"
	case strings.HasPrefix(challenge(auth), "Keystone"):
		return "keystone"
	}
	return "http_basic"
}

// TokenAuth reports whether auth takes Keystone tokens (X-Auth-Token)
// rather than Basic credentials: a browser then cannot be challenged for
// them, so the UI asks for a token in the page.
func TokenAuth(auth Authenticator) bool { return auth != nil && authName(auth) == "keystone" }

// CallerOf authenticates r with auth (nil: noauth) and says what policy
// (nil: Ironic's defaults) lets it change: ReadOnly when no node, even
// one its project owned and leased, could be changed by it.
func CallerOf(auth Authenticator, pol *policy.Enforcer, r *http.Request) (Caller, error) {
	if auth == nil {
		return Caller{Auth: "noauth", Roles: []string{}}, nil
	}
	id, err := identify(auth, r)
	if err != nil {
		return Caller{}, err
	}
	c := Caller{Auth: authName(auth), User: id.User, Roles: append([]string{}, id.Roles...)}
	if id.Unrestricted {
		return c, nil
	}
	if pol == nil {
		pol = defaultPolicy()
	}
	c.Scope, c.Project = id.Scope(), id.ProjectID
	best := policy.Target{"node.owner": nil}
	if id.ProjectID != "" {
		best = policy.Target{"node.owner": id.ProjectID, "node.lessee": id.ProjectID}
	}
	c.ReadOnly = !pol.Allowed("baremetal:node:create", nil, id.Creds) && !pol.Allowed("baremetal:node:create:self_owned_node", nil, id.Creds)
	for _, rule := range writeRules {
		if pol.Allowed(rule, best, id.Creds) {
			c.ReadOnly = false
		}
	}
	targets := map[string]policy.Target{"other": {"node.owner": nil}}
	if id.ProjectID != "" {
		targets["owner"] = policy.Target{"node.owner": id.ProjectID}
		targets["lessee"] = policy.Target{"node.owner": nil, "node.lessee": id.ProjectID}
	}
	c.Can = map[string][]string{"create": {}}
	if pol.Allowed("baremetal:node:create", nil, id.Creds) || pol.Allowed("baremetal:node:create:self_owned_node", nil, id.Creds) {
		c.Can["create"] = []string{"other"}
	}
	for action, rules := range uiActions {
		c.Can[action] = []string{}
		for _, rel := range []string{"owner", "lessee", "other"} {
			t, ok := targets[rel]
			if !ok {
				continue
			}
			if slices.ContainsFunc(rules, func(rule string) bool { return pol.Allowed(rule, t, id.Creds) }) {
				c.Can[action] = append(c.Can[action], rel)
			}
		}
	}
	return c, nil
}
