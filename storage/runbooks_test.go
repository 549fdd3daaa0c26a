package storage

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

// TestRunbooks is the runbook store on both databases (main_test.go runs
// the suite on SQLite, then on PostgreSQL).
func TestRunbooks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)

	full := &Runbook{
		UUID: uuid.NewString(), Name: "CUSTOM_FW", Description: ptr("firmware"),
		Steps: []RunbookStep{
			{Interface: "firmware", Step: "update", Args: JSONObject{"settings": []any{map[string]any{"component": "bmc"}}}, Order: 2},
			{Interface: "bios", Step: "apply_configuration", Args: JSONObject{}, Order: 1},
		},
		DisableRamdisk: true, Extra: JSONObject{"k": "v"}, Public: true, Owner: ptr("proj"),
		Traits: []string{"CUSTOM_A", "CUSTOM_B"}, CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreateRunbook, full)
	wantStored(t, s.GetRunbook, full, full.UUID, full.Name)
	minimal := &Runbook{Name: "rb-min.1~x", Steps: []RunbookStep{{Interface: "deploy", Step: "s", Order: 0}}}
	mustCreate(t, s.CreateRunbook, minimal)
	wantStored(t, s.GetRunbook, minimal, "rb-min.1~x")
	if minimal.Steps[0].Args == nil || minimal.Extra == nil || minimal.Traits == nil || minimal.Description != nil || minimal.Owner != nil || minimal.Public {
		t.Fatalf("minimal round trip: %+v", minimal)
	}
	owned := mustCreate(t, s.CreateRunbook, &Runbook{Name: "CUSTOM_OWNED", Owner: ptr("proj"), Steps: []RunbookStep{{Interface: "raid", Step: "delete_configuration"}}})

	wantNameRefusals(t, "runbooks", s.CreateRunbook, s.GetRunbook,
		&Runbook{Name: "CUSTOM_FW"}, &Runbook{UUID: full.UUID, Name: "CUSTOM_C"}, "CUSTOM_NONE")

	checkLists(t, s.ListRunbooks, func(r *Runbook) string { return r.Name }, []listCase[RunbookQuery]{
		{"creation order", RunbookQuery{}, []string{"CUSTOM_FW", "rb-min.1~x", "CUSTOM_OWNED"}},
		{"by name", RunbookQuery{Page: Page{SortKey: "name"}}, []string{"CUSTOM_FW", "CUSTOM_OWNED", "rb-min.1~x"}},
		{"by name desc, limit", RunbookQuery{Page: Page{SortKey: "name", SortDir: Desc, Limit: 1}}, []string{"rb-min.1~x"}},
		{"after marker", RunbookQuery{Page: Page{Marker: full.UUID}}, []string{"rb-min.1~x", "CUSTOM_OWNED"}},
		{"by public", RunbookQuery{Page: Page{SortKey: "public", SortDir: Desc, Limit: 1}}, []string{"CUSTOM_FW"}},
		{"public only", RunbookQuery{PublicOnly: true}, []string{"CUSTOM_FW"}},
		{"project: owned or public", RunbookQuery{Project: ptr("proj")}, []string{"CUSTOM_FW", "CUSTOM_OWNED"}},
		{"other project: public", RunbookQuery{Project: ptr("other")}, []string{"CUSTOM_FW"}},
	})
	for _, key := range []string{"steps", "traits", "extra"} {
		_, err := s.ListRunbooks(ctx, RunbookQuery{Page: Page{SortKey: key}})
		wantKind(t, err, fault.Invalid, "storage: invalid sort_key \""+key+"\"")
	}

	out, err := s.UpdateRunbook(ctx, "rb-min.1~x", func(r *Runbook) error {
		r.Name = "CUSTOM_B2"
		r.Steps = append(r.Steps, RunbookStep{Interface: "power", Step: "reboot", Order: 5})
		r.Traits = append(r.Traits, "CUSTOM_T")
		r.Public, r.DisableRamdisk = true, true
		return nil
	})
	if err != nil || out.Name != "CUSTOM_B2" || len(out.Steps) != 2 || out.UpdatedAt == nil || !reflect.DeepEqual(out.Traits, []string{"CUSTOM_T"}) {
		t.Fatalf("update: %+v %v", out, err)
	}
	if got, _ := s.GetRunbook(ctx, minimal.UUID); !reflect.DeepEqual(got, out) {
		t.Fatalf("after update: %+v", got)
	}
	_, err = s.UpdateRunbook(ctx, minimal.UUID, func(r *Runbook) error { r.Name = "CUSTOM_FW"; return nil })
	wantKind(t, err, fault.Conflict, "storage: runbooks (name)=(CUSTOM_FW) already exists")

	if err := s.DeleteRunbook(ctx, "CUSTOM_B2"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.DeleteRunbook(ctx, minimal.UUID), fault.NotFound, "storage: no runbooks row "+minimal.UUID)
	if err := s.DeleteRunbook(ctx, owned.UUID); err != nil {
		t.Fatal(err)
	}
}
