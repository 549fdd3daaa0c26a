package storage

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

func TestDeployTemplates(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)

	full := &DeployTemplate{
		UUID: uuid.NewString(), Name: "CUSTOM_RAID1",
		Steps: []DeployStep{
			{Interface: "raid", Step: "create_configuration", Args: JSONObject{"logical_disks": []any{map[string]any{"size_gb": "MAX"}}}, Priority: 10},
			{Interface: "bios", Step: "apply_configuration", Args: JSONObject{}, Priority: 0},
		},
		Extra: JSONObject{"k": "v"}, CreatedAt: time.Now(), UpdatedAt: ptr(time.Now()),
	}
	allFieldsSet(t, full)
	mustCreate(t, s.CreateDeployTemplate, full)
	wantStored(t, s.GetDeployTemplate, full, full.UUID, full.Name)
	minimal := &DeployTemplate{Name: "CUSTOM_B", Steps: []DeployStep{{Interface: "deploy", Step: "s", Priority: 1}}}
	mustCreate(t, s.CreateDeployTemplate, minimal)
	wantStored(t, s.GetDeployTemplate, minimal, "CUSTOM_B")
	if minimal.Steps[0].Args == nil || minimal.Extra == nil {
		t.Fatalf("minimal round trip: %+v", minimal)
	}

	wantNameRefusals(t, "deploy_templates", s.CreateDeployTemplate, s.GetDeployTemplate,
		&DeployTemplate{Name: "CUSTOM_RAID1"}, &DeployTemplate{UUID: full.UUID, Name: "CUSTOM_C"}, "CUSTOM_NONE")

	checkLists(t, s.ListDeployTemplates, func(t *DeployTemplate) string { return t.Name }, []listCase[Page]{
		{"creation order", Page{}, []string{"CUSTOM_RAID1", "CUSTOM_B"}},
		{"by name", Page{SortKey: "name"}, []string{"CUSTOM_B", "CUSTOM_RAID1"}},
		{"by name desc, limit", Page{SortKey: "name", SortDir: Desc, Limit: 1}, []string{"CUSTOM_RAID1"}},
		{"after marker", Page{Marker: full.UUID}, []string{"CUSTOM_B"}},
	})
	_, err := s.ListDeployTemplates(ctx, Page{SortKey: "steps"})
	wantKind(t, err, fault.Invalid, "storage: invalid sort_key \"steps\"")

	out, err := s.UpdateDeployTemplate(ctx, "CUSTOM_B", func(t *DeployTemplate) error {
		t.Name = "CUSTOM_B2"
		t.Steps = append(t.Steps, DeployStep{Interface: "power", Step: "reboot", Priority: 5})
		return nil
	})
	if err != nil || out.Name != "CUSTOM_B2" || len(out.Steps) != 2 || out.UpdatedAt == nil {
		t.Fatalf("update: %+v %v", out, err)
	}
	if got, _ := s.GetDeployTemplate(ctx, minimal.UUID); !reflect.DeepEqual(got, out) {
		t.Fatalf("after update: %+v", got)
	}
	_, err = s.UpdateDeployTemplate(ctx, minimal.UUID, func(t *DeployTemplate) error { t.Name = "CUSTOM_RAID1"; return nil })
	wantKind(t, err, fault.Conflict, "storage: deploy_templates (name)=(CUSTOM_RAID1) already exists")

	if err := s.DeleteDeployTemplate(ctx, "CUSTOM_B2"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.DeleteDeployTemplate(ctx, minimal.UUID), fault.NotFound, "storage: no deploy_templates row "+minimal.UUID)
}
