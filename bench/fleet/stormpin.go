package main

// Pinning (issue 28): on a 2-core machine castiron, the bench (simulated
// rack, agents, the storm's client) and the API sampler share both cores,
// so the storm's API latencies were the machine's, not castiron's. With
// -storm-castiron-cpus and -storm-bench-cpus castiron runs on CPUs of its
// own (taskset, which execs: the pid stays castiron's) and the bench and
// its sampler on others (sched_setaffinity on every thread of this process;
// the sampler inherits it); -storm-pin-turns runs every storm unpinned and
// pinned in turn, so both see the same minutes of the machine's load.
// Other processes on the machine are not moved: what else ran on each CPU
// during the storm is reported (per-CPU busy time from /proc/stat), and so
// is the time castiron's threads waited for a CPU (schedstat).

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinning is where one storm's processes run; zero: anywhere.
type pinning struct {
	castiron, bench string // CPU lists as taskset -c takes them ("0", "1-3")
}

func (p pinning) String() string {
	if p.castiron == "" && p.bench == "" {
		return "unpinned"
	}
	return fmt.Sprintf("castiron %s, bench %s", orAll(p.castiron), orAll(p.bench))
}

func orAll(s string) string {
	if s == "" {
		return "all"
	}
	return s
}

// homeCPUs is this process's affinity as it started (what "unpinned"
// restores).
func homeCPUs() unix.CPUSet {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		log.Fatalf("sched_getaffinity: %v", err)
	}
	return s
}

func parseCPUs(list string) (unix.CPUSet, error) {
	var s unix.CPUSet
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return s, fmt.Errorf("bad CPU list %q", list)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return s, fmt.Errorf("bad CPU list %q", list)
			}
		}
		for c := a; c <= b; c++ {
			s.Set(c)
		}
	}
	return s, nil
}

// pinSelf moves every thread of this process to cpus ("": back to home) and sizes GOMAXPROCS to them, as it would be had the process
// started there. A thread created while the loop runs inherits the mask of
// the thread that made it, so the loop repeats until it finds no new one.
func pinSelf(cpus string, home unix.CPUSet) {
	set := home
	if cpus != "" {
		var err error
		if set, err = parseCPUs(cpus); err != nil {
			log.Fatal(err)
		}
	}
	done := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			log.Fatal(err)
		}
		fresh := 0
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			if done[tid] {
				continue
			}
			// A thread that exited meanwhile (ESRCH) needs nothing.
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				log.Fatalf("sched_setaffinity %d to %s: %v", tid, orAll(cpus), err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			break
		}
	}
	runtime.GOMAXPROCS(set.Count())
}

// commandOn is exec.Command run on cpus (taskset -c, which execs bin in
// its place: the pid is bin's), or anywhere when cpus is "".
func commandOn(cpus, bin string, args ...string) *exec.Cmd {
	if cpus == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
}

// cpuBusy is every CPU's busy time (user, nice, system, irq, softirq,
// steal; not idle or iowait) in clock ticks, from /proc/stat.
func cpuBusy() []uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	var out []uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var busy uint64
		for _, i := range []int{1, 2, 3, 6, 7, 8} {
			v, _ := strconv.ParseUint(f[i], 10, 64)
			busy += v
		}
		out = append(out, busy)
	}
	return out
}

// runqWaitNs is the time the threads of pids spent runnable, waiting for a
// CPU (the second field of /proc/PID/task/TID/schedstat), in ns. Threads
// that exited are not counted (Go keeps its threads).
func runqWaitNs(pids []int) uint64 {
	var sum uint64
	for _, p := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) >= 2 {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				sum += v
			}
		}
	}
	return sum
}
