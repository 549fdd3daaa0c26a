package engine

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// State is a provision state, spelled exactly as Ironic spells it on the wire.
type State string

// Ironic's provision states (ironic/common/states.py).
const (
	Enroll        State = "enroll"
	Verifying     State = "verifying"
	Manageable    State = "manageable"
	Inspecting    State = "inspecting"
	InspectWait   State = "inspect wait"
	InspectFail   State = "inspect failed"
	Cleaning      State = "cleaning"
	CleanWait     State = "clean wait"
	CleanHold     State = "clean hold"
	CleanFail     State = "clean failed"
	Available     State = "available"
	Deploying     State = "deploying"
	DeployWait    State = "wait call-back"
	DeployHold    State = "deploy hold"
	DeployFail    State = "deploy failed"
	Active        State = "active"
	Deleting      State = "deleting"
	Error         State = "error"
	Adopting      State = "adopting"
	AdoptFail     State = "adopt failed"
	Rescuing      State = "rescuing"
	RescueWait    State = "rescue wait"
	Rescue        State = "rescue"
	RescueFail    State = "rescue failed"
	Unrescuing    State = "unrescuing"
	UnrescueFail  State = "unrescue failed"
	Servicing     State = "servicing"
	ServiceWait   State = "service wait"
	ServiceHold   State = "service hold"
	ServiceFail   State = "service failed"
	noTargetState State = ""
)

// Event is what moves the machine: an API verb or a conductor-internal event.
type Event string

// API verbs (after mapping the API target through verbs) and internal events.
const (
	EvManage   Event = "manage"
	EvProvide  Event = "provide"
	EvInspect  Event = "inspect"
	EvClean    Event = "clean"
	EvDeploy   Event = "deploy"
	EvRebuild  Event = "rebuild"
	EvDelete   Event = "delete"
	EvAbort    Event = "abort"
	EvAdopt    Event = "adopt"
	EvRescue   Event = "rescue"
	EvUnrescue Event = "unrescue"
	EvUnhold   Event = "unhold"
	EvService  Event = "service"

	EvDone   Event = "done"
	EvFail   Event = "fail"
	EvWait   Event = "wait"
	EvResume Event = "resume"
	EvHold   Event = "hold"
)

// verbs maps the "target" of PUT /states/provision to the machine's event, as
// Ironic's states.VERBS does; "rebuild" passes through unchanged.
var verbs = map[string]Event{
	"active":   EvDeploy,
	"deploy":   EvDeploy,
	"deleted":  EvDelete,
	"undeploy": EvDelete,
	"manage":   EvManage,
	"provide":  EvProvide,
	"inspect":  EvInspect,
	"abort":    EvAbort,
	"clean":    EvClean,
	"adopt":    EvAdopt,
	"rescue":   EvRescue,
	"unrescue": EvUnrescue,
	"unhold":   EvUnhold,
	"service":  EvService,
	"rebuild":  EvRebuild,
}

// verbMinVersion is the microversion each API target needs (Ironic's
// MIN_VERB_VERSIONS plus unhold 1.85 and service 1.87).
var verbMinVersion = map[string]int{
	"manage": 4, "provide": 4, "inspect": 6, "abort": 13, "clean": 15,
	"adopt": 17, "rescue": 38, "unrescue": 38, "deploy": 73, "undeploy": 73,
	"unhold": 85, "service": 87,
}

// StateInfo describes one state.
type StateInfo struct {
	// Stable states change only on request.
	Stable bool
	// Target is the target_provision_state shown while the node is here.
	Target State
	// Failure marks the *failed states.
	Failure bool
	// WaitsForCallback marks states that wait for the ramdisk (they carry a
	// deadline, survive a restart and time out to Fail).
	WaitsForCallback bool
	// StuckFails marks states whose work cannot resume after a conductor dies:
	// restart recovery fires EvFail on them (Ironic's STUCK_STATES_TREATED_AS_FAIL).
	StuckFails bool
}

// Transition is one edge of the machine.
type Transition struct {
	From  State
	Event Event
	To    State
}

// states is every state with its attributes (ironic/common/state_machine.py).
var states = map[State]StateInfo{
	Enroll:       {Stable: true},
	Manageable:   {Stable: true},
	Available:    {Stable: true},
	Active:       {Stable: true},
	Error:        {Stable: true},
	Rescue:       {Stable: true},
	Verifying:    {Target: Manageable, StuckFails: true},
	Deploying:    {Target: Active, StuckFails: true},
	DeployWait:   {Target: Active, WaitsForCallback: true},
	DeployFail:   {Target: Active, Failure: true},
	DeployHold:   {Target: Active},
	Cleaning:     {Target: Available, StuckFails: true},
	CleanWait:    {Target: Available, WaitsForCallback: true},
	CleanFail:    {Target: Available, Failure: true},
	CleanHold:    {Target: Available},
	Deleting:     {Target: Available, StuckFails: true},
	Inspecting:   {Target: Manageable, StuckFails: true},
	InspectFail:  {Target: Manageable, Failure: true},
	InspectWait:  {Target: Manageable, WaitsForCallback: true},
	Adopting:     {Target: Active, StuckFails: true},
	AdoptFail:    {Target: Active, Failure: true},
	Rescuing:     {Target: Rescue, StuckFails: true},
	RescueWait:   {Target: Rescue, WaitsForCallback: true},
	RescueFail:   {Target: Rescue, Failure: true},
	Unrescuing:   {Target: Active, StuckFails: true},
	UnrescueFail: {Target: Active, Failure: true},
	Servicing:    {Target: Active, StuckFails: true},
	ServiceWait:  {Target: Active, WaitsForCallback: true},
	ServiceFail:  {Target: Active, Failure: true},
	ServiceHold:  {Target: Active},
}

// machine is the provision state machine: the single source of truth for
// validation, the generated diagram and the edge-walking tests. Order follows
// Ironic's state_machine.py.
var machine = []Transition{
	{Available, EvDeploy, Deploying},
	{Deploying, EvFail, DeployFail},
	{DeployFail, EvRebuild, Deploying},
	{DeployFail, EvDeploy, Deploying},
	{Deploying, EvWait, DeployWait},
	{Deploying, EvHold, DeployHold},
	{DeployWait, EvHold, DeployHold},
	{DeployWait, EvResume, Deploying},
	{DeployWait, EvFail, DeployFail},
	{DeployHold, EvUnhold, DeployWait},
	{DeployHold, EvAbort, DeployFail},
	{DeployWait, EvAbort, DeployFail},
	{Deploying, EvDone, Active},
	{Active, EvRebuild, Deploying},
	{Active, EvDelete, Deleting},
	{DeployWait, EvDelete, Deleting},
	{DeployFail, EvDelete, Deleting},
	{Deleting, EvFail, Error},
	{Deleting, EvClean, Cleaning},
	{Cleaning, EvDone, Available},
	{Cleaning, EvFail, CleanFail},
	{CleanWait, EvFail, CleanFail},
	{CleanWait, EvAbort, CleanFail},
	{Cleaning, EvWait, CleanWait},
	{Cleaning, EvHold, CleanHold},
	{CleanWait, EvHold, CleanHold},
	{CleanWait, EvResume, Cleaning},
	{CleanHold, EvAbort, CleanFail},
	{CleanHold, EvUnhold, CleanWait},
	{CleanFail, EvManage, Manageable},
	{Manageable, EvProvide, Cleaning},
	{Manageable, EvClean, Cleaning},
	{Cleaning, EvManage, Manageable},
	{Available, EvManage, Manageable},
	{Error, EvRebuild, Deploying},
	{Error, EvDelete, Deleting},
	{Manageable, EvInspect, Inspecting},
	{Inspecting, EvDone, Manageable},
	{Inspecting, EvFail, InspectFail},
	{Inspecting, EvWait, InspectWait},
	{InspectWait, EvDone, Manageable},
	{InspectWait, EvFail, InspectFail},
	{InspectWait, EvAbort, InspectFail},
	{InspectWait, EvResume, Inspecting},
	{InspectFail, EvManage, Manageable},
	{InspectFail, EvInspect, Inspecting},
	{Active, EvRescue, Rescuing},
	{Rescuing, EvDone, Rescue},
	{Rescuing, EvWait, RescueWait},
	{RescueWait, EvResume, Rescuing},
	{Rescue, EvRescue, Rescuing},
	{Rescue, EvDelete, Deleting},
	{RescueWait, EvFail, RescueFail},
	{Rescuing, EvFail, RescueFail},
	{RescueWait, EvAbort, RescueFail},
	{RescueFail, EvRescue, Rescuing},
	{RescueFail, EvUnrescue, Unrescuing},
	{RescueFail, EvDelete, Deleting},
	{RescueWait, EvDelete, Deleting},
	{Rescue, EvUnrescue, Unrescuing},
	{Unrescuing, EvDone, Active},
	{Unrescuing, EvFail, UnrescueFail},
	{UnrescueFail, EvRescue, Rescuing},
	{UnrescueFail, EvUnrescue, Unrescuing},
	{UnrescueFail, EvDelete, Deleting},
	{Enroll, EvManage, Verifying},
	{Verifying, EvDone, Manageable},
	{Verifying, EvFail, Enroll},
	{Manageable, EvAdopt, Adopting},
	{Adopting, EvDone, Active},
	{Adopting, EvFail, AdoptFail},
	{AdoptFail, EvAdopt, Adopting},
	{AdoptFail, EvManage, Manageable},
	{Servicing, EvDone, Active},
	{Active, EvService, Servicing},
	{Servicing, EvFail, ServiceFail},
	{Servicing, EvWait, ServiceWait},
	{Servicing, EvHold, ServiceHold},
	{ServiceWait, EvHold, ServiceHold},
	{ServiceHold, EvService, Servicing},
	{ServiceHold, EvUnhold, ServiceWait},
	{ServiceWait, EvResume, Servicing},
	{ServiceWait, EvFail, ServiceFail},
	{ServiceHold, EvFail, ServiceFail},
	{ServiceWait, EvAbort, ServiceFail},
	{ServiceHold, EvAbort, ServiceFail},
	{ServiceFail, EvService, Servicing},
	{ServiceFail, EvRescue, Rescuing},
	{ServiceFail, EvWait, ServiceWait},
	{ServiceFail, EvHold, ServiceHold},
	{ServiceFail, EvDelete, Deleting},
	{ServiceFail, EvAbort, Active},
	{ServiceWait, EvDelete, Deleting},
}

type edgeKey struct {
	from State
	ev   Event
}

// edges indexes machine; built once at init from the table (read-only after).
var edges = func() map[edgeKey]State {
	m := make(map[edgeKey]State, len(machine))
	for _, t := range machine {
		k := edgeKey{t.From, t.Event}
		if _, dup := m[k]; dup {
			panic(fmt.Sprintf("state table: duplicate edge %q --%s-->", t.From, t.Event))
		}
		if _, ok := states[t.From]; !ok {
			panic(fmt.Sprintf("state table: unknown state %q", t.From))
		}
		if _, ok := states[t.To]; !ok {
			panic(fmt.Sprintf("state table: unknown state %q", t.To))
		}
		m[k] = t.To
	}
	return m
}()

// Next returns the state ev leads to from s, and whether the edge exists.
func Next(s State, ev Event) (State, bool) {
	to, ok := edges[edgeKey{s, ev}]
	return to, ok
}

// Actionable reports whether ev may be fired in s.
func Actionable(s State, ev Event) bool {
	_, ok := edges[edgeKey{s, ev}]
	return ok
}

// TargetOf is the target_provision_state a node in s shows; "" for none.
func TargetOf(s State) State { return states[s].Target }

// IsAPIVerb reports whether ev is an operator verb (as opposed to an event
// only the conductor fires).
func IsAPIVerb(ev Event) bool {
	switch ev {
	case EvDone, EvFail, EvWait, EvResume, EvHold:
		return false
	}
	return true
}

// Dot renders the machine as a Graphviz diagram; stable states are boxes,
// failure states red, operator verbs bold.
func Dot() string {
	var b strings.Builder
	b.WriteString("digraph castiron_provision_states {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n")
	names := make([]string, 0, len(states))
	for s := range states {
		names = append(names, string(s))
	}
	sort.Strings(names)
	for _, n := range names {
		info := states[State(n)]
		attrs := []string{"shape=ellipse"}
		if info.Stable {
			attrs[0] = "shape=box"
		}
		if info.Failure {
			attrs = append(attrs, "color=red")
		}
		if info.WaitsForCallback {
			attrs = append(attrs, "style=dashed")
		}
		fmt.Fprintf(&b, "  %q [%s];\n", n, strings.Join(attrs, ","))
	}
	for _, t := range machine {
		style := ""
		if IsAPIVerb(t.Event) {
			style = ",style=bold"
		}
		fmt.Fprintf(&b, "  %q -> %q [label=%q%s];\n", string(t.From), string(t.To), string(t.Event), style)
	}
	b.WriteString("}\n")
	return b.String()
}

// The tables above are read-only; callers outside engine see them through
// these accessors, which hand out copies.

// VerbEvent maps an API provision target to its event.
func VerbEvent(target string) (Event, bool) {
	ev, ok := verbs[target]
	return ev, ok
}

// VerbTargets lists every API provision target with its event.
func VerbTargets() map[string]Event { return maps.Clone(verbs) }

// VerbMinVersion is the microversion (minor part) an API target needs; ok is
// false for targets every version accepts.
func VerbMinVersion(target string) (minor int, ok bool) {
	minor, ok = verbMinVersion[target]
	return minor, ok
}

// VerbMinVersions is VerbMinVersion for every target that has one.
func VerbMinVersions() map[string]int { return maps.Clone(verbMinVersion) }

// Info returns the attributes of s; ok is false for a state engine does not know.
func Info(s State) (StateInfo, bool) {
	info, ok := states[s]
	return info, ok
}

// AllStates lists every state with its attributes.
func AllStates() map[State]StateInfo { return maps.Clone(states) }

// Transitions lists the machine's edges in table order.
func Transitions() []Transition { return slices.Clone(machine) }
