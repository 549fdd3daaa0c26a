package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reapOrphans is PID 1's duty: collect the exit status of orphaned
// processes re-parented to us, which would otherwise stay zombies. It must
// not steal children that os/exec started and will Wait for, so it only
// reaps a zombie that nobody collected for grace; exec's Wait is already
// blocked in wait4 when its child exits and wins that race easily.
func reapOrphans(ctx context.Context, procDir string, grace time.Duration) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	seen := map[int]time.Time{}
	var rescan <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-rescan:
		}
		rescan = nil
		if reapPass(procDir, os.Getpid(), seen, grace, time.Now()) {
			rescan = time.After(grace)
		}
	}
}

// reapPass reaps our zombie children first seen at least grace ago and
// says whether younger ones remain.
func reapPass(procDir string, self int, seen map[int]time.Time, grace time.Duration, now time.Time) (pending bool) {
	zombies := map[int]bool{}
	for _, pid := range zombieChildren(procDir, self) {
		zombies[pid] = true
		first, ok := seen[pid]
		if !ok {
			seen[pid], pending = now, true
			continue
		}
		if now.Sub(first) < grace {
			pending = true
			continue
		}
		var status syscall.WaitStatus
		syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
		delete(seen, pid)
	}
	for pid := range seen {
		if !zombies[pid] { // collected by its owner meanwhile
			delete(seen, pid)
		}
	}
	return pending
}

// zombieChildren lists processes in state Z whose parent is self, from
// /proc/PID/stat ("pid (comm) S ppid ..."; comm may contain blanks and
// parentheses, hence the last ')').
func zombieChildren(procDir string, self int) []int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) >= 2 && fields[0] == "Z" && fields[1] == strconv.Itoa(self) {
			pids = append(pids, pid)
		}
	}
	return pids
}
