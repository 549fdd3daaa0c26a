package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// probe answers whether GET base/v1 returns 200 right now.
func probe(ctx context.Context, hc *http.Client, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func probeClient() *http.Client {
	return &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
}

func runStartup(ctx context.Context, c *common, args []string) error {
	fs := newFlags("startup", c)
	cmdline := fs.String("cmd", "", "server command, run with /bin/sh -c in its own process group (use exec)")
	reps := fs.Int("reps", 3, "number of start/stop cycles; the record carries the median")
	wait := fs.Duration("wait", 120*time.Second, "give up if GET /v1 has not answered 200 by then")
	warmup := fs.Int("warmup", 0, "uncounted start/stop cycles first (e.g. so that the measured ones find the database an earlier start created)")
	// 2 ms: the poll interval adds half of itself to every figure on
	// average; a refused connect costs the starting server nothing.
	poll := fs.Duration("poll", 2*time.Millisecond, "GET /v1 interval")
	stopWait := fs.Duration("stop-timeout", 30*time.Second, "SIGKILL the process group if it has not exited this long after SIGTERM")
	logPath := fs.String("log", "", "append the command's stdout and stderr to this file (default: discard)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cmdline == "" || *reps < 1 || *warmup < 0 {
		return errors.New("-cmd is required, -reps must be positive and -warmup not negative")
	}
	base, err := loopbackURL(c.url)
	if err != nil {
		return err
	}
	hc := probeClient()
	if code, err := probe(ctx, hc, base); err == nil {
		return fmt.Errorf("something already answers GET %s/v1 (status %d); refusing to measure", base, code)
	}

	for rep := range *warmup {
		up, _, err := startOnce(ctx, hc, base, *cmdline, *logPath, *wait, *poll, *stopWait)
		if err != nil {
			return fmt.Errorf("warm-up %d: %w", rep+1, err)
		}
		fmt.Fprintf(os.Stderr, "[%s] startup warm-up %d/%d (not counted): GET /v1 200 after %.3fs\n", c.target, rep+1, *warmup, up)
	}
	var ups, downs []float64
	for rep := range *reps {
		up, down, err := startOnce(ctx, hc, base, *cmdline, *logPath, *wait, *poll, *stopWait)
		if err != nil {
			rec := newRecord(c, "startup")
			rec.OK = false
			rec.Params["cmd"] = *cmdline
			rec.Note = fmt.Sprintf("rep %d: %v", rep+1, err)
			emit(rec, "startup: FAILED: "+rec.Note)
			return err
		}
		fmt.Fprintf(os.Stderr, "[%s] startup rep %d/%d: GET /v1 200 after %.3fs (stopped in %.2fs)\n", c.target, rep+1, *reps, up, down)
		ups = append(ups, round3(up))
		downs = append(downs, down)
	}
	rec := newRecord(c, "startup")
	rec.Params["cmd"] = *cmdline
	rec.Params["reps"] = *reps
	rec.Params["warmup"] = *warmup
	rec.Params["poll_ms"] = ms(*poll)
	rec.Params["runs_s"] = ups
	s := slices.Clone(ups)
	slices.Sort(s)
	rec.Figures["median_s"] = round3(median(s))
	rec.Figures["min_s"] = round3(s[0])
	rec.Figures["max_s"] = round3(s[len(s)-1])
	d := slices.Clone(downs)
	slices.Sort(d)
	rec.Figures["stop_median_s"] = round3(median(d))
	emit(rec, fmt.Sprintf("startup: first GET /v1 200 after %.3fs (median of %d; min %.3fs, max %.3fs)",
		rec.Figures["median_s"], *reps, rec.Figures["min_s"], rec.Figures["max_s"]))
	return nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// startOnce starts cmdline, measures seconds until GET /v1 answers 200, then
// stops the process group it created and returns how long stopping took.
func startOnce(ctx context.Context, hc *http.Client, base, cmdline, logPath string, wait, poll, stopWait time.Duration) (up, down float64, err error) {
	var out io.Writer = io.Discard
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		out = f
	}
	cmd := exec.Command("/bin/sh", "-c", cmdline)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	stop := func() (float64, error) {
		ts := time.Now()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopWait):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
			return time.Since(ts).Seconds(), fmt.Errorf("did not exit within %s of SIGTERM; killed", stopWait)
		}
		// stragglers left in the group (children that ignored SIGTERM)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return time.Since(ts).Seconds(), nil
	}

	deadline := t0.Add(wait)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		code, perr := probe(ctx, hc, base)
		if perr == nil && code == 200 {
			up = time.Since(t0).Seconds()
			break
		}
		select {
		case werr := <-exited:
			return 0, 0, fmt.Errorf("server exited before answering GET /v1 (%v); see -log", werr)
		case <-ctx.Done():
			_, _ = stop()
			return 0, 0, ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			_, _ = stop()
			last := fmt.Sprintf("status %d", code)
			if perr != nil {
				last = perr.Error()
			}
			return 0, 0, fmt.Errorf("GET /v1 not 200 after %s (last: %s)", wait, last)
		}
	}
	down, err = stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "startup: warning: %v\n", err)
	}
	return up, down, nil
}

// descendants returns roots and every live process below them.
func descendants(roots []int) []int {
	var out []int
	seen := map[int]bool{}
	queue := slices.Clone(roots)
	for len(queue) > 0 && len(out) < 10000 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
			continue
		}
		out = append(out, p)
		files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, s := range strings.Fields(string(b)) {
				if k, err := strconv.Atoi(s); err == nil {
					queue = append(queue, k)
				}
			}
		}
	}
	return out
}

// procStat is what /proc says of one process: resident memory (kB), split
// into anonymous memory (the process's own: heaps, stacks) and file-backed
// pages (its executable and libraries, shared with the page cache), and
// user+system CPU seconds.
type procStat struct {
	rss, anon, file int
	cpu             float64
}

// procStats reads VmRSS, RssAnon, RssFile and the CPU seconds of pid.
func procStats(pid int) procStat {
	var st procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			key, rest, _ := strings.Cut(line, ":")
			var dst *int
			switch key {
			case "VmRSS":
				dst = &st.rss
			case "RssAnon":
				dst = &st.anon
			case "RssFile":
				dst = &st.file
			}
			if f := strings.Fields(rest); dst != nil && len(f) > 0 {
				*dst, _ = strconv.Atoi(f[0])
			}
		}
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			// after "pid (comm)": state=f[0], ..., utime=f[11], stime=f[12]
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				sy, _ := strconv.ParseFloat(f[12], 64)
				st.cpu = (u + sy) / 100 // USER_HZ is 100 on Linux
			}
		}
	}
	return st
}

func runRSS(ctx context.Context, c *common, args []string) error {
	fs := newFlags("rss", c)
	pidList := fs.String("pids", "", "space-separated PIDs; their descendants are included")
	pidFile := fs.String("pidfile", "", "file with one PID per line (e.g. ironic.pids)")
	kb := fs.Int("kb", -1, "record this already measured value (kB) instead of reading /proc")
	cpuS := fs.Float64("cpu", -1, "with -kb: the already measured CPU seconds")
	source := fs.String("source", "", "how the value was measured (written into the record)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var roots []int
	fields := strings.Fields(*pidList)
	if *pidFile != "" {
		b, err := os.ReadFile(*pidFile)
		if err != nil {
			return err
		}
		fields = append(fields, strings.Fields(string(b))...)
	}
	for _, f := range fields {
		p, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("bad pid %q", f)
		}
		roots = append(roots, p)
	}
	rec := newRecord(c, "rss")
	rec.URL = ""
	var total int
	if *kb >= 0 {
		total = *kb
		rec.Params["source"] = *source
		if *cpuS >= 0 {
			rec.Figures["cpu_s"] = round3(*cpuS)
		}
	} else {
		if len(roots) == 0 {
			return errors.New("need -pids, -pidfile or -kb")
		}
		pids := descendants(roots)
		if len(pids) == 0 {
			return fmt.Errorf("none of the processes %v is running", roots)
		}
		var cpu float64
		var anon, file int
		for _, p := range pids {
			st := procStats(p)
			total += st.rss
			anon += st.anon
			file += st.file
			cpu += st.cpu
		}
		rec.Params["pids"] = pids
		rec.Params["source"] = "/proc/PID/status VmRSS (RssAnon, RssFile) summed over the process tree"
		rec.Figures["rss_anon_mib"] = round3(float64(anon) / 1024)
		rec.Figures["rss_file_mib"] = round3(float64(file) / 1024)
		rec.Figures["cpu_s"] = round3(cpu)
		rec.Figures["processes"] = float64(len(pids))
	}
	rec.Figures["rss_kb"] = float64(total)
	rec.Figures["rss_mib"] = round3(float64(total) / 1024)
	emit(rec, fmt.Sprintf("rss%s: %.1f MiB", labelSuffix(c), rec.Figures["rss_mib"]))
	return nil
}

func runReady(ctx context.Context, c *common, args []string) error {
	fs := newFlags("ready", c)
	wait := fs.Duration("wait", 60*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	base, err := loopbackURL(c.url)
	if err != nil {
		return err
	}
	hc := probeClient()
	t0 := time.Now()
	for {
		code, err := probe(ctx, hc, base)
		if err == nil && code == 200 {
			fmt.Fprintf(os.Stderr, "[%s] GET %s/v1 -> 200 after %.2fs\n", c.target, base, time.Since(t0).Seconds())
			return nil
		}
		if time.Since(t0) > *wait {
			if err == nil {
				err = fmt.Errorf("status %d", code)
			}
			return fmt.Errorf("GET %s/v1 not 200 after %s: %v", base, *wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
