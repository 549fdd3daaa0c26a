//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"castiron/ramdisk/initramfs"
)

// TestPowerCut: castiron in a qemu VM (TCG) with its data directory on a
// virtio disk of its own (ext4, cache=none: what the guest syncs is on the
// host's disk, what it does not is lost with the VM), several clients
// creating nodes (and asking some to be managed) through a hostfwd on
// 127.0.0.1, then the VM killed (kill -9 of qemu: a power cut) in the middle
// of the burst and booted again on the same disk. Over several rounds:
// every create answered 201 is there after the reboot, SQLite's
// integrity_check is ok, and once castiron has recovered no node is
// reserved or left in verifying. It prints the counts of every round.
//
// E2E_POWERCUT_ROUNDS (default 5) sets the number of power cuts.
func TestPowerCut(t *testing.T) {
	if os.Geteuid() != 0 {
		unavailable(t, "needs root (the test makes an ext4 file system)")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		unavailable(t, "qemu-system-x86_64 not installed")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		unavailable(t, "mkfs.ext4 not installed (e2fsprogs)")
	}
	rounds := 5
	if s := os.Getenv("E2E_POWERCUT_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 1 {
			t.Fatalf("E2E_POWERCUT_ROUNDS=%q", s)
		}
	}
	kdir := vmKernelDir(t)
	dir := t.TempDir()
	kernel, initrd := powercutImage(t, kdir, dir)

	disk := filepath.Join(dir, "data.raw")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 512<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-F", "-q", "-L", "castiron", disk).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}

	acked := map[string]bool{}   // every node a create was answered 201 for
	managed := map[string]bool{} // nodes a manage verb was answered 202 for
	var totalAcked, totalLost int
	for round := 1; round <= rounds+1; round++ {
		vm := bootPowercutVM(t, qemu, kernel, initrd, disk, dir, round)
		check := vm.waitCheck(t)
		if round > 1 {
			// What the boot found before castiron touched the database.
			if check.integrity != "ok" {
				t.Errorf("round %d: integrity_check after the power cut: %q", round-1, check.integrity)
			}
		}
		api := vm.waitAPI(t)
		nodes := api.listNodes(t)
		present := 0
		var lost []string
		for id := range acked {
			if _, ok := nodes[id]; ok {
				present++
			} else {
				lost = append(lost, id)
			}
		}
		if round > 1 {
			t.Logf("round %d: after the power cut: of %d creates acknowledged in all rounds %d present, %d lost (%d in this cut); %d nodes stored (%d created but not acknowledged before a cut); integrity_check %s",
				round-1, len(acked), present, len(lost), len(lost)-totalLost, len(nodes), len(nodes)-present, check.integrity)
			if len(lost) > totalLost {
				t.Errorf("round %d: %d acknowledged creates lost in this cut, e.g. %v", round-1, len(lost)-totalLost, lost[:min(3, len(lost))])
			}
			totalLost = len(lost)
			api.checkRecovered(t, round-1, managed)
		}
		if round > rounds {
			vm.kill(t)
			break
		}
		// The burst: 6 clients; the power goes 1.5-4 s into it.
		cut := time.Duration(1500+rand.IntN(2500)) * time.Millisecond
		got := api.burst(t, 6, cut, vm)
		for _, id := range got.created {
			acked[id] = true
		}
		for _, id := range got.managed {
			managed[id] = true
		}
		totalAcked += len(got.created)
		t.Logf("round %d: burst of %v: %d creates and %d manage verbs acknowledged, %d requests failed at the power cut; qemu killed",
			round, cut.Round(time.Millisecond), len(got.created), len(got.managed), got.failed)
	}
	t.Logf("power cuts: %d, acknowledged creates: %d, lost: %d", rounds, totalAcked, totalLost)
	fmt.Printf("POWERCUT rounds=%d acknowledged=%d lost=%d\n", rounds, totalAcked, totalLost)
}

// vmKernelDir is castiron's small VM kernel as ramdisk/kernel/build.sh
// cached it: $CASTIRON_VM_KERNEL_DIR, else what build/vmkernel/selected
// names (make ramdisk-kernel-vm).
func vmKernelDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CASTIRON_VM_KERNEL_DIR")
	if dir == "" {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "build", "vmkernel", "selected"))
		if err != nil {
			unavailable(t, "no VM kernel (make ramdisk-kernel-vm, or set CASTIRON_VM_KERNEL_DIR): %v", err)
		}
		dir = strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(filepath.Join(dir, "kver")); err != nil {
		unavailable(t, "no VM kernel in %s: %v", dir, err)
	}
	return dir
}

// powercutImage builds the VM's kernel and initramfs: /init is
// testdata/powercutinit, /castiron the binary under test.
func powercutImage(t *testing.T, kdir, dir string) (kernel, initrd string) {
	t.Helper()
	initBin := filepath.Join(dir, "powercutinit")
	cmd := exec.Command("go", "build", "-o", initBin, "./tests/e2e/testdata/powercutinit")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build powercutinit: %v: %s", err, out)
	}
	kver, err := os.ReadFile(filepath.Join(kdir, "kver"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := initramfs.Build(context.Background(), initramfs.Options{
		AgentPath:     initBin,
		AgentVersion:  "powercut",
		KernelVersion: strings.TrimSpace(string(kver)),
		ModulesRoot:   filepath.Join(kdir, "lib", "modules"),
		BootDir:       filepath.Join(kdir, "boot"),
		Modules:       []string{},
		Extra:         map[string]string{"/castiron": castironBinary(t)},
		OutDir:        filepath.Join(dir, "image"),
	})
	if err != nil {
		t.Fatalf("initramfs: %v", err)
	}
	return res.KernelPath, res.InitramfsPath
}

type powercutVM struct {
	cmd     *exec.Cmd
	port    int
	console *consoleLines
	exited  chan struct{}
}

// consoleLines keeps the VM's console for the test to wait on and log.
type consoleLines struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func (c *consoleLines) add(line string) {
	c.mu.Lock()
	c.lines = append(c.lines, line)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
}

func (c *consoleLines) find(re *regexp.Regexp) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}

func (c *consoleLines) tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines[max(0, len(c.lines)-n):], "\n")
}

// powercutBootTimeout bounds one boot up to castiron's first answer under
// TCG on a loaded machine.
const powercutBootTimeout = 3 * time.Minute

func bootPowercutVM(t *testing.T, qemu, kernel, initrd, disk, dir string, round int) *powercutVM {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(qemu,
		"-nodefaults", "-accel", "tcg", "-m", "512", "-smp", "1", "-display", "none", "-no-reboot",
		"-serial", "stdio",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet",
		// user-mode networking with restrict=on: the guest reaches nothing,
		// the test reaches its API through the forward on 127.0.0.1.
		"-netdev", fmt.Sprintf("user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:%d-10.0.2.15:6385", port),
		"-device", "virtio-net-pci,netdev=n0",
		"-device", "virtio-rng-pci",
		// cache=none: the guest's writes bypass the host's page cache and
		// its flushes are the host's fdatasync; what the guest has not
		// flushed dies with qemu.
		"-drive", "file="+disk+",if=virtio,format=raw,cache=none",
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	vm := &powercutVM{cmd: cmd, port: port, console: &consoleLines{added: make(chan struct{}, 1)}, exited: make(chan struct{})}
	log, err := os.Create(filepath.Join(dir, fmt.Sprintf("console-%d.log", round)))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(vm.exited)
		defer log.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			vm.console.add(sc.Text())
		}
		cmd.Wait()
	}()
	t.Cleanup(func() { vm.kill(t) })
	return vm
}

// kill is the power cut: SIGKILL to qemu, then wait until it is gone.
func (vm *powercutVM) kill(t *testing.T) {
	if vm.cmd.Process == nil {
		return
	}
	vm.cmd.Process.Signal(syscall.SIGKILL)
	<-vm.exited
}

type powercutCheck struct {
	integrity string
	nodes     int
}

var checkLine = regexp.MustCompile(`powercutinit: CHECK (?:none|integrity="([^"]*)" nodes=(-?\d+))`)
var failedLine = regexp.MustCompile(`powercutinit: FAILED (.*)`)

// waitCheck waits for the init's CHECK line.
func (vm *powercutVM) waitCheck(t *testing.T) powercutCheck {
	t.Helper()
	deadline := time.After(powercutBootTimeout)
	for {
		if m := vm.console.find(checkLine); m != nil {
			n, _ := strconv.Atoi(m[2])
			return powercutCheck{integrity: m[1], nodes: n}
		}
		if m := vm.console.find(failedLine); m != nil {
			t.Fatalf("VM init failed: %s\n%s", m[1], vm.console.tail(30))
		}
		select {
		case <-vm.console.added:
		case <-vm.exited:
			t.Fatalf("qemu exited before the check\n%s", vm.console.tail(30))
		case <-deadline:
			t.Fatalf("no CHECK line within %v\n%s", powercutBootTimeout, vm.console.tail(30))
		}
	}
}

type powercutAPI struct {
	url    string
	client *http.Client
}

// waitAPI waits until castiron answers GET /v1.
func (vm *powercutVM) waitAPI(t *testing.T) *powercutAPI {
	t.Helper()
	api := &powercutAPI{url: fmt.Sprintf("http://127.0.0.1:%d", vm.port),
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	deadline := time.Now().Add(powercutBootTimeout)
	for {
		resp, err := api.client.Get(api.url + "/v1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("castiron did not answer GET /v1 within %v: %v\n%s", powercutBootTimeout, err, vm.console.tail(30))
		}
		select {
		case <-vm.exited:
			t.Fatalf("qemu exited\n%s", vm.console.tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *powercutAPI) do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

type powercutNode struct {
	UUID           string  `json:"uuid"`
	ProvisionState string  `json:"provision_state"`
	Reservation    *string `json:"reservation"`
	LastError      *string `json:"last_error"`
}

// listNodes reads every node, a page of 1000 at a time.
func (a *powercutAPI) listNodes(t *testing.T) map[string]powercutNode {
	t.Helper()
	out := map[string]powercutNode{}
	marker := ""
	for {
		path := "/v1/nodes?fields=uuid,provision_state,reservation,last_error&limit=1000"
		if marker != "" {
			path += "&marker=" + marker
		}
		code, body, err := a.do("GET", path, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v %s", path, code, err, body)
		}
		var page struct {
			Nodes []powercutNode `json:"nodes"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Nodes {
			out[n.UUID] = n
		}
		if len(page.Nodes) < 1000 {
			return out
		}
		marker = page.Nodes[len(page.Nodes)-1].UUID
	}
}

// checkRecovered: after the restart no node is reserved or left in
// verifying (castiron's start-up recovery, as Ironic's conductor does),
// a node a manage verb was acknowledged for is manageable or back in
// enroll with a last_error, and every other node is in enroll.
func (a *powercutAPI) checkRecovered(t *testing.T, round int, managed map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var pending, lost []string // pending may still change; lost will not
		counts := map[string]int{}
		for id, n := range a.listNodes(t) {
			counts[n.ProvisionState]++
			switch {
			case n.Reservation != nil:
				pending = append(pending, fmt.Sprintf("%s reserved by %s", id, *n.Reservation))
			case n.ProvisionState == "manageable":
				// Acknowledged, or a manage whose 202 the cut swallowed
				// after its commit: both fine.
			case n.ProvisionState == "enroll":
				if managed[id] && n.LastError == nil {
					// An acknowledged verb started from enroll: either it
					// ended (manageable) or recovery failed it with an error.
					lost = append(lost, fmt.Sprintf("%s: manage acknowledged, back in enroll without last_error", id))
				}
			default:
				pending = append(pending, fmt.Sprintf("%s in %s", id, n.ProvisionState))
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			if len(lost) > 0 {
				t.Errorf("round %d: %d acknowledged manage verbs lost, e.g. %v", round, len(lost), lost[:min(5, len(lost))])
			}
			if len(pending) > 0 {
				t.Errorf("round %d: one minute after the restart: %d nodes not recovered, e.g. %v", round, len(pending), pending[:min(5, len(pending))])
			}
			t.Logf("round %d: after recovery, provision states %v", round, counts)
			return
		}
		time.Sleep(time.Second)
	}
}

type burstResult struct {
	created, managed []string
	failed           int
}

// burst runs clients creating nodes (every tenth also asked to manage)
// until cut has passed, then kills the VM while they are still sending.
func (a *powercutAPI) burst(t *testing.T, clients int, cut time.Duration, vm *powercutVM) burstResult {
	t.Helper()
	var mu sync.Mutex
	var res burstResult
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := a.do("POST", "/v1/nodes", map[string]any{"driver": "fake-hardware"})
				if err != nil || code != http.StatusCreated {
					mu.Lock()
					res.failed++
					mu.Unlock()
					if err == nil && code < 500 {
						t.Errorf("create: %d %s", code, body)
					}
					continue
				}
				var n powercutNode
				if err := json.Unmarshal(body, &n); err != nil || n.UUID == "" {
					t.Errorf("create answer %s: %v", body, err)
					continue
				}
				mu.Lock()
				res.created = append(res.created, n.UUID)
				mu.Unlock()
				if i%10 != 9 {
					continue
				}
				code, body, err = a.do("PUT", "/v1/nodes/"+n.UUID+"/states/provision", map[string]any{"target": "manage"})
				switch {
				case err == nil && code == http.StatusAccepted:
					mu.Lock()
					res.managed = append(res.managed, n.UUID)
					mu.Unlock()
				case err == nil && code < 500:
					t.Errorf("manage %s: %d %s", n.UUID, code, body)
				default:
					mu.Lock()
					res.failed++
					mu.Unlock()
				}
			}
		}(c)
	}
	time.Sleep(cut)
	vm.kill(t) // the power cut, with every client's next request on its way
	close(stop)
	wg.Wait()
	return res
}

// freePort picks a free TCP port on 127.0.0.1 for the hostfwd.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
