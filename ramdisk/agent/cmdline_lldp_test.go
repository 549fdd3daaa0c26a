package main

import (
	"testing"
	"time"
)

// TestCmdlineLLDP: IPA's ipa-collect-lldp and ipa-lldp-timeout; a bad or
// out-of-range timeout keeps the default (0).
func TestCmdlineLLDP(t *testing.T) {
	p := parseCmdline("ipa-api-url=http://10.0.0.1:6385 ipa-collect-lldp=1 ipa-lldp-timeout=2.5")
	if !p.CollectLLDP || p.LLDPWait != 2500*time.Millisecond {
		t.Fatalf("%+v", p)
	}
	for _, c := range []string{"ipa-collect-lldp=0 ipa-lldp-timeout=x", "ipa-lldp-timeout=-1", "ipa-lldp-timeout=99999"} {
		if p := parseCmdline(c); p.CollectLLDP || p.LLDPWait != 0 {
			t.Fatalf("%q: %+v", c, p)
		}
	}
}
