// Package lldpcap listens for the LLDP frames the switch ports send, as
// ironic-python-agent does with ipa-collect-lldp=1: one raw AF_PACKET
// socket per NIC (mdlayher/packet) for EtherType 0x88cc, promiscuous while
// it listens, the first LLDPDU of each NIC kept, everything bounded by a
// wait (IPA's ipa-lldp-timeout).
package lldpcap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mdlayher/packet"

	"castiron/ramdisk/lldp"
)

// DefaultWait is IPA's ipa-lldp-timeout default: switches send LLDP every
// 30 seconds by default.
const DefaultWait = 30 * time.Second

// Collect listens on the named interfaces at once until each has sent one
// LLDPDU, wait has passed or ctx ends, and returns the TLVs per interface
// (interfaces that sent none are absent). The sockets are opened before
// Collect returns control to other goroutines' work, in the calling
// thread's network namespace. An interface that cannot be opened is
// reported in the error; the others are still read.
func Collect(ctx context.Context, ifaces []string, wait time.Duration) (map[string][]lldp.TLV, error) {
	var errs []error
	conns := map[string]*packet.Conn{}
	for _, name := range ifaces {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := packet.Listen(ifi, packet.Raw, lldp.EtherType, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("lldp on %s: %w", name, err))
			continue
		}
		// LLDP goes to 01:80:c2:00:00:0e, which a NIC may filter out;
		// promiscuous mode ends with the socket.
		_ = c.SetPromiscuous(true)
		conns[name] = c
	}
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var mu sync.Mutex
	out := map[string][]lldp.TLV{}
	var wg sync.WaitGroup
	for name, c := range conns {
		_ = c.SetReadDeadline(deadline)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tlvs, ok := readOne(c); ok {
				mu.Lock()
				out[name] = tlvs
				mu.Unlock()
			}
		}()
	}
	// ctx ending moves the deadlines to now, which ends the reads.
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now())
		}
	})
	wg.Wait()
	stop()
	for _, c := range conns {
		_ = c.Close()
	}
	return out, errors.Join(errs...)
}

// readOne reads frames until one is a well-formed LLDPDU.
func readOne(c *packet.Conn) ([]lldp.TLV, bool) {
	buf := make([]byte, 1600)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return nil, false
		}
		if tlvs, ok := Frame(buf[:n]); ok {
			return tlvs, true
		}
	}
}

// Frame reads an Ethernet frame carrying an LLDPDU (untagged, or with one
// 802.1Q tag) into its TLVs.
func Frame(f []byte) ([]lldp.TLV, bool) {
	if len(f) < 14 {
		return nil, false
	}
	et, off := binary.BigEndian.Uint16(f[12:]), 14
	if et == 0x8100 && len(f) >= 18 {
		et, off = binary.BigEndian.Uint16(f[16:]), 18
	}
	if et != lldp.EtherType {
		return nil, false
	}
	tlvs, err := lldp.Split(f[off:])
	if err != nil || len(tlvs) == 0 {
		return nil, false
	}
	return tlvs, true
}
