package jsonschema

import "testing"

// TestMessage compares Message with Python's jsonschema.validate on the
// same schema and documents (the expected messages were printed by it; the
// minItems wording is 4.26's, "[] is too short" in 4.10).
func TestMessage(t *testing.T) {
	disk := Object(true, []string{"raid_level", "size_gb"},
		P("raid_level", &Schema{Types: []string{"string"}, Enum: []string{"JBOD", "0"}}),
		P("size_gb", &Schema{AnyOf: []*Schema{{Types: []string{"integer"}, Minimum: Int64(0)}, {Types: []string{"string"}, Enum: []string{"MAX"}}}}),
		P("number_of_physical_disks", &Schema{Types: []string{"integer"}, Minimum: Int64(0), ExclusiveMinimum: true}),
	)
	s := Object(true, []string{"logical_disks"}, P("logical_disks", &Schema{Types: []string{"array"}, Items: disk, MinItems: 1}))
	d := func(kv ...any) map[string]any {
		m := map[string]any{"raid_level": "0", "size_gb": int64(10)}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return map[string]any{"logical_disks": []any{m}}
	}
	for _, tc := range []struct {
		doc  map[string]any
		want string
	}{
		{d("size_gb", "big"), "'big' is not one of ['MAX']"},
		{d("number_of_physical_disks", int64(0)), "0 is less than or equal to the minimum of 0"},
		{d("size_gb", int64(-1)), "-1 is less than the minimum of 0"},
		{map[string]any{"logical_disks": []any{}}, "[] should be non-empty"},
		{d(), ""},
	} {
		if got := Message(s, tc.doc); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.doc, got, tc.want)
		}
	}
}

// TestOneOf is jsonschema's oneOf as Ironic's PORT_SCHEMA uses it (exactly
// one of node_ident and node_uuid): none matching, both matching (the
// later branches named first), and the weak keyword losing to a property's
// own error in best_match.
func TestOneOf(t *testing.T) {
	s := Object(true, []string{"address"}, P("address", Types("string")), P("node_ident", Types("string")), P("node_uuid", Types("string")))
	s.OneOf = []*Schema{
		{Required: []string{"node_ident"}, Repr: "{'required': ['node_ident']}"},
		{Required: []string{"node_uuid"}, Repr: "{'required': ['node_uuid']}"},
	}
	for _, tc := range []struct {
		doc  map[string]any
		want string
	}{
		{map[string]any{"address": "a"}, "{'address': 'a'} is not valid under any of the given schemas"},
		{map[string]any{"address": "a", "node_ident": "n", "node_uuid": "u"},
			"{'address': 'a', 'node_ident': 'n', 'node_uuid': 'u'} is valid under each of {'required': ['node_uuid']}, {'required': ['node_ident']}"},
		{map[string]any{"address": "a", "node_uuid": 5}, "5 is not of type 'string'"},
		{map[string]any{"address": "a", "node_ident": "n"}, ""},
		{map[string]any{"address": "a", "node_uuid": "u"}, ""},
	} {
		if got := Message(s, tc.doc); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.doc, got, tc.want)
		}
	}
}
