package httpapi

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/storage/disktest"
)

// TestDiskFull: with the database's disk full, a write answers 503 with
// Ironic's error body saying why, reads answer as before, and once space
// is freed writes succeed again.
func TestDiskFull(t *testing.T) {
	dir := disktest.Small(t, 4)
	d := fake.New()
	h := serveAPIOn(t, filepath.Join(dir, "castiron.db"), engine.Config{Hostname: "test-conductor"},
		[]*engine.HardwareType{engine.NewFakeHardware(d), engine.NewManualManagement(d)})
	id := h.createNode(map[string]any{"name": "before", "driver": "fake-hardware"})["uuid"].(string)
	_, free := disktest.Fill(t, dir)

	// The WAL may have room of its own left: create until a write fails.
	var r resp
	for i := 0; i < 5000; i++ {
		if r = h.do("POST", "/v1/nodes", latest, map[string]any{"driver": "fake-hardware"}); r.status != http.StatusCreated {
			break
		}
	}
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("create on a full disk: %d %s, want 503", r.status, r.body)
	}
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	var inner struct {
		Faultcode, Faultstring string
	}
	if err := json.Unmarshal(r.body, &outer); err != nil {
		t.Fatalf("503 body %s: %v", r.body, err)
	}
	if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil {
		t.Fatalf("503 error_message %q: %v", outer.ErrorMessage, err)
	}
	if inner.Faultcode != "Server" || !strings.Contains(inner.Faultstring, "disk of its database is full") {
		t.Errorf("503 fault: %+v, want a Server fault saying the disk is full", inner)
	}
	h.expect(http.StatusServiceUnavailable, "PATCH", "/v1/nodes/"+id, latest,
		[]map[string]any{{"op": "add", "path": "/extra/big", "value": strings.Repeat("x", 64<<10)}})
	h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil)
	h.expect(http.StatusOK, "GET", "/v1/nodes?detail=true", latest, nil)

	free()
	h.expect(http.StatusCreated, "POST", "/v1/nodes", latest, map[string]any{"name": "after", "driver": "fake-hardware"})
	h.expect(http.StatusOK, "GET", "/v1/nodes/after", latest, nil)
}
