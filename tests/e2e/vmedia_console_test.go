//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/pxe/boot"
)

// consoleTail follows the VM's console file, which libvirt truncates at
// every domain start, into one stamped log (stamped when first read, every
// 100 ms) for the whole test.
type consoleTail struct {
	path string
	mu   sync.Mutex
	log  []ConsoleLine
	part string // an unfinished last line
	size int64
}

func startConsoleTail(t *testing.T, path string) *consoleTail {
	c := &consoleTail{path: path}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			c.poll()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *consoleTail) poll() {
	b, err := os.ReadFile(c.path)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(b)) < c.size { // a new domain start truncated the file
		c.flushPart()
		c.size = 0
	}
	chunk := c.part + string(b[c.size:])
	c.size = int64(len(b))
	lines := strings.Split(chunk, "\n")
	c.part = lines[len(lines)-1]
	now := time.Now()
	for _, l := range lines[:len(lines)-1] {
		c.log = append(c.log, ConsoleLine{At: now, Text: strings.TrimRight(l, "\r")})
	}
}

func (c *consoleTail) flushPart() {
	if c.part != "" {
		c.log = append(c.log, ConsoleLine{At: time.Now(), Text: c.part})
		c.part = ""
	}
}

// Len is a mark for Since.
func (c *consoleTail) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.log)
}

// Since are the lines after mark.
func (c *consoleTail) Since(mark int) []ConsoleLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ConsoleLine(nil), c.log[mark:]...)
}

// consoleSize marks where the console is now, for waitConsoleFrom.
func (r *vmediaRig) consoleSize() int { return r.tail.Len() }

// waitConsoleFrom waits for a console line holding mark after the mark
// and returns when it was first seen.
func (r *vmediaRig) waitConsoleFrom(ctx context.Context, offset int, d time.Duration, mark string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if l, ok := firstLine(r.tail.Since(offset), time.Time{}, mark); ok {
			return l.At, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no %q on the VM console after %s", mark, d)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// phases measures one virtual media boot of the ramdisk from start (the
// request) to end (the target state seen): the BMC fetching the ISO
// (castiron's boot timeline), kernel and agent on the console, the agent's
// network up from network_data, its first call to castiron (timeline).
func (r *vmediaRig) phases(ctx context.Context, offset int, start, end time.Time) []Phase {
	console := r.tail.Since(offset)
	timeline, _, _ := r.c.BootTimeline(ctx, r.node.UUID)
	var phases []Phase
	fromTimeline := func(name string, kinds ...string) {
		for _, ev := range timeline {
			for _, k := range kinds {
				if ev.Kind == k && !ev.At.Before(start) {
					phases = append(phases, Phase{Name: name, At: ev.At, Source: "timeline"})
					return
				}
			}
		}
		phases = append(phases, Phase{Name: name})
	}
	fromConsole := func(name string, marks ...string) {
		l, _ := firstLine(console, start, marks...)
		phases = append(phases, Phase{Name: name, At: l.At, Source: "console"})
	}
	fromTimeline("iso_fetch", boot.HTTPISO)
	// After power off, InsertMedia (the BMC's fetch) and the boot override.
	phases = append(phases, Phase{Name: "inserted", At: logAt(r.c.LogPath, "ramdisk ISO inserted", start), Source: "log"})
	kernelAt, kernelSrc := kernelStart(console, start)
	phases = append(phases, Phase{Name: "kernel", At: kernelAt, Source: kernelSrc})
	fromConsole("agent", markAgent...)
	fromConsole("network", "network configured")
	fromTimeline("agent_call", boot.AgentInspect, boot.AgentLookup)
	return append(phases, Phase{Name: "done", At: end, Source: "api"})
}

// logAt is when castiron's log (text format) first has msg at or after
// since; zero when it has not.
func logAt(path, msg string, since time.Time) time.Time {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "time=") || !strings.Contains(l, `msg="`+msg+`"`) {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil && !at.Before(since) {
			return at
		}
	}
	return time.Time{}
}

// logBoot logs the console lines of one boot (from offset) that show its
// phases, with the guest's uptime stamps: firmware and loader, kernel,
// agent.
func (r *vmediaRig) logBoot(t *testing.T, offset int, start time.Time) {
	t.Helper()
	var lines []string
	for _, l := range r.tail.Since(offset) {
		if strings.Contains(l.Text, "castiron-agent[") || strings.Contains(l.Text, "Linux version") || strings.Contains(l.Text, "Run /init") {
			lines = append(lines, fmt.Sprintf("+%6.2fs %s", l.At.Sub(start).Seconds(), truncate(strings.TrimSpace(l.Text), 160)))
		}
	}
	t.Logf("boot phases on the console (seen at +s after the request):\n%s", strings.Join(lines, "\n"))
}

// logISOBuilds logs castiron's "ramdisk ISO built" lines (size and build
// time of every ISO it made; a boot that reused one has none).
func (r *vmediaRig) logISOBuilds(t *testing.T) {
	t.Helper()
	b, _ := os.ReadFile(r.c.LogPath)
	var built []string
	boots := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "ramdisk ISO built") {
			built = append(built, truncate(l, 300))
		}
		if strings.Contains(l, "ramdisk ISO inserted") {
			boots++
		}
	}
	t.Logf("E2E-TIMING vmedia_iso boots=%d builds=%d\n%s", boots, len(built), strings.Join(built, "\n"))
}
