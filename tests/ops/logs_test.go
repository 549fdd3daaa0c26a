package ops

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"castiron/tests/crashtest"
)

// opsAuthDo is opsDo with http_basic credentials and extra headers.
func opsAuthDo(t *testing.T, method, url, user, pass string, body any, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, []byte(b.String()), resp.Header
}

// TestLogsNoSecretsAndRequestIDs runs castiron at debug level with JSON
// logs through everything that handles a secret (http_basic passwords, BMC
// passwords on create, patch, validate and failing power calls, agent
// tokens, config drives, rescue passwords), then reads the whole log: no
// secret in any line, every line a JSON object, and the lines of a request
// (also those of the task it started) carry its request id.
func TestLogsNoSecretsAndRequestIDs(t *testing.T) {
	dir := t.TempDir()
	const user = "operator"
	secrets := map[string]string{
		"http_basic password":        "htpass-S3CRET-0a1",
		"wrong http_basic password":  "wrongpass-S3CRET-0a2",
		"ipmi_password":              "ipmi-S3CRET-0a3",
		"ipmi_password (patched)":    "ipmi-S3CRET-0a4",
		"redfish_password":           "redfish-S3CRET-0a5",
		"config drive user_data":     "configdrive-S3CRET-0a6",
		"config drive meta_data":     "configdrive-meta-S3CRET-0a7",
		"rescue_password":            "rescue-S3CRET-0a8",
		"wrong agent token":          "agenttoken-S3CRET-0a9",
		"config drive (string form)": "H4sIAS3CRETconfigdrive0b1",
	}
	pass := secrets["http_basic password"]
	logPath := filepath.Join(dir, "castiron.log")
	srv := opsStart(t, opsBinary(t), filepath.Join(dir, "data"), logPath,
		"--htpasswd", writeHTPasswd(t, dir, user, pass), "--log-format", "json")
	api := srv.Endpoint + "/v1"
	do := func(method, path string, body any) (int, map[string]any, http.Header) {
		t.Helper()
		code, b, h := opsAuthDo(t, method, api+path, user, pass, body, nil)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return code, m, h
	}
	must := func(want int, method, path string, body any) (map[string]any, http.Header) {
		t.Helper()
		code, m, h := do(method, path, body)
		if code != want {
			t.Fatalf("%s %s: %d, want %d: %v", method, path, code, want, m)
		}
		return m, h
	}
	waitState := func(ident, state string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, n, _ := do("GET", "/nodes/"+ident, nil)
			if n["provision_state"] == state {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s: %v, want %s", ident, n["provision_state"], state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// http_basic: a wrong password is refused and not logged.
	if code, _, _ := opsAuthDo(t, "GET", api+"/nodes", user, secrets["wrong http_basic password"], nil, nil); code != 401 {
		t.Errorf("wrong password: %d", code)
	}

	// BMC passwords: create, patch, validate, and power calls that fail
	// (a BMC that never answers; a Redfish URL nobody listens on).
	bmc := crashtest.BlackHole(t)
	ipmiNode, _ := must(201, "POST", "/nodes", map[string]any{"driver": "ipmi", "name": "log-ipmi",
		"driver_info": map[string]any{"ipmi_address": "127.0.0.1", "ipmi_port": bmc, "ipmi_username": "admin",
			"ipmi_password": secrets["ipmi_password"]}})
	must(200, "PATCH", "/nodes/log-ipmi", []map[string]any{{"op": "replace", "path": "/driver_info/ipmi_password",
		"value": secrets["ipmi_password (patched)"]}})
	must(200, "GET", "/nodes/log-ipmi/validate", nil)
	must(202, "PUT", "/nodes/log-ipmi/states/power", map[string]any{"target": "power on", "timeout": 5})
	must(201, "POST", "/nodes", map[string]any{"driver": "redfish", "name": "log-redfish",
		"driver_info": map[string]any{"redfish_address": "http://127.0.0.1:1", "redfish_system_id": "/redfish/v1/Systems/1",
			"redfish_username": "admin", "redfish_password": secrets["redfish_password"]}})
	must(202, "PUT", "/nodes/log-redfish/states/power", map[string]any{"target": "power on"})

	// Config drive and rescue password on fake hardware: deploy, rescue.
	must(201, "POST", "/nodes", map[string]any{"driver": "fake-hardware", "name": "log-fake"})
	for _, step := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		must(202, "PUT", "/nodes/log-fake/states/provision", map[string]any{"target": step.verb})
		waitState("log-fake", step.state)
	}
	_, deployHdr := must(202, "PUT", "/nodes/log-fake/states/provision", map[string]any{"target": "active",
		"configdrive": map[string]any{"meta_data": map[string]any{"hostname": "h", "public_keys": map[string]any{"k": secrets["config drive meta_data"]}},
			"user_data": secrets["config drive user_data"]}})
	waitState("log-fake", "active")
	must(202, "PUT", "/nodes/log-fake/states/provision", map[string]any{"target": "rescue", "rescue_password": secrets["rescue_password"]})
	waitState("log-fake", "rescue")

	// The agent path: a node waiting for its ramdisk, a lookup that issues
	// a token, a heartbeat with a wrong one, one with the right one.
	must(201, "POST", "/nodes", map[string]any{"driver": "fake-hardware", "name": "log-agent", "deploy_interface": "direct",
		"automated_clean": false})
	for _, step := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		must(202, "PUT", "/nodes/log-agent/states/provision", map[string]any{"target": step.verb})
		waitState("log-agent", step.state)
	}
	must(200, "PATCH", "/nodes/log-agent", []map[string]any{{"op": "add", "path": "/instance_info/image_source", "value": "http://127.0.0.1:1/img.raw"}})
	must(202, "PUT", "/nodes/log-agent/states/provision", map[string]any{"target": "active", "configdrive": secrets["config drive (string form)"]})
	waitState("log-agent", "wait call-back")
	_, n, _ := do("GET", "/nodes/log-agent", nil)
	agent := n["uuid"]
	lookup, _ := must(200, "GET", fmt.Sprintf("/lookup?node_uuid=%s", agent), nil)
	token, _ := lookup["config"].(map[string]any)["agent_token"].(string)
	if token == "" {
		t.Fatalf("lookup gave no token: %v", lookup)
	}
	secrets["agent token"] = token
	if code, _, _ := do("POST", fmt.Sprintf("/heartbeat/%s", agent), map[string]any{"agent_token": secrets["wrong agent token"],
		"callback_url": "http://127.0.0.1:9999", "agent_version": "castiron"}); code < 400 {
		t.Errorf("heartbeat with a wrong token: %d", code)
	}
	do("POST", fmt.Sprintf("/heartbeat/%s", agent), map[string]any{"agent_token": token,
		"callback_url": "http://127.0.0.1:9999", "agent_version": "castiron"})

	// Let the failing power calls finish and log.
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Count(string(b), `"power change failed"`) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	// The paths that handle the secrets did run (and log).
	for _, want := range []string{`"msg":"power change failed","conductor":"cli-test-conductor","node":"` + crashtest.Str(ipmiNode["uuid"]),
		`"msg":"agent heartbeat with a wrong token"`, `"verb":"rescue"`, `"state":"wait call-back"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log has no %s", want)
		}
	}
	if n := strings.Count(log, `"msg":"power change failed"`); n < 2 {
		t.Errorf("%d failed power changes logged, want 2 (ipmi, redfish)", n)
	}
	for what, s := range secrets {
		if strings.Contains(log, s) {
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, s) {
					t.Errorf("%s in the log: %s", what, line)
					break
				}
			}
		}
	}
	deployID := deployHdr.Get("X-Openstack-Request-Id")
	if !strings.HasPrefix(deployID, "req-") || deployHdr.Get("Openstack-Request-Id") != deployID {
		t.Fatalf("request id headers: %v", deployHdr)
	}
	var lines, requestLines, deployLines int
	sawTaskLine := false
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		lines++
		if rec["msg"] == "request" || rec["msg"] == "request failed" {
			requestLines++
			if id, _ := rec["request_id"].(string); !strings.HasPrefix(id, "req-") {
				t.Errorf("request line without request_id: %s", line)
			}
		}
		if rec["request_id"] == deployID {
			deployLines++
			// The deploy's task ends the verb after the request returned.
			if rec["msg"] == "provision state change" && rec["state"] == "active" && rec["node"] != nil {
				sawTaskLine = true
			}
		}
	}
	if requestLines == 0 || deployLines < 2 || !sawTaskLine {
		t.Errorf("%d lines, %d request lines, %d lines of the deploy request (task line seen: %v)",
			lines, requestLines, deployLines, sawTaskLine)
	}
}
