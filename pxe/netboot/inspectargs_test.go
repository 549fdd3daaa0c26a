package netboot

import (
	"slices"
	"testing"

	"castiron/pxe/boot"
)

// TestInspectionKernelArgs: --inspection-kernel-args reach the kernel
// command line of inspection boots only.
func TestInspectionKernelArgs(t *testing.T) {
	p := scriptParams{APIURL: "http://10.0.0.1:6385", Inspect: []string{"ipa-collect-lldp=1", "ipa-lldp-timeout=10"}}
	p.Decision = boot.Decision{NodeUUID: "n-1", Purpose: "inspect"}
	if args := kernelArgs(p); !slices.Contains(args, "ipa-collect-lldp=1") || !slices.Contains(args, "ipa-lldp-timeout=10") {
		t.Fatalf("inspection boot: %q", args)
	}
	p.Decision.Purpose = "deploy"
	if args := kernelArgs(p); slices.Contains(args, "ipa-collect-lldp=1") {
		t.Fatalf("deploy boot: %q", args)
	}
}
