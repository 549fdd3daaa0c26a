package engine

import (
	"context"
	"strings"
	"testing"

	"castiron/fault"
	"castiron/storage"
)

func TestMachineTableIsConsistent(t *testing.T) {
	for _, tr := range machine {
		to, ok := Next(tr.From, tr.Event)
		if !ok || to != tr.To {
			t.Errorf("Next(%q, %s) = %q, %v; want %q", tr.From, tr.Event, to, ok, tr.To)
		}
	}
	// Every state is reachable from enroll and every non-stable state has a
	// way out, so no node can get stuck by construction.
	reach := map[State]bool{Enroll: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range machine {
			if reach[tr.From] && !reach[tr.To] {
				reach[tr.To], changed = true, true
			}
		}
	}
	for s, info := range states {
		if !reach[s] {
			t.Errorf("state %q unreachable from enroll", s)
		}
		out := 0
		for _, tr := range machine {
			if tr.From == s {
				out++
			}
		}
		if out == 0 {
			t.Errorf("state %q has no way out", s)
		}
		if info.Stable && info.Target != "" {
			t.Errorf("stable state %q has a target", s)
		}
	}
	if len(states) != 30 {
		t.Errorf("%d states, want Ironic's 30", len(states))
	}
	if !strings.Contains(Dot(), `"wait call-back" -> "deploy failed" [label="abort",style=bold]`) {
		t.Error("Dot() lacks the deploy abort edge")
	}
}

// verbArgs are the arguments each verb needs to pass validation.
func verbArgs(target string) ProvisionRequest {
	req := ProvisionRequest{Target: target}
	switch target {
	case "clean":
		req.CleanSteps = []map[string]any{{"interface": "deploy", "step": "erase_devices_metadata"}}
	case "service":
		req.ServiceSteps = []map[string]any{{"interface": "deploy", "step": "hold"}}
	case "rescue":
		pw := "s3cret"
		req.RescuePassword = &pw
	}
	return req
}

// TestEveryStateVerbPair fires every API verb in every state through the
// conductor: allowed edges must record exactly the table's transition,
// disallowed ones must answer Ironic's InvalidStateRequested (HTTP 400).
func TestEveryStateVerbPair(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for st := range states {
		for target, ev := range verbs {
			t.Run(string(st)+"/"+target, func(t *testing.T) {
				n := h.nodeIn(t, st, nil)
				err := h.c.Provision(ctx, n.UUID, verbArgs(target))
				want, allowed := Next(st, ev)
				if !allowed {
					if fault.KindOf(err) != fault.Invalid {
						t.Fatalf("err = %v (kind %v), want InvalidState", err, fault.KindOf(err))
					}
					wantMsg := fault.InvalidState(target, n.UUID, string(st)).Error()
					if err.Error() != wantMsg {
						t.Fatalf("message %q, want %q", err, wantMsg)
					}
					got, _ := h.store.GetNode(ctx, n.UUID)
					if got.ProvisionState != string(st) {
						t.Fatalf("state changed to %q on a refused verb", got.ProvisionState)
					}
					return
				}
				if err != nil {
					t.Fatalf("allowed edge %q --%s--> %q refused: %v", st, ev, want, err)
				}
				h.waitIdle(t, n.UUID)
				evs, err := h.store.ListEvents(ctx, n.UUID, storage.Page{})
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, e := range evs {
					if e.FromState == string(st) && e.ToState == string(want) && e.Verb == string(ev) {
						found = true
					}
				}
				if !found {
					t.Fatalf("no history event %q --%s--> %q; events: %+v", st, ev, want, evs)
				}
			})
		}
	}
}

// TestLockedNodeAnswersNodeLocked: a verb on a reserved node is 409, as
// Ironic answers while a task runs.
func TestLockedNodeAnswersNodeLocked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	host := "other-host"
	n := h.nodeIn(t, Manageable, func(n *storage.Node) { n.Reservation = &host })
	err := h.c.Provision(ctx, n.UUID, ProvisionRequest{Target: "provide"})
	if fault.KindOf(err) != fault.NodeLocked {
		t.Fatalf("err = %v, want NodeLocked", err)
	}
	if err := h.c.SetPower(ctx, n.UUID, "power on", 0); fault.KindOf(err) != fault.NodeLocked {
		t.Fatalf("power err = %v, want NodeLocked", err)
	}
	if err := h.c.DeleteNode(ctx, n.UUID); fault.KindOf(err) != fault.NodeLocked {
		t.Fatalf("delete err = %v, want NodeLocked", err)
	}
}
