package engine

import (
	"strings"
	"testing"
)

// firmware.update's settings: Ironic's schema (component bios/bmc/nic:*,
// url, wait; nothing else) plus castiron's checksum.
func TestParseFirmwareSettings(t *testing.T) {
	ok := []any{
		map[string]any{"component": "bmc", "url": "http://x/bmc.bin", "wait": float64(30)},
		map[string]any{"component": "nic:ABC123", "url": "nic.bin", "checksum": strings.Repeat("a", 64)},
		map[string]any{"component": "bios", "url": "https://x/b", "checksum": "sha512:" + strings.Repeat("b", 128)},
	}
	ups, err := parseFirmwareSettings(ok)
	if err != nil || len(ups) != 3 || ups[1].Component != "nic:ABC123" || ups[2].Checksum == "" {
		t.Fatalf("%+v %v", ups, err)
	}
	for _, c := range []struct {
		in   any
		want string
	}{
		{[]any{}, "Invalid firmware update []. Errors: [] should be non-empty"},
		{"bmc", "Invalid firmware update"},
		{[]any{map[string]any{"component": "raid", "url": "u"}}, "Invalid firmware update"},
		{[]any{map[string]any{"component": "bmc"}}, "'url' is a required property"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "size": 1}}, "Additional properties are not allowed ('size' was unexpected)"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "wait": float64(0)}}, "is less than the minimum of 1"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "checksum": "crc32:1234"}}, "Invalid firmware checksum"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "checksum": "sha256:abc"}}, "not a sha256 digest"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "checksum": "abc"}}, "Invalid firmware checksum"},
	} {
		_, err := parseFirmwareSettings(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.in, err, c.want)
		}
	}
}
