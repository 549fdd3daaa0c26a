package httpapi

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"castiron/engine"
	"castiron/fault"
	"castiron/storage"
)

// Small microversion gates shared by several handlers (see COVERAGE.md for
// the audit of 1.1 .. 1.MaxMinor they came out of).

// provisionStateFilter is GET /v1/nodes?provision_state= (1.9): Ironic
// refuses a state its machine does not know.
func provisionStateFilter(q *storage.NodeQuery, v string) error {
	if _, ok := engine.Info(engine.State(v)); !ok {
		return errInvalid("Provision state \"%s\" is not valid", v)
	}
	q.ProvisionState = &v
	return nil
}

// validFaults is ironic/common/faults.py VALID_FAULTS.
var validFaults = []string{"power failure", "clean failure", "rescue abort failure", "service failure"}

// faultFilter is GET /v1/nodes?fault= (1.42) with Ironic's check of the value.
func faultFilter(q *storage.NodeQuery, v string) error {
	for _, f := range validFaults {
		if f == v {
			q.Fault = &v
			return nil
		}
	}
	return errInvalid("Unrecognized fault \"%s\" is specified, allowed faults are ('%s')", v, strings.Join(validFaults, "', '"))
}

// nodeNameGate answers a node addressed by name before 1.5 (logical names)
// as Ironic's get_rpc_node does: the node is not found; /validate says 406.
func nodeNameGate(path string, h handlerFunc) handlerFunc {
	if !strings.HasPrefix(path, "/nodes/{ident}") && !strings.HasPrefix(path, "/nodes/states/console/{ident}") {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		ident := r.PathValue("ident")
		if !versionOf(r).AtLeast(5) && uuid.Validate(ident) != nil {
			if strings.HasSuffix(path, "/validate") {
				return errNotAcceptable()
			}
			return fault.NodeNotFound(ident)
		}
		return h(w, r)
	}
}
