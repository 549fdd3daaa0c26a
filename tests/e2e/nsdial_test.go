//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// nsDialer returns a DialContext that opens connections from inside the
// network namespace at nsPath, without any interface or route in the host
// namespace.
//
// A socket belongs to the namespace its creating thread was in. So one
// goroutine, locked to its OS thread, enters the namespace, dials (socket +
// connect; an IP literal is dialled in the calling goroutine, no resolver
// or parallel dials), and goes back. The connection then works from any
// thread. If returning to the host namespace fails, the goroutine exits
// still locked, and Go discards that thread instead of reusing it.
func nsDialer(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if net.ParseIP(host) == nil {
			return nil, fmt.Errorf("nsdial %s: only IP literals (no DNS inside the lab)", addr)
		}
		type result struct {
			conn net.Conn
			err  error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			conn, restored, err := dialIn(ctx, nsPath, network, addr)
			if restored {
				runtime.UnlockOSThread()
			}
			done <- result{conn, err}
		}()
		r := <-done
		return r.conn, r.err
	}
}

// dialIn runs on a locked thread: setns into nsPath, dial, setns back.
// restored is false when the thread could not get back to its namespace.
func dialIn(ctx context.Context, nsPath, network, addr string) (conn net.Conn, restored bool, err error) {
	self, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer self.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns %s: %w", nsPath, err)
	}
	var d net.Dialer
	conn, err = d.DialContext(ctx, network, addr)
	if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, false, fmt.Errorf("setns back to the host namespace: %w", rerr)
	}
	return conn, true, err
}
