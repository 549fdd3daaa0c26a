// Package redfishlab starts the shared sushy-tools Redfish lab (OpenStack's
// Redfish emulator with its libvirt backend driving one qemu TCG domain,
// all inside a network namespace; see redfish-lab/README.md in the shared
// folder) for a test, and stops it after. The lab can run once per machine:
// Start holds an exclusive flock for as long as it is up. It is test
// support only; nothing in the binary imports it.
package redfishlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// Lab is a running lab. URL reaches the emulator from the test's own
// network namespace (a forwarder into the lab's); NS, Bridge and IP are
// where servers the VM or the emulator must reach listen (Listen).
type Lab struct {
	Dir    string // the lab's scripts
	Run    string // RF_RUN: pids, logs, disks, console
	NS     string
	Bridge string
	IP     string // the bridge's address
	Port   int    // the emulator's port inside the namespace
	User   string
	Pass   string
	VM     string // libvirt domain name
	VMMAC  string // the VM's NIC
	URL    string // http://127.0.0.1:<port> in the caller's namespace
}

// Settings of the lab (its lib.sh defaults, set explicitly so the test
// knows them).
const (
	ns     = "rfnet"
	bridge = "rfbr0"
	ip     = "10.252.7.1"
	port   = 8000
	user   = "admin"
	pass   = "password"
	vm     = "rfvm0"
	vmMAC  = "52:54:00:7f:00:01"
)

// unavailable skips the test, or fails it under CI=true, where the lab must
// be there.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("redfish lab: "+format, args...)
	}
	t.Skipf("redfish lab: "+format, args...)
}

// labDir finds the lab: $REDFISH_LAB, or the shared folder beside the
// repository (../shared/redfish-lab, as CI lays it out).
func labDir() string {
	cands := []string{os.Getenv("REDFISH_LAB")}
	if root := repoRoot(); root != "" {
		cands = append(cands, filepath.Join(filepath.Dir(root), "shared", "redfish-lab"))
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, "up.sh")); err == nil {
			return c
		}
	}
	return ""
}

// repoRoot is the directory of the go.mod above the working directory (a
// test's is its package's folder), "" outside the repository.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return ""
}

// LockPath is the machine-wide lab lock: $REDFISH_LAB_LOCK, or one in the
// folder that holds the repository (checkouts side by side share it), or
// one in /tmp when that folder is not writable.
func LockPath() string {
	if p := os.Getenv("REDFISH_LAB_LOCK"); p != "" {
		return p
	}
	if root := repoRoot(); root != "" {
		if parent := filepath.Dir(root); syscall.Access(parent, 2 /* W_OK */) == nil {
			return filepath.Join(parent, ".redfishlab.lock")
		}
	}
	return filepath.Join(os.TempDir(), "castiron-redfishlab.lock")
}

// sushyTree names the sushy-tools tree the lab's up.sh runs: $SUSHY_TOOLS_DIR,
// or "" when it is unset or not such a tree.
func sushyTree() string {
	d := os.Getenv("SUSHY_TOOLS_DIR")
	if d == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(d, "sushy_tools", "emulator", "main.py")); err != nil {
		return ""
	}
	return d
}

// RequireSushy skips the test, also under CI=true, when there is no
// sushy-tools tree to run. Tests that build expensive fixtures call it
// before them.
func RequireSushy(t testing.TB) {
	t.Helper()
	if sushyTree() == "" {
		t.Skip("redfish lab: SUSHY_TOOLS_DIR is unset or names no sushy-tools tree (sushy_tools/emulator/main.py); " +
			"set it to a local checkout of sushy-tools 2.2.0 to run this test")
	}
}

// Start brings the lab up (down.sh first: whatever is up without the lock
// is stale), or skips the test when the machine cannot run it (not root, no
// libvirt or sushy-tools' Python dependencies, no lab folder).
//
// Without a sushy-tools tree ($SUSHY_TOOLS_DIR) the test skips even under
// CI=true: sushy-tools is third-party code that neither the repository nor
// the shared folder may carry, so CI never has it. castiron's own BMC
// emulator replaces the lab in CI.
func Start(t testing.TB) *Lab {
	t.Helper()
	RequireSushy(t)
	dir := labDir()
	if dir == "" {
		unavailable(t, "no redfish-lab folder (set REDFISH_LAB)")
	}
	if os.Geteuid() != 0 {
		unavailable(t, "needs root (network namespace, system libvirtd)")
	}
	for _, c := range []string{"ip", "virsh", "libvirtd", "virtlogd", "htpasswd", "qemu-system-x86_64", "qemu-img", "curl"} {
		if _, err := exec.LookPath(c); err != nil {
			unavailable(t, "%s not installed (tests/deps.sh installs the lab's packages)", c)
		}
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import flask, libvirt, requests, tenacity, bcrypt, webob, pbr").CombinedOutput(); err != nil {
		unavailable(t, "sushy-tools' Python dependencies are missing: %s", strings.TrimSpace(string(out)))
	}

	unlock := lock(t)
	l := &Lab{Dir: dir, Run: filepath.Join(os.TempDir(), fmt.Sprintf("castiron-rflab-%d", os.Getpid())),
		NS: ns, Bridge: bridge, IP: ip, Port: port, User: user, Pass: pass, VM: vm, VMMAC: vmMAC}
	env := append(os.Environ(), "RF_NS="+ns, "RF_BR="+bridge, "RF_IP="+ip, "RF_PORT="+strconv.Itoa(port),
		"RF_USER="+user, "RF_PASS="+pass, "RF_VM="+vm, "RF_VM_MAC="+vmMAC, "RF_RUN="+l.Run)
	script := func(name string, limit time.Duration) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, name))
		cmd.Env, cmd.Stdin = env, nil
		cmd.WaitDelay = 5 * time.Second
		return cmd.CombinedOutput()
	}
	_, _ = script("down.sh", time.Minute)
	start := time.Now()
	out, err := script("up.sh", 3*time.Minute)
	t.Cleanup(func() {
		if out, err := script("down.sh", 2*time.Minute); err != nil {
			t.Logf("redfish lab down.sh: %v\n%s", err, out)
		}
		_ = os.RemoveAll(l.Run)
		unlock()
	})
	if err != nil {
		emu, _ := os.ReadFile(filepath.Join(l.Run, "emulator.log"))
		t.Fatalf("redfish lab up.sh: %v\n%s\nemulator.log:\n%s", err, out, tail(emu, 3000))
	}
	t.Logf("redfish lab up in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
	l.URL = "http://" + l.forward(t, fmt.Sprintf("127.0.0.1:%d", port))
	return l
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// lock takes the machine-wide lab lock, waiting up to 15 minutes for
// another test or engineer to release it.
func lock(t testing.TB) func() {
	t.Helper()
	path := LockPath()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("redfish lab lock %s: %v", path, err)
	}
	deadline := time.Now().Add(15 * time.Minute)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("redfish lab lock %s: %v (someone holds the lab)", path, err)
		}
		if !logged {
			t.Logf("redfish lab: waiting for %s", path)
			logged = true
		}
		time.Sleep(time.Second)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

// InNS runs fn on an OS thread switched into the lab's namespace: sockets
// fn creates (listeners, connections) stay in it.
func (l *Lab) InNS(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(l.NS)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = fn()
		// Back home before the thread serves anyone else; if that fails the
		// thread stays locked and dies with this goroutine. (A thread left
		// in the lab's namespace would make down.sh, which kills whatever is
		// in it, kill the test.)
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Listen opens a TCP listener on the lab's bridge address (port 0: any),
// reachable from the emulator and the VM.
func (l *Lab) Listen(t testing.TB) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := l.InNS(func() (err error) {
		ln, err = net.Listen("tcp", l.IP+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// forward relays a loopback port of the caller's namespace to target inside
// the lab's, and returns the local address.
func (l *Lab) forward(t testing.TB, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var up net.Conn
				if err := l.InNS(func() (err error) {
					up, err = net.DialTimeout("tcp", target, 5*time.Second)
					return err
				}); err != nil {
					return
				}
				track(up)
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// Virsh runs virsh against the lab's libvirtd and returns its output.
func (l *Lab) Virsh(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.NS, "virsh", "-c", "qemu:///system"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// SystemPath asks the emulator for the lab's only system.
func (l *Lab) SystemPath(t testing.TB) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, l.URL+"/redfish/v1/Systems", nil)
	req.SetBasicAuth(l.User, l.Pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&coll); err != nil || len(coll.Members) != 1 {
		t.Fatalf("lab systems: %v %+v", err, coll)
	}
	return coll.Members[0].ID
}
