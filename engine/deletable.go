package engine

import "slices"

// Deletable reports whether a node in s may be deleted without maintenance
// mode (Ironic's DELETE_ALLOWED_STATES plus available); the web UI offers
// "delete" from it.
func Deletable(s State) bool { return slices.Contains(deletableStates, s) }
