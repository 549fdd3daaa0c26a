package engine

import (
	"testing"

	"castiron/fault"
)

// FuzzParseInspection: no input may panic, and whatever is refused is a
// 400-class fault (never a 500).
func FuzzParseInspection(f *testing.F) {
	seeds := []string{
		`{"inventory": {"interfaces": [{"mac_address": "52:54:00:aa:bb:cc"}]}}`,
		`{"inventory": {"interfaces": [{"name": "eth0", "mac_address": "52:54:00:aa:bb:cc", "has_carrier": true}],
		  "cpu": {"count": 2, "architecture": "x86_64", "flags": ["sse"]}, "memory": {"total": 1, "physical_mb": 512},
		  "disks": [{"name": "/dev/vda", "size": 5368709120, "rotational": false, "serial": null}],
		  "boot": {"current_boot_mode": "bios", "pxe_interface": "52:54:00:aa:bb:cc"}, "bmc_address": "10.0.0.5"},
		  "boot_interface": "01-52-54-00-aa-bb-cc", "error": ""}`,
		`{"inventory": {"interfaces": [], "bmc_address": 5}}`,
		`{"inventory": null}`, `[]`, `{`, `null`, `{"inventory": {"interfaces": [{"mac_address": "x"}], "disks": [{"size": -1}]}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := ParseInspection(body)
		if err != nil {
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("refusal is not a 400 fault: %T %v", err, err)
			}
			return
		}
		if len(in.Data.Inventory.Interfaces) == 0 || in.Inventory == nil {
			t.Fatalf("accepted without interfaces: %s", body)
		}
	})
}
