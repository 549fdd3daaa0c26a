//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// netns is one network namespace the test created (`ip netns add`), so it
// is named in /run/netns/<Name>.
type netns struct {
	Name string
}

// newNetns creates e2e-<8 random hex digits>.
func newNetns(ctx context.Context) (*netns, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	ns := &netns{Name: "e2e-" + hex.EncodeToString(b)}
	if _, err := run(ctx, "ip", "netns", "add", ns.Name); err != nil {
		return nil, err
	}
	return ns, nil
}

// Path is the namespace's bind mount, for setns(2).
func (n *netns) Path() string { return "/run/netns/" + n.Name }

// Command is name args... run inside the namespace. `ip netns exec` execs,
// so the started process's PID is the program's own.
func (n *netns) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a short command inside the namespace.
func (n *netns) Run(ctx context.Context, name string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// IPBatch runs `ip -n NS -batch -` with one command per line (one fork for
// the whole link setup).
func (n *netns) IPBatch(ctx context.Context, lines ...string) error {
	cmd := exec.CommandContext(ctx, "ip", "-n", n.Name, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s -batch: %w: %s", n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// PIDs lists the processes running inside the namespace.
func (n *netns) PIDs(ctx context.Context) []int {
	out, err := run(ctx, "ip", "netns", "pids", n.Name)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// Delete ends whatever still runs inside the namespace (all of it was
// started by this test, through ipmi_sim or ip netns exec), deletes the
// links and the namespace itself.
func (n *netns) Delete(ctx context.Context, links ...string) error {
	for _, pid := range n.PIDs(ctx) {
		if pid == os.Getpid() { // the test itself, caught mid-dial by nsDialer
			continue
		}
		_ = stopPID(pid, "", 2*time.Second)
	}
	for _, l := range links {
		_, _ = run(ctx, "ip", "-n", n.Name, "link", "del", l)
	}
	if _, err := run(ctx, "ip", "netns", "del", n.Name); err != nil {
		return err
	}
	return nil
}
