package dhcp

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// receiveQueue is the socket receive buffer asked for: in a boot storm
// (hundreds of machines powered on at once) packets arrive faster than they
// are served, and a deep queue turns drops into latency. Linux's default
// (~208 KiB) overflowed for both dnsmasq and Kea in that scenario.
const receiveQueue = 4 << 20

// listen opens UDP port on 0.0.0.0 bound to one interface (SO_BINDTODEVICE:
// requests arrive and broadcasts leave only there), with broadcasting
// allowed. Unlike server4.NewIPv4UDPConn it sets neither SO_REUSEADDR nor
// SO_REUSEPORT: a second DHCP server on the same interface (another
// castiron, a dnsmasq) must be a bind error, not a silent split of the
// traffic between two lease databases.
func listen(ctx context.Context, iface string, port int) (*net.UDPConn, error) {
	return listenOn(ctx, iface, "udp4", fmt.Sprintf("0.0.0.0:%d", port))
}

// listenOn is listen for network ("udp4", "udp6") and address.
func listenOn(ctx context.Context, iface, network, address string) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.BindToDevice(int(fd), iface); err != nil {
				err = fmt.Errorf("bind to interface %s: %w", iface, err)
				return
			}
			if network == "udp4" {
				if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
					return
				}
			}
			// The kernel's receive time of each packet, to skip stale ones
			// (maxQueueWait); best effort.
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			// Beyond net.core.rmem_max as root; else up to it (best effort).
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, receiveQueue) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, receiveQueue)
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}}
	pc, err := lc.ListenPacket(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}
