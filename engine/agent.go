package engine

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"castiron/fault"
	"castiron/storage"
)

// Keys castiron keeps in driver_internal_info for the ramdisk agent.
// AgentTokenKey is the driver_internal_info key of the per-boot agent
// secret (Ironic's name).
const AgentTokenKey = diiAgentToken

const (
	// diiAgentToken is Ironic's name for the per-boot agent secret.
	diiAgentToken = "agent_secret_token"
	// diiLastHeartbeat is Ironic's agent_last_heartbeat.
	diiLastHeartbeat = "agent_last_heartbeat"
	diiAgentVersion  = "agent_version"
)

// lookupAllowed is Ironic's LOOKUP_ALLOWED_STATES: a ramdisk may look itself
// up only while the node is booting or running it.
var lookupAllowed = map[State]bool{
	Deploying: true, DeployWait: true, Cleaning: true, CleanWait: true,
	Inspecting: true, InspectWait: true, Rescuing: true, RescueWait: true,
	ServiceWait: true,
}

// errAgentNotFound is Ironic's deliberately vague lookup failure: a ramdisk
// learns nothing about which nodes exist.
func errAgentNotFound() error { return fault.New(fault.NotFound, "Resource could not be found.") }

// AgentLookup is GET /v1/lookup: the node the ramdisk runs on, found by
// node_uuid or by its MACs, with a fresh agent token. The token is issued
// once per boot (Ironic's get_node_with_token); a second lookup gets 409.
func (c *Conductor) AgentLookup(ctx context.Context, macs []string, nodeUUID string) (n *storage.Node, token string, err error) {
	defer func() { c.obs.AgentCall("lookup", resultLabel(err)) }()
	if len(macs) == 0 && nodeUUID == "" {
		return nil, "", fault.New(fault.Invalid, "Incomplete lookup request: at least one of node_uuid or addresses is required.")
	}
	if nodeUUID != "" {
		n, err = c.store.GetNode(ctx, nodeUUID)
	} else {
		n, err = c.nodeByMACs(ctx, macs)
	}
	if err != nil {
		if fault.Is(err, fault.NotFound) {
			return nil, "", errAgentNotFound()
		}
		return nil, "", err
	}
	if !lookupAllowed[State(n.ProvisionState)] {
		c.log.WarnContext(ctx, "agent lookup refused", "node", n.UUID, "state", n.ProvisionState)
		return nil, "", errAgentNotFound()
	}
	return c.issueToken(ctx, n.UUID)
}

// WithheldToken is what a lookup answers in place of the agent token when
// one was already issued for this boot (Ironic's get_node_with_token): the
// agent that has it keeps it, a second one cannot heartbeat.
const WithheldToken = "******"

// issueToken stores a new agent token on the node unless one is there, in
// which case the answer carries WithheldToken.
func (c *Conductor) issueToken(ctx context.Context, uuid string) (*storage.Node, string, error) {
	token, err := newToken()
	if err != nil {
		return nil, "", err
	}
	issued := true
	n, err := c.store.UpdateNode(ctx, uuid, func(n *storage.Node) (*storage.Event, error) {
		if t, _ := n.DriverInternalInfo[diiAgentToken].(string); t != "" {
			issued = false
			return nil, nil
		}
		n.DriverInternalInfo[diiAgentToken] = token
		return nil, nil
	})
	if err != nil {
		return nil, "", err
	}
	if !issued {
		c.log.WarnContext(ctx, "agent token already issued; the lookup gets it withheld", "node", n.UUID, "state", n.ProvisionState)
		return n, WithheldToken, nil
	}
	return n, token, nil
}

func newToken() (string, error) {
	b := make([]byte, 48)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("agent token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// tokenValid compares in constant time.
func tokenValid(n *storage.Node, token string) bool {
	want, _ := n.DriverInternalInfo[diiAgentToken].(string)
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}

// wipeToken forgets the agent of the previous boot (Ironic wipes the token
// whenever the node is powered off or rebooted into something else).
func wipeToken(n *storage.Node) {
	delete(n.DriverInternalInfo, diiAgentToken)
	delete(n.DriverInternalInfo, diiLastHeartbeat)
}

// nodeByMACs finds the one node owning any of macs through its ports.
func (c *Conductor) nodeByMACs(ctx context.Context, macs []string) (*storage.Node, error) {
	var found string
	for _, m := range macs {
		p, err := c.store.GetPortByAddress(ctx, strings.ToLower(m))
		if fault.Is(err, fault.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if found != "" && found != p.NodeUUID {
			c.log.WarnContext(ctx, "agent MACs belong to several nodes", "macs", macs)
			return nil, errAgentNotFound()
		}
		found = p.NodeUUID
	}
	if found == "" {
		return nil, errAgentNotFound()
	}
	return c.store.GetNode(ctx, found)
}
