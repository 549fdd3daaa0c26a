// powercutinit is /init of the power-cut test's VM (tests/e2e/powercut_test.go):
// it mounts castiron's data disk (/dev/vda, ext4), checks the database an
// earlier boot left there (SQLite's integrity_check, the node count) and
// prints the result on the console, then runs /castiron serve on it, its
// API on 10.0.2.15:6385 (qemu user-mode networking; the test reaches it
// through a hostfwd on 127.0.0.1). It never shuts down cleanly: the test
// ends the VM with kill -9 of qemu, a power cut.
package main

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	_ "modernc.org/sqlite"
)

func say(format string, args ...any) { fmt.Printf("powercutinit: "+format+"\n", args...) }

func fail(format string, args ...any) {
	say("FAILED "+format, args...)
	// Keep PID 1 alive (its exit panics the kernel); the test sees FAILED.
	for {
		time.Sleep(time.Hour)
	}
}

func main() {
	for _, m := range []struct{ src, dst, fs string }{
		{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"tmpfs", "/tmp", "tmpfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := syscall.Mount(m.src, m.dst, m.fs, 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			fail("mount %s: %v", m.dst, err)
		}
	}
	if err := network(); err != nil {
		fail("network: %v", err)
	}
	disk := "/dev/vda"
	for i := 0; ; i++ {
		if _, err := os.Stat(disk); err == nil {
			break
		}
		if i == 300 {
			fail("no %s", disk)
		}
		time.Sleep(100 * time.Millisecond)
	}
	os.MkdirAll("/data", 0o750)
	// ext4's defaults: data=ordered, barriers on (a flush reaches the disk).
	if err := syscall.Mount(disk, "/data", "ext4", 0, ""); err != nil {
		fail("mount %s: %v", disk, err)
	}
	if _, err := os.Stat("/data/castiron.db"); err == nil {
		check("/data/castiron.db")
	} else {
		say("CHECK none (a new data disk)")
	}
	// The conductor name is fixed: the next boot releases what this one
	// held. No authentication: the API is reachable only through the
	// test's hostfwd on the host's loopback.
	cmd := exec.Command("/castiron", "serve", "--listen", "0.0.0.0:6385", "--data-dir", "/data",
		"--conductor-name", "powercut", "--insecure-noauth")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = []string{"HOME=/tmp", "PATH=/"}
	if err := cmd.Start(); err != nil {
		fail("start castiron: %v", err)
	}
	say("castiron started, pid %d", cmd.Process.Pid)
	// PID 1 reaps every orphan until the power goes.
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		if pid == cmd.Process.Pid {
			fail("castiron exited: %v", ws)
		}
	}
}

// check opens the database as castiron would (recovering its WAL) and
// prints SQLite's integrity_check and the node count.
func check(path string) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		fail("open %s: %v", path, err)
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil {
		integrity = "error:" + err.Error()
	}
	var nodes int
	if err := db.QueryRow("SELECT COUNT(*) FROM nodes").Scan(&nodes); err != nil {
		nodes = -1
	}
	say("CHECK integrity=%q nodes=%d", integrity, nodes)
}

// network: lo up, eth0 up as 10.0.2.15/24 (qemu user-mode's guest
// address; its host side, 10.0.2.2, is on the link).
func network() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	var eth netlink.Link
	for i := 0; ; i++ {
		if eth, err = netlink.LinkByName("eth0"); err == nil {
			break
		}
		if i == 300 {
			return fmt.Errorf("no eth0: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 0, 2, 15), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(eth, addr); err != nil {
		return err
	}
	return netlink.LinkSetUp(eth)
}
