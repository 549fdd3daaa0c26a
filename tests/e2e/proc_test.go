//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procAlive reports whether pid runs and is not a zombie: orphans are reaped
// lazily here (NOTES.md gotcha 15), so /proc/PID alone is not enough.
func procAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// procCmdline is pid's command line, space separated ("" if gone).
func procCmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// stopPID ends one process we started: SIGTERM, then SIGKILL after grace.
// want, when set, must occur in its command line, so a recycled PID is left
// alone.
func stopPID(pid int, want string, grace time.Duration) error {
	if !procAlive(pid) {
		return nil
	}
	if want != "" && !strings.Contains(procCmdline(pid), want) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, 3*time.Second) {
		return nil
	}
	return fmt.Errorf("pid %d (%s) survived SIGKILL", pid, want)
}

// waitGone polls until pid is dead or d passed.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for procAlive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// daemon is a long-running process the harness started and owns. Wait runs
// in one goroutine that ends when the process does; stop ends the process.
type daemon struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, valid after exited is closed
}

// startDaemon starts cmd; its output goes to logPath.
func startDaemon(name string, cmd *exec.Cmd, logPath string) (*daemon, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a ^C to `go test` reaches the test binary, whose
	// cleanups then stop the daemons in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		logf.Close()
		close(d.exited)
	}()
	return d, nil
}

// PID is the daemon's process id.
func (d *daemon) PID() int { return d.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (d *daemon) stop(grace time.Duration) error {
	if !d.running() {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return nil
	case <-time.After(grace):
	}
	_ = d.cmd.Process.Kill()
	select {
	case <-d.exited:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", d.name, d.PID())
	}
}

// run executes a short command and returns its combined output; the error
// carries the output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || ctx.Err() == nil {
			return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), ctx.Err())
	}
	return string(out), nil
}
