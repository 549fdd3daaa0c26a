// Command testinit is the /init of the initramfs the boot test builds: it
// mounts proc, sysfs and devtmpfs, loads /etc/modules.order with
// finit_module, prints one marker line naming the network interfaces and
// block devices the kernel now shows, and whether a second archive the
// test appended was unpacked too (its file /etc/overlay), and powers the
// machine off.
//
//	TESTINIT-OK console=c5:1 ifaces=eth0 disks=vda loaded=54 skipped=1 uptime=6.31 overlay=yes failed=
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	// Before devtmpfs hides it: the archive's own /dev/console node.
	console := "missing"
	var st unix.Stat_t
	if err := unix.Stat("/dev/console", &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
		console = fmt.Sprintf("c%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	for _, m := range []struct{ src, dst, fs string }{{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}} {
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			fmt.Println("TESTINIT-ERROR mount", m.dst, err)
		}
	}
	loaded, skipped, failed := loadModules("/etc/modules.order", "/lib/modules")

	// Probing is asynchronous for some drivers: wait a little for both.
	var ifaces, disks []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ifaces, disks = list("/sys/class/net", "lo"), list("/sys/block", "loop")
		if len(ifaces) > 0 && len(disks) > 0 {
			break
		}
	}
	uptime, _ := os.ReadFile("/proc/uptime")
	overlay := "no"
	if _, err := os.Stat("/etc/overlay"); err == nil {
		overlay = "yes"
	}
	fmt.Printf("TESTINIT-OK console=%s ifaces=%s disks=%s loaded=%d skipped=%d uptime=%s overlay=%s failed=%s\n",
		console, strings.Join(ifaces, ","), strings.Join(disks, ","), loaded, skipped,
		strings.Fields(string(uptime) + " ?")[0], overlay, strings.Join(failed, ","))
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Println("TESTINIT-ERROR poweroff", err)
	}
	select {} // PID 1 must not exit
}

// loadModules loads every module; ENODEV/ENXIO (no such hardware or CPU
// feature) and EEXIST count as skipped, anything else as failed.
func loadModules(order, dir string) (loaded, skipped int, failed []string) {
	f, err := os.Open(order)
	if err != nil {
		return 0, 0, []string{"no-" + order}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rel := strings.TrimSpace(sc.Text())
		if rel == "" {
			continue
		}
		switch err := finit(filepath.Join(dir, rel)); {
		case err == nil:
			loaded++
		case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO), errors.Is(err, unix.EEXIST):
			skipped++
		default:
			failed = append(failed, fmt.Sprintf("%s(%v)", filepath.Base(rel), err))
		}
	}
	return loaded, skipped, failed
}

func finit(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.FinitModule(int(f.Fd()), "", 0)
}

// list names the entries of a sysfs class directory, minus those starting
// with skip.
func list(dir, skip string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), skip) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}
