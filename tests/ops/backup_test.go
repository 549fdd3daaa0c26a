package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/tests/castironserve"
)

// castironCmd runs a castiron command (not serve) to its end.
func castironCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(opsBinary(t), args...)
	cmd.Env = castironserve.Env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// createNode POSTs a fake-hardware node; any answer but 201 is an error.
// (Writers run on their own goroutines, where t.Fatal must not be called.)
func createNode(endpoint string, extra map[string]any) (string, error) {
	b, _ := json.Marshal(map[string]any{"driver": "fake-hardware", "extra": extra})
	req, err := http.NewRequest("POST", endpoint+"/v1/nodes", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var n struct {
		UUID string `json:"uuid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || resp.StatusCode != 201 || n.UUID == "" {
		return "", fmt.Errorf("create: %d %v", resp.StatusCode, err)
	}
	return n.UUID, nil
}

// listNodeUUIDs pages through GET /v1/nodes.
func listNodeUUIDs(t *testing.T, endpoint string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	marker := ""
	for {
		code, b := opsDo(t, "GET", endpoint+"/v1/nodes?limit=1000"+marker, nil)
		if code != 200 {
			t.Fatalf("list nodes: %d %s", code, b)
		}
		var page struct {
			Nodes []struct {
				UUID string `json:"uuid"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Nodes {
			got[n.UUID] = true
		}
		if len(page.Nodes) < 1000 {
			return got
		}
		marker = "&marker=" + page.Nodes[len(page.Nodes)-1].UUID
	}
}

// TestBackupRestoreUnderLoad: a backup taken while writers create nodes as
// fast as castiron takes them holds every node acknowledged before the
// backup began; restore refuses a data dir a castiron serves, restores into
// a new one that a castiron then serves, and keeps a replaced database.
func TestBackupRestoreUnderLoad(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	srv := opsStart(t, opsBinary(t), data, filepath.Join(dir, "castiron.log"))

	type ack struct {
		uuid string
		at   time.Time
	}
	var (
		mu    sync.Mutex
		acks  []ack
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		fails int
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				uuid, err := createNode(srv.Endpoint, map[string]any{"writer": w, "i": i})
				at := time.Now()
				mu.Lock()
				if err == nil {
					acks = append(acks, ack{uuid, at})
				} else {
					fails++
				}
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	for deadline := time.Now().Add(60 * time.Second); count() < 300; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d nodes created in 60 s", count())
		}
		time.Sleep(50 * time.Millisecond)
	}

	backup := filepath.Join(dir, "backup.db")
	began := time.Now()
	out, err := castironCmd(t, "backup", "--data-dir", data, backup)
	ended := time.Now()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	t.Logf("%s(backup took %s while writers ran)", out, ended.Sub(began).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond) // writes go on after the backup
	out, err = castironCmd(t, "backup", "--data-dir", data, backup)
	if err == nil || !strings.Contains(out, "exists") {
		t.Errorf("second backup to the same file: %v %s", err, out)
	}

	// restore refuses while castiron serves the data dir.
	out, err = castironCmd(t, "restore", "--data-dir", data, backup)
	if err == nil || !strings.Contains(out, "refusing to restore") || !strings.Contains(out, fmt.Sprintf("pid %d", srv.PID())) {
		t.Errorf("restore on a served data dir: %v %s", err, out)
	}
	close(stop)
	wg.Wait()

	// Into a new data dir, served by a new castiron.
	data2 := filepath.Join(dir, "restored")
	if out, err := castironCmd(t, "restore", "--data-dir", data2, backup); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	srv2 := opsStart(t, opsBinary(t), data2, filepath.Join(dir, "castiron-restored.log"))
	got := listNodeUUIDs(t, srv2.Endpoint)
	var before, missing, after, afterFound int
	for _, a := range acks {
		switch {
		case a.at.Before(began):
			before++
			if !got[a.uuid] {
				missing++
			}
		case a.at.After(ended):
			after++
			if got[a.uuid] {
				afterFound++
			}
		}
	}
	t.Logf("%d nodes acknowledged (%d failed requests): %d before the backup began, %d after it ended (%d of those in it); restored: %d",
		len(acks), fails, before, after, afterFound, len(got))
	if missing > 0 || before == 0 {
		t.Errorf("%d of %d nodes acknowledged before the backup began are missing from it", missing, before)
	}
	if afterFound > 0 {
		t.Errorf("%d nodes acknowledged after the backup ended are in it", afterFound)
	}
	if after == 0 {
		t.Error("no writes after the backup: the test did not back up under load")
	}

	// Over the first data dir once its castiron stopped: the old database
	// is kept aside.
	srv.Stop()
	if out, err := castironCmd(t, "restore", "--data-dir", data, backup); err != nil {
		t.Fatalf("restore over a stopped data dir: %v\n%s", err, out)
	}
	kept, _ := filepath.Glob(filepath.Join(data, "castiron.db.pre-restore-*"))
	if len(kept) == 0 {
		t.Error("the replaced database was not kept")
	}
	if _, err := os.Stat(filepath.Join(data, "castiron.db-wal")); err == nil {
		t.Error("the old WAL is still next to the restored database")
	}
}

// TestBackupRefusesPostgres: with --database (PostgreSQL) backup and restore
// refuse, point to pg_dump/pg_restore, write nothing and do not echo the
// DSN's password.
func TestBackupRefusesPostgres(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "copy.db")
	for _, cmd := range []string{"backup", "restore"} {
		out, err := castironCmd(t, cmd, "--data-dir", dir, "--database", "postgres://castiron:pg-secret-1@127.0.0.1:1/castiron", file)
		if err == nil {
			t.Fatalf("castiron %s --database postgres://...: succeeded:\n%s", cmd, out)
		}
		if !strings.Contains(out, "pg_dump") || strings.Contains(out, "pg-secret-1") {
			t.Errorf("castiron %s --database postgres://...: want a pointer to pg_dump and no password, got:\n%s", cmd, out)
		}
		if _, err := os.Stat(file); err == nil {
			t.Errorf("castiron %s --database wrote %s", cmd, file)
		}
	}
}
