//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestUEFIHTTPBootInspection: agent inspection of a UEFI qemu VM behind
// castiron's Redfish emulator with boot interface redfish-https: castiron
// builds the node's ISO and sets a one-time UefiHttp boot with HttpBootUri
// pointing at it; the emulator's firmware half fetches that URL and boots
// it (no virtual media, no DHCP/PXE server anywhere); the agent configures
// its network from network_data and reports; the node ends manageable and
// powered off.
func TestUEFIHTTPBootInspection(t *testing.T) {
	r := newSimVMediaRig(t, "uefi")
	r.boot = "redfish-https"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r.enroll(ctx, t, "uefihttp", "agent")
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	r.inspectByAgent(ctx, t, "uefihttp_inspect_agent", "uefi")
	var st struct {
		LastBoot struct{ Target, HTTPBootURI, HTTPBootFile string }
		Stats    struct{ Inserts int }
	}
	r.bmc.get(t, "/redfishsim/state", &st)
	// The VM's last start was the inspection's: UefiHttp, with the image
	// the emulator fetched from castiron's ISO URL.
	if st.LastBoot.Target != "UefiHttp" || st.LastBoot.HTTPBootFile == "" {
		t.Errorf("last boot %+v, want UefiHttp from a fetched image", st.LastBoot)
	}
	if st.Stats.Inserts != 0 {
		t.Errorf("virtual media inserted %d times for a redfish-https node", st.Stats.Inserts)
	}
	if st.LastBoot.HTTPBootURI == "" || !strings.Contains(st.LastBoot.HTTPBootURI, "/boot/vmedia/") {
		t.Errorf("HttpBootUri %q, want castiron's ISO URL", st.LastBoot.HTTPBootURI)
	}
}
