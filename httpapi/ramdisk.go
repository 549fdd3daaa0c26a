package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"castiron/engine"
	"castiron/fault"
	"castiron/pxe/boot"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// The ramdisk endpoints are public, as in Ironic (the agent has no
// credentials; the agent token guards heartbeats).
func (a *API) ramdiskRoutes() {
	a.publicRoute("GET", "/lookup", 22, a.lookup)
	a.publicRoute("POST", "/heartbeat/{ident}", 22, a.heartbeat)
	a.publicRoute("POST", "/heartbeat", 22, a.heartbeat) // node_ident in the body, as pecan reads arguments
	a.publicRoute("POST", "/continue_inspection", 1, a.continueInspection)
	a.route("GET", "/nodes/{ident}/boot_timeline", 1, a.nodeBootTimeline)
	a.route("GET", "/boot_timeline", 1, a.macBootTimeline)
	a.route("GET", "/boot_timeline/latest", 1, a.latestBootEvents)
}

// publicRoute is route without authentication.
func (a *API) publicRoute(method, path string, minMinor int, h handlerFunc) {
	wrapped := a.versionedPublic(minMinor, h)
	a.mux.Handle(method+" /v1"+path, wrapped)
}

// record notes an agent call in the boot timeline, with castiron's time
// for it since start (the handler began).
func (a *API) record(r *http.Request, start time.Time, node, mac, kind, detail string) {
	if a.opts.BootRecorder != nil {
		now := time.Now()
		a.opts.BootRecorder.Record(r.Context(), boot.Event{At: now, NodeUUID: node, MAC: mac, Kind: kind, Detail: detail, Took: now.Sub(start)})
	}
}

// lookup is GET /v1/lookup?addresses=mac,mac&node_uuid=.
func (a *API) lookup(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	q := r.URL.Query()
	var macs []string
	for _, v := range q["addresses"] {
		for _, m := range strings.Split(v, ",") {
			if mac, err := engine.NormalizeMAC(strings.TrimSpace(m)); err == nil {
				macs = append(macs, mac)
			}
		}
	}
	nodeUUID := q.Get("node_uuid")
	if nodeUUID != "" && !argUUIDLike(nodeUUID) {
		return errInvalid("Expected a UUID for node_uuid: %s", nodeUUID)
	}
	n, token, err := a.cond.AgentLookup(r.Context(), macs, nodeUUID)
	if err != nil {
		a.record(r, start, nodeUUID, strings.Join(macs, ","), boot.AgentLookup, "refused: "+err.Error())
		return err
	}
	a.record(r, start, n.UUID, strings.Join(macs, ","), boot.AgentLookup, "token issued, state "+n.ProvisionState)
	return writeJSON(w, http.StatusOK, a.lookupView(r, n, token))
}

// lookupView is Ironic's lookup answer: the node's uuid, properties and
// instance_info and driver_internal_info as every view masks them (without
// the agent token: the agent gets it in config once), and the agent
// configuration with Ironic's keys. The values are castiron's: it checks
// sha256/sha512 only (no md5), writes raw and qcow2 images, has no statsd
// or container steps.
func (a *API) lookupView(r *http.Request, n *storage.Node, token string) map[string]any {
	dii := map[string]any{}
	for k, v := range n.DriverInternalInfo {
		// The token travels once, in config.agent_token: not even its
		// mask goes along in the node.
		if k != engine.InventoryKey && k != engine.AgentTokenKey {
			dii[k] = v
		}
	}
	v := a.view(r)
	skipBMC := engine.InterfaceOf(n, "management") == "redfish"
	return map[string]any{
		"node": map[string]any{
			"uuid": n.UUID, "properties": n.Properties, "instance_info": maskInstanceInfo(n.InstanceInfo),
			"driver_internal_info": maskDictPassword(dii), "links": selfLinks(v, "nodes", n.UUID),
		},
		"config": protocol.LookupConfig{
			Metrics:          protocol.MetricsConfig{Backend: "noop", PrependHostReverse: true},
			MetricsStatsd:    protocol.StatsdConfig{Host: "localhost", Port: 8125},
			HeartbeatTimeout: 300,
			AgentContainers: protocol.ContainerConfig{Allowed: []string{}, ContainerStepsFile: "/etc/ironic-python-agent.d/mysteps.yaml",
				Runner: "podman", PullOptions: []string{}, RunOptions: []string{"--rm", "--network=host"}},
			AgentToken:            token,
			AgentTokenRequired:    true,
			PermittedImageFormats: []string{"raw", "qcow2"},
			AgentSkipBMCDetect:    skipBMC,
			TLSMinVersion:         "1.2",
		},
	}
}

// heartbeat is POST /v1/heartbeat/{ident}. The 202 carries castiron's
// instruction for the agent; Ironic's agents ignore the body.
func (a *API) heartbeat(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var hb protocol.Heartbeat
	var named struct {
		NodeIdent string `json:"node_ident"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &hb); err != nil {
			return errInvalid("Malformed heartbeat body: %v", err)
		}
		_ = json.Unmarshal(body, &named) // a non-string node_ident stays ""
	}
	ident := r.PathValue("ident")
	if ident == "" {
		ident = named.NodeIdent
		if ident == "" {
			ident = r.URL.Query().Get("node_ident")
		}
		if ident == "" {
			return errInvalid("Missing argument: \"node_ident\"")
		}
		if !argUUIDLike(ident) && !argLogicalName(ident) {
			return errInvalid("Expected UUID or name for node_ident: %s", ident)
		}
	}
	// Query parameters are Ironic's original way of sending these.
	q := r.URL.Query()
	for _, f := range []struct {
		dst *string
		key string
	}{{&hb.CallbackURL, "callback_url"}, {&hb.AgentToken, "agent_token"}, {&hb.AgentVersion, "agent_version"}, {&hb.AgentStatus, "agent_status"}, {&hb.AgentStatusMessage, "agent_status_message"}} {
		if *f.dst == "" {
			*f.dst = q.Get(f.key)
		}
	}
	v := versionOf(r)
	switch {
	case hb.AgentVersion != "" && !v.AtLeast(36):
		return errInvalid("Field \"agent_version\" not recognised")
	case (hb.AgentStatus != "" || hb.AgentStatusMessage != "") && !v.AtLeast(72):
		return errInvalid("Fields \"agent_status\" and \"agent_status_message\" not recognised.")
	case hb.AgentVerifyCA != nil && !v.AtLeast(68):
		return errInvalid("Field \"agent_verify_ca\" not recognised in this version")
	case hb.AgentToken == "":
		return errInvalid("Agent token is required for heartbeat processing.")
	case hb.AgentStatus != "" && hb.AgentStatus != "start" && hb.AgentStatus != "end" && hb.AgentStatus != "error":
		return errInvalid("Agent status is invalid. Valid states are start,end,error.")
	}
	instr, err := a.cond.AgentHeartbeat(r.Context(), ident, hb)
	detail := instr.Command
	if hb.Step != nil {
		detail += " (step " + hb.Step.ID + " " + hb.Step.Status + ")"
	}
	if err != nil {
		detail = "refused: " + err.Error()
	}
	// Routine heartbeats ("wait", a step still running) are not recorded:
	// a long image write would flood the timeline. The last one is in
	// driver_internal_info.agent_last_heartbeat.
	routine := err == nil && instr.Command == protocol.CmdWait && (hb.Step == nil || hb.Step.Status == protocol.StepRunning)
	if !routine {
		a.record(r, start, ident, "", boot.AgentBeat, detail)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, instr)
}

// continueInspection is POST /v1/continue_inspection: accepted at 1.1 (no
// version header, as ironic-inspector's clients send) and from 1.84.
func (a *API) continueInspection(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	v := versionOf(r)
	nodeUUID := r.URL.Query().Get("node_uuid")
	if (v.Minor > 1 && !v.AtLeast(84)) || (nodeUUID != "" && !v.AtLeast(84)) {
		return fault.New(fault.NotFound, "API version 1.84 or newer is required")
	}
	if nodeUUID != "" && !argUUIDLike(nodeUUID) {
		return errInvalid("Expected a UUID for node_uuid: %s", nodeUUID)
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	in, err := engine.ParseInspection(body)
	if err != nil {
		a.record(r, start, nodeUUID, "", boot.AgentInspect, "refused: "+err.Error())
		return err
	}
	in.NodeUUID, in.WantToken = nodeUUID, v.AtLeast(84)
	// The node's owner runs its inspection, as for any verb (a lone
	// conductor owns every node: no need to look the node up twice).
	if len(a.cond.AliveConductors()) > 1 {
		if n, err := a.cond.InspectionNode(r.Context(), in); err == nil && a.toOwner(w, r, n, body) {
			return nil
		}
	}
	mac := in.Data.Inventory.Boot.PXEInterface
	n, token, err := a.cond.ContinueInspection(r.Context(), in)
	if err != nil {
		a.record(r, start, nodeUUID, mac, boot.AgentInspect, "refused: "+err.Error())
		return err
	}
	a.record(r, start, n.UUID, mac, boot.AgentInspect, "inventory accepted")
	if !in.WantToken {
		return writeJSON(w, http.StatusAccepted, map[string]any{"uuid": n.UUID})
	}
	return writeJSON(w, http.StatusAccepted, a.lookupView(r, n, token))
}

// nodeBootTimeline is GET /v1/nodes/{ident}/boot_timeline (castiron): what
// the node did on the provisioning network, oldest first, including the
// events of its MACs from before it was known.
func (a *API) nodeBootTimeline(w http.ResponseWriter, r *http.Request) error {
	n, err := a.cond.Store().GetNode(r.Context(), r.PathValue("ident"))
	if err != nil {
		return err
	}
	ports, err := a.cond.Store().ListPorts(r.Context(), storage.PortQuery{NodeUUID: &n.UUID})
	if err != nil {
		return err
	}
	q := storage.BootEventQuery{NodeUUID: n.UUID}
	for _, p := range ports {
		q.MACs = append(q.MACs, p.Address)
	}
	return a.writeTimeline(w, r, q)
}

// macBootTimeline is GET /v1/boot_timeline?mac=aa:bb:.. (castiron), for
// machines no node owns yet.
func (a *API) macBootTimeline(w http.ResponseWriter, r *http.Request) error {
	var q storage.BootEventQuery
	for _, v := range r.URL.Query()["mac"] {
		mac, err := engine.NormalizeMAC(v)
		if err != nil {
			return err
		}
		q.MACs = append(q.MACs, mac)
	}
	if len(q.MACs) == 0 {
		return errInvalid("The 'mac' query parameter is required.")
	}
	return a.writeTimeline(w, r, q)
}

// latestBootEvents is GET /v1/boot_timeline/latest?since= (castiron): each
// node's newest boot event (default: of the last hour), for the UI's fleet
// list, which shows where each booting node is now. A castiron-only path,
// so Ironic's node views keep their exact fields.
func (a *API) latestBootEvents(w http.ResponseWriter, r *http.Request) error {
	since := time.Now().Add(-time.Hour)
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return errInvalid("Invalid 'since': %s (RFC 3339 expected)", s)
		}
		since = t
	}
	evs, err := a.cond.Store().LatestBootEvents(r.Context(), since)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(evs))
	for _, e := range evs {
		out = append(out, map[string]any{"at": ironicTime(e.At), "mac": e.MAC, "node_uuid": e.NodeUUID, "event": e.Kind, "detail": e.Detail})
	}
	return writeJSON(w, http.StatusOK, map[string]any{"nodes": out})
}

func (a *API) writeTimeline(w http.ResponseWriter, r *http.Request, q storage.BootEventQuery) error {
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return errInvalid("Invalid 'since': %s (RFC 3339 expected)", s)
		}
		q.Since = t
	}
	evs, err := a.cond.Store().ListBootEvents(r.Context(), q)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(evs))
	for _, e := range evs {
		out = append(out, map[string]any{"at": ironicTime(e.At), "mac": e.MAC, "node_uuid": strOrNil(nonEmpty(e.NodeUUID)), "event": e.Kind, "detail": e.Detail})
	}
	return writeJSON(w, http.StatusOK, map[string]any{"events": out})
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
