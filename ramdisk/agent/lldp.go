package main

import (
	"context"
	"log/slog"
	"time"

	"castiron/ramdisk/agent/lldpcap"
	"castiron/ramdisk/lldp"
	"castiron/ramdisk/protocol"
)

// collectLLDP fills each NIC's "lldp" with the TLVs its switch port sent
// (IPA's [type, hex] pairs), listening on all NICs at once for at most
// wait (IPA's default when 0). A NIC that heard nothing keeps null, as in
// IPA; failures are logged, inspection goes on.
func collectLLDP(ctx context.Context, log *slog.Logger, inv *protocol.Inventory, wait time.Duration) {
	if wait <= 0 {
		wait = lldpcap.DefaultWait
	}
	names := make([]string, len(inv.Interfaces))
	for i, nic := range inv.Interfaces {
		names[i] = nic.Name
	}
	start := time.Now()
	got, err := lldpcap.Collect(ctx, names, wait)
	if err != nil {
		log.Warn("LLDP: some interfaces could not be read", "err", err)
	}
	for i, nic := range inv.Interfaces {
		if tlvs, ok := got[nic.Name]; ok {
			inv.Interfaces[i].LLDP = lldp.Raw(tlvs)
		}
	}
	log.Info("LLDP collected", "interfaces", len(got), "of", len(names), "took", time.Since(start).Round(time.Millisecond))
}
