package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"castiron/engine/jsonschema"
)

// TestSchemaCheckMatchesJSONSchema compares jsonschema.Check on the field tables'
// schemas (and parsePatch) with Ironic's args.schema run by Python's
// jsonschema 4.26 on the same documents (the expected messages were
// produced by it; "" is valid).
func TestSchemaCheckMatchesJSONSchema(t *testing.T) {
	tests := []struct {
		schema *jsonschema.Schema
		prefix string
		doc    string
		want   string
	}{
		{templateTable.body, "Schema error for template", "{}", "Schema error for template: 'steps' is a required property"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\"}", "Schema error for template: 'steps' is a required property"},
		{templateTable.body, "Schema error for template", "{\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 'name' is a required property"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[],\"bogus\":1}", "Schema error for template: Additional properties are not allowed ('bogus' was unexpected)"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}],\"bogus\":1,\"zz\":2}", "Schema error for template: Additional properties are not allowed ('bogus', 'zz' were unexpected)"},
		{templateTable.body, "Schema error for template", "{\"name\":\"foo\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 'foo' is not valid under any of the given schemas. Possible root cause: 'foo' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: '' should be non-empty"},
		{templateTable.body, "Schema error for template", "{\"name\":5,\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 5 is not of type 'string'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 'CUSTOM_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' is too long"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[]}", "Schema error for template: [] should be non-empty"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":{}}", "Schema error for template: {} is not of type 'array'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[5]}", "Schema error for template: 5 is not of type 'object'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{}]}", "Schema error for template: 'interface' is a required property"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{}}]}", "Schema error for template: 'priority' is a required property"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"foo\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 'foo' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid']"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":5,\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 5 is not of type 'string'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"\",\"args\":{},\"priority\":1}]}", "Schema error for template: '' should be non-empty"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":5,\"args\":{},\"priority\":1}]}", "Schema error for template: 5 is not of type 'string'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":[],\"priority\":1}]}", "Schema error for template: [] is not of type 'object'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":-1}]}", "Schema error for template: -1 is less than the minimum of 0"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":\"abc\"}]}", "Schema error for template: 'abc' does not match '^[0-9]+$'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":\"\"}]}", "Schema error for template: '' is not valid under any of the given schemas. Possible root cause: '' is not of type 'integer'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1.5}]}", "Schema error for template: 1.5 is not valid under any of the given schemas. Possible root cause: 1.5 is not of type 'integer'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":null}]}", "Schema error for template: None is not valid under any of the given schemas. Possible root cause: None is not of type 'integer'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":true}]}", "Schema error for template: True is not valid under any of the given schemas. Possible root cause: True is not of type 'integer'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1,\"x\":1}]}", "Schema error for template: Additional properties are not allowed ('x' was unexpected)"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}],\"extra\":[]}", "Schema error for template: [] is not of type 'object', 'null'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}],\"uuid\":5}", "Schema error for template: 5 is not of type 'string', 'null'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}],\"description\":5}", "Schema error for template: 5 is not of type 'string', 'null'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"foo\",\"steps\":[]}", "Schema error for template: [] should be non-empty"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"foo\",\"step\":\"\",\"args\":[],\"priority\":-1}]}", "Schema error for template: '' should be non-empty"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1},{\"interface\":\"foo\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 'foo' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid']"},
		{templateTable.body, "Schema error for template", "{\"name\":\"HW_CPU_X86_AVX2\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":\"10\"}]}", ""},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_a\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":\"10\"}]}", "Schema error for template: 'CUSTOM_a' is not valid under any of the given schemas. Possible root cause: 'CUSTOM_a' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}],\"extra\":[],\"uuid\":5}", "Schema error for template: 5 is not of type 'string', 'null'"},
		{templateTable.body, "Schema error for template", "[]", "Schema error for template: [] is not of type 'object'"},
		{connectorTable.body, "Schema error for connector", "{}", "Schema error for connector: 'connector_id' is a required property"},
		{connectorTable.body, "Schema error for connector", "{\"node_uuid\":\"x\",\"type\":\"iqn\"}", "Schema error for connector: 'connector_id' is a required property"},
		{connectorTable.body, "Schema error for connector", "{\"node_uuid\":\"x\",\"connector_id\":\"iqn\"}", "Schema error for connector: 'type' is a required property"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":5,\"node_uuid\":\"x\",\"type\":\"iqn\"}", "Schema error for connector: 5 is not of type 'string'"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":\"a\",\"node_uuid\":5,\"type\":\"iqn\"}", "Schema error for connector: 5 is not of type 'string'"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":\"a\",\"node_uuid\":\"x\",\"type\":null}", "Schema error for connector: None is not of type 'string'"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":\"a\",\"node_uuid\":\"x\",\"type\":\"iqn\",\"extra\":\"s\"}", "Schema error for connector: 's' is not of type 'object', 'null'"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":\"a\",\"node_uuid\":\"x\",\"type\":\"iqn\",\"bogus\":\"s\"}", "Schema error for connector: Additional properties are not allowed ('bogus' was unexpected)"},
		{connectorTable.body, "Schema error for patch", "{\"connector_id\":\"a\",\"type\":\"iqn\",\"node_uuid\":\"x\",\"extra\":{},\"uuid\":\"u\"}", ""},
		{targetTable.body, "Schema error for target", "{}", "Schema error for target: 'boot_index' is a required property"},
		{targetTable.body, "Schema error for target", "{\"boot_index\":\"0\",\"node_uuid\":\"x\",\"volume_id\":\"v\",\"volume_type\":\"iscsi\"}", "Schema error for target: '0' is not of type 'integer'"},
		{targetTable.body, "Schema error for target", "{\"boot_index\":0.5,\"node_uuid\":\"x\",\"volume_id\":\"v\",\"volume_type\":\"iscsi\"}", "Schema error for target: 0.5 is not of type 'integer'"},
		{targetTable.body, "Schema error for target", "{\"boot_index\":-1,\"node_uuid\":\"x\",\"volume_id\":\"v\",\"volume_type\":\"iscsi\"}", ""},
		{targetTable.body, "Schema error for target", "{\"boot_index\":0,\"node_uuid\":\"x\",\"volume_id\":5,\"volume_type\":\"iscsi\"}", "Schema error for target: 5 is not of type 'string'"},
		{targetTable.body, "Schema error for target", "{\"boot_index\":0,\"node_uuid\":\"x\",\"volume_id\":\"v\",\"volume_type\":\"iscsi\",\"properties\":[]}", "Schema error for target: [] is not of type 'object', 'null'"},
		{targetTable.body, "Schema error for target", "{\"boot_index\":true,\"node_uuid\":\"x\",\"volume_id\":\"v\",\"volume_type\":\"iscsi\"}", "Schema error for target: True is not of type 'integer'"},
		{nil, "Schema error for patch", "{}", "Schema error for patch: {} is not of type 'array'"},
		{nil, "Schema error for patch", "[]", ""},
		{nil, "Schema error for patch", "[5]", "Schema error for patch: 5 is not of type 'object'"},
		{nil, "Schema error for patch", "[{\"op\":\"move\",\"path\":\"/extra\"}]", "Schema error for patch: 'move' is not one of ['add', 'replace', 'remove']"},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":\"extra\"}]", "Schema error for patch: 'extra' does not match '^(/[\\\\w-]+)+$'"},
		{nil, "Schema error for patch", "[{\"op\":\"add\"}]", "Schema error for patch: 'path' is a required property"},
		{nil, "Schema error for patch", "[{\"path\":\"/a\"}]", "Schema error for patch: 'op' is a required property"},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1,\"from\":\"/b\"}]", "Schema error for patch: Additional properties are not allowed ('from' was unexpected)"},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":\"/a/b c\",\"value\":1}]", "Schema error for patch: '/a/b c' does not match '^(/[\\\\w-]+)+$'"},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":5,\"value\":1}]", "Schema error for patch: 5 is not of type 'string'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"foo\",\"steps\":[{\"interface\":\"x\"}]}", "Schema error for template: 'foo' is not valid under any of the given schemas. Possible root cause: 'foo' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{templateTable.body, "Schema error for template", "{\"bogus\":1}", "Schema error for template: 'steps' is a required property"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":\"abc\",\"x\":1}]}", "Schema error for template: Additional properties are not allowed ('x' was unexpected)"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1.0}]}", ""},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"x\",\"step\":\"s\",\"args\":{},\"priority\":1},{\"interface\":\"y\",\"step\":\"s\",\"args\":{},\"priority\":1}]}", "Schema error for template: 'y' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid']"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}],\"description\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}", "Schema error for template: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is too long"},
		{templateTable.body, "Schema error for template", "{\"name\":\"it's\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{\"a\":{\"b\":[1,2.5,null]}},\"priority\":1}],\"extra\":\"x\\ny\"}", "Schema error for template: \"it's\" is not valid under any of the given schemas. Possible root cause: \"it's\" does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{templateTable.body, "Schema error for template", "{\"name\":\"CUSTOM_A\",\"steps\":[{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{\"b\":1,\"a\":\"x\"},\"priority\":1,\"zz\":{\"k\":true}}],\"extra\":[1,\"a\"]}", "Schema error for template: [1, 'a'] is not of type 'object', 'null'"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":5,\"node_uuid\":6,\"type\":7}", "Schema error for connector: 7 is not of type 'string'"},
		{connectorTable.body, "Schema error for connector", "{\"connector_id\":5,\"bogus\":1}", "Schema error for connector: 'node_uuid' is a required property"},
		{targetTable.body, "Schema error for target", "{\"boot_index\":1.0,\"node_uuid\":\"x\",\"volume_id\":\"v\",\"volume_type\":\"iscsi\"}", ""},
		{targetTable.body, "Schema error for target", "{\"boot_index\":\"a\",\"node_uuid\":5,\"volume_id\":\"v\",\"volume_type\":\"iscsi\",\"extra\":5}", "Schema error for target: 5 is not of type 'string'"},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":\"/a\"},{\"op\":\"bad\",\"path\":\"/b\"}]", "Schema error for patch: 'bad' is not one of ['add', 'replace', 'remove']"},
		{nil, "Schema error for patch", "[{\"op\":\"bad\",\"path\":\"b\"}]", "Schema error for patch: 'b' does not match '^(/[\\\\w-]+)+$'"},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":\"/\u00e9-x_1\"}]", ""},
		{nil, "Schema error for patch", "[{\"op\":\"add\",\"path\":\"/\"}]", "Schema error for patch: '/' does not match '^(/[\\\\w-]+)+$'"},
		{deployStepSchema, "Schema error for step", "{\"interface\":\"deploy\",\"step\":\"s\",\"args\":{},\"priority\":1}", ""},
		{deployStepSchema, "Schema error for step", "{\"interface\":\"deploy\",\"step\":\"s\",\"priority\":\"0010\"}", "Schema error for step: 'args' is a required property"},
	}
	for _, tc := range tests {
		var v any
		dec := json.NewDecoder(bytes.NewReader([]byte(tc.doc)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		var err error
		if tc.schema == nil { // the patch schema: parsePatch checks it
			_, err = parsePatch(normalizeNumbers(v))
		} else {
			err = jsonschema.Check(tc.prefix, tc.schema, normalizeNumbers(v))
		}
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s\n got %q\nwant %q", tc.doc, got, tc.want)
		}
	}
}
