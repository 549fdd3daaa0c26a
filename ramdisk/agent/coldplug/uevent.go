package coldplug

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Uevents is the kernel's uevent broadcast (NETLINK_KOBJECT_UEVENT): Wait
// returns when a device with a modalias was added.
type Uevents struct {
	f *os.File // non-blocking socket in Go's poller, so deadlines interrupt reads
}

// ueventBufBytes holds the burst of a coldplug pass (every device and module
// a driver brings) until the next Drain; overflowing it is harmless (see
// Wait), the kernel's default is just small.
const ueventBufBytes = 4 << 20

// OpenUevents subscribes to the kernel's uevents.
func OpenUevents() (*Uevents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("uevent socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uevent socket: bind: %w", err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, ueventBufBytes) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, ueventBufBytes) // without CAP_NET_ADMIN
	}
	return newUevents(fd), nil
}

// newUevents wraps a non-blocking datagram socket.
func newUevents(fd int) *Uevents { return &Uevents{f: os.NewFile(uintptr(fd), "uevent")} }

func (u *Uevents) Close() error { return u.f.Close() }

// Drain discards the uevents that have arrived.
func (u *Uevents) Drain() { u.read(func([]byte) bool { return false }, false) }

// Wait returns when a device with a modalias was added, or when uevents
// were lost (the socket overflowed: a rescan finds what they said).
func (u *Uevents) Wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { u.f.SetReadDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			u.f.SetReadDeadline(time.Time{}) // the AfterFunc ran: clear its deadline
		}
	}()
	err := u.read(deviceAdded, true)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// read reads every uevent that has arrived, and returns when one satisfied
// done or was lost (ENOBUFS), or, unless wait, when none is left.
func (u *Uevents) read(done func(msg []byte) bool, wait bool) error {
	rc, err := u.f.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 16<<10)
	var readErr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return !wait
			case err == unix.ENOBUFS:
				if wait {
					return true
				}
			case err != nil:
				readErr = err
				return true
			case done(buf[:n]):
				return true
			}
		}
	})
	if err != nil {
		return fmt.Errorf("uevent: %w", err)
	}
	if readErr != nil {
		return fmt.Errorf("uevent: %w", readErr)
	}
	return nil
}

// deviceAdded reports whether a kernel uevent ("add@/devices/...\0
// ACTION=add\0...\0MODALIAS=pci:...\0...") announces a device a module
// may drive. Module loads, class devices (block, net) and the like carry
// no MODALIAS.
func deviceAdded(msg []byte) bool {
	header, rest, ok := bytes.Cut(msg, []byte{0})
	if !ok || !bytes.HasPrefix(header, []byte("add@")) {
		return false
	}
	for field := range bytes.SplitSeq(rest, []byte{0}) {
		if bytes.HasPrefix(field, []byte("MODALIAS=")) {
			return true
		}
	}
	return false
}
