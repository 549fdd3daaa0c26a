package netup

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const linkPoll = 100 * time.Millisecond

func setLoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// waitLink waits for the boot NIC, setting every candidate NIC up as it
// appears (carrier is only known on an up link). It returns the NIC with
// the wanted MAC once it has carrier (or the wait is over), else the first
// candidate with carrier.
func waitLink(ctx context.Context, cfg Config) (netlink.Link, error) {
	start := time.Now()
	upped := map[int]bool{}
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("listing links: %w", err)
		}
		slices.SortFunc(links, func(a, b netlink.Link) int { return a.Attrs().Index - b.Attrs().Index })
		var wanted, firstWithCarrier netlink.Link
		for _, l := range links {
			if !candidate(l) {
				continue
			}
			if !upped[l.Attrs().Index] {
				if err := netlink.LinkSetUp(l); err != nil {
					cfg.Log.Warn("link up failed", "nic", l.Attrs().Name, "err", err)
				}
				upped[l.Attrs().Index] = true
			}
			if cfg.MAC != nil && bytes.Equal(l.Attrs().HardwareAddr, cfg.MAC) {
				wanted = l
			}
			if firstWithCarrier == nil && hasCarrier(l) {
				firstWithCarrier = l
			}
		}
		waited := time.Since(start)
		over := waited >= cfg.LinkTimeout
		switch {
		case wanted != nil && (hasCarrier(wanted) || over):
			if !hasCarrier(wanted) {
				cfg.Log.Warn("boot NIC has no carrier, trying DHCP anyway", "nic", wanted.Attrs().Name)
			}
			return wanted, nil
		case cfg.MAC == nil && firstWithCarrier != nil:
			return firstWithCarrier, nil
		case over && firstWithCarrier != nil:
			cfg.Log.Warn("boot NIC not found, using the first NIC with carrier", "want", cfg.MAC.String(), "nic", firstWithCarrier.Attrs().Name)
			return firstWithCarrier, nil
		case over:
			return nil, &ErrNoLink{MAC: cfg.MAC, Waited: waited, Summary: summary(links)}
		}
		if err := sleep(ctx, linkPoll); err != nil {
			return nil, err
		}
	}
}

// candidate: an Ethernet NIC. Physical NICs have no link kind ("device");
// veth is accepted so the agent can be tested over one.
func candidate(l netlink.Link) bool {
	a := l.Attrs()
	return a.EncapType == "ether" && len(a.HardwareAddr) == 6 && (l.Type() == "device" || l.Type() == "veth")
}

func hasCarrier(l netlink.Link) bool {
	return l.Attrs().RawFlags&unix.IFF_LOWER_UP != 0
}

func summary(links []netlink.Link) string {
	var parts []string
	for _, l := range links {
		a := l.Attrs()
		parts = append(parts, fmt.Sprintf("%s/%s/%s carrier=%v", a.Name, l.Type(), a.HardwareAddr, hasCarrier(l)))
	}
	return strings.Join(parts, ", ")
}
