package httpapi

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"castiron/storage"
)

// TestMaskDict compares maskDict with oslo.utils 6.0.1's
// strutils.mask_dict_password(d, "******") on the same dicts (the expected
// values were produced by it).
func TestMaskDict(t *testing.T) {
	for _, tc := range []struct {
		in, want map[string]any
	}{
		{map[string]any{"ipmi_password": "p", "ipmi_username": "admin", "fake_key": "v"},
			map[string]any{"ipmi_password": "******", "ipmi_username": "admin", "fake_key": "v"}},
		{map[string]any{"redfish_password": nil, "IPMI_PASSWORD": 5, "deploy_kernel": "http://k", "snmp_auth_key": "a"},
			map[string]any{"redfish_password": "******", "IPMI_PASSWORD": "******", "deploy_kernel": "http://k", "snmp_auth_key": "a"}},
		{map[string]any{"agent_secret_token": "abc", "agent_url": "http://10.0.0.2:9999", "clean_steps": []any{"x"}},
			map[string]any{"agent_secret_token": "******", "agent_url": "http://10.0.0.2:9999", "clean_steps": []any{"x"}}},
		{map[string]any{"nested": map[string]any{"auth_token": "t", "user": "u"}, "secret": map[string]any{"k": "v"}},
			map[string]any{"nested": map[string]any{"auth_token": "******", "user": "u"}, "secret": map[string]any{"k": "v"}}},
		{map[string]any{"cmd": "run --password hunter2 now", "conf": "token=abc other", "json": `{"password": "x"}`},
			map[string]any{"cmd": "run --password ****** now", "conf": "token=****** other", "json": `{"password": "******"}`}},
		{map[string]any{"key": "k", "private_key": "pk", "mykeystonecredential": "c", "chap_secret": "s"},
			map[string]any{"key": "k", "private_key": "******", "mykeystonecredential": "******", "chap_secret": "******"}},
	} {
		if got := maskDict(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("maskDict(%v)\n got %v\nwant %v", tc.in, got, tc.want)
		}
	}
}

// TestMaskingEveryView: secrets in driver_info, instance_info,
// driver_internal_info (the agent token), target properties and template
// step args are masked in every view that shows them; other keys are shown
// as they are; PATCH still sees and keeps the stored values.
func TestMaskingEveryView(t *testing.T) {
	h := newAPI(t)
	const secret = "s3cr3t-value"
	n := h.createNode(map[string]any{"name": "masked",
		"driver_info":   map[string]any{"ipmi_password": secret, "fake_key": "v", "snmp_priv_key": secret, "ipmi_address": "10.0.0.9"},
		"instance_info": map[string]any{"image_source": "http://img", "configdrive": secret, "image_url": secret, "root_gb": int64(10)},
	})
	id := n["uuid"].(string)
	h.db(id, func(n *storage.Node) {
		n.DriverInternalInfo["agent_secret_token"] = strings.Repeat("a", 64)
		n.DriverInternalInfo["agent_url"] = "http://10.0.0.2:9999"
	})
	check := func(where string, node map[string]any) {
		t.Helper()
		di, _ := node["driver_info"].(map[string]any)
		ii, _ := node["instance_info"].(map[string]any)
		dii, _ := node["driver_internal_info"].(map[string]any)
		for _, c := range []struct {
			m    map[string]any
			key  string
			want any
		}{
			{di, "ipmi_password", "******"}, {di, "snmp_priv_key", "******"}, {di, "fake_key", "v"}, {di, "ipmi_address", "10.0.0.9"},
			{ii, "configdrive", "******"}, {ii, "image_url", "******"}, {ii, "image_source", "http://img"}, {ii, "root_gb", float64(10)},
			{dii, "agent_secret_token", "******"}, {dii, "agent_url", "http://10.0.0.2:9999"},
		} {
			if c.m == nil {
				continue // the view does not carry this field
			}
			if got := c.m[c.key]; got != c.want {
				t.Errorf("%s: %s = %v, want %v", where, c.key, got, c.want)
			}
		}
	}
	check("show", h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t))
	check("show ?fields=", h.expect(http.StatusOK, "GET", "/v1/nodes/"+id+"?fields=driver_info,instance_info,driver_internal_info", latest, nil).json(t))
	for _, path := range []string{"/v1/nodes/detail", "/v1/nodes?detail=true", "/v1/nodes?fields=driver_info,instance_info,driver_internal_info"} {
		for _, item := range h.expect(http.StatusOK, "GET", path, latest, nil).json(t)["nodes"].([]any) {
			check(path, item.(map[string]any))
		}
	}
	// PATCH answers with the masked view and keeps the stored secret.
	patched := h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest,
		[]any{map[string]any{"op": "add", "path": "/driver_info/fake_key2", "value": "v2"}}).json(t)
	check("patch answer", patched)
	stored, err := h.store.GetNode(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.DriverInfo["ipmi_password"] != secret || stored.DriverInfo["fake_key2"] != "v2" {
		t.Errorf("stored driver_info after PATCH: %v", stored.DriverInfo)
	}
	for _, path := range []string{"/v1/nodes/" + id + "/history?detail=true", "/v1/nodes/" + id + "/states"} {
		if body := h.expect(http.StatusOK, "GET", path, latest, nil).body; strings.Contains(string(body), secret) {
			t.Errorf("%s shows the secret: %s", path, body)
		}
	}

	// Volume target properties and deploy template step args.
	h.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/power", latest, map[string]any{"target": "power off"})
	tg := h.expect(http.StatusCreated, "POST", "/v1/volume/targets", latest, map[string]any{
		"node_uuid": id, "volume_type": "iscsi", "volume_id": "v1", "boot_index": 0,
		"properties": map[string]any{"auth_password": secret, "target_iqn": "iqn.x"},
	}).json(t)
	for _, path := range []string{"/v1/volume/targets/" + tg["uuid"].(string), "/v1/volume/targets?detail=true", "/v1/volume/targets?fields=properties"} {
		body := h.expect(http.StatusOK, "GET", path, latest, nil).body
		if strings.Contains(string(body), secret) || !strings.Contains(string(body), "iqn.x") {
			t.Errorf("%s: %s", path, body)
		}
	}
	steps := []any{map[string]any{"interface": "deploy", "step": "s", "priority": 10, "args": map[string]any{"password": secret, "size": 1}}}
	h.expect(http.StatusCreated, "POST", "/v1/deploy_templates", latest, map[string]any{"name": "CUSTOM_MASK", "steps": steps})
	for _, path := range []string{"/v1/deploy_templates/CUSTOM_MASK", "/v1/deploy_templates?detail=true", "/v1/deploy_templates?fields=steps"} {
		body := h.expect(http.StatusOK, "GET", path, latest, nil).body
		if strings.Contains(string(body), secret) || !strings.Contains(string(body), `"size"`) {
			t.Errorf("%s: %s", path, body)
		}
	}
}
