//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// consoleLogger is the VM's serial port: qemu connects to its unix socket
// (-chardev socket,reconnect=1) at every power on. Each line goes to the log
// file as "<epoch seconds>.<ms> | text", stamped with the arrival time of its
// first byte (iPXE prints "Configuring (net0 ...)" and only ends the line when
// DHCP is done; the start is what the timing report wants).
type consoleLogger struct {
	ln   *net.UnixListener
	path string

	mu   sync.Mutex
	file *os.File
	conn net.Conn // the VM connected now, if any
	// tap, when set, gets a copy of every byte the VM prints (the BMC's
	// SOL side in a lab with LabOptions.SOL; sol_test.go).
	tap io.Writer

	wg sync.WaitGroup
}

// ansiEscape matches the colour/cursor sequences SeaBIOS and iPXE emit.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?=]*[A-Za-z]|c)`)

// startConsole listens on sockPath and appends to logPath until Close.
func startConsole(sockPath, logPath string) (*consoleLogger, error) {
	_ = os.Remove(sockPath)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		ln.Close()
		return nil, err
	}
	c := &consoleLogger{ln: ln, path: logPath, file: f}
	c.wg.Add(1)
	go c.accept()
	return c, nil
}

func (c *consoleLogger) accept() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return // listener closed by Close
		}
		c.mu.Lock()
		c.conn = conn
		c.mu.Unlock()
		c.write(time.Now(), "=== connect (VM powered on)")
		c.read(conn)
		c.write(time.Now(), "=== disconnect (VM gone)")
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
		conn.Close()
	}
}

// partialFlush is how long an unterminated line may wait before it is
// written anyway: firmware prints ">>Start PXE over IPv4." or
// "Configuring (net0 ...)" and ends the line only when DHCP is done, and
// tests waiting for such a line must see it while it is pending. The rest
// of the line then follows as a line of its own.
const partialFlush = 300 * time.Millisecond

// read copies one connection (one power-on) line by line.
func (c *consoleLogger) read(conn net.Conn) {
	var line []byte
	var started time.Time
	buf := make([]byte, 4096)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(partialFlush))
		n, err := conn.Read(buf)
		now := time.Now()
		c.mu.Lock()
		tap := c.tap
		c.mu.Unlock()
		if tap != nil && n > 0 {
			_, _ = tap.Write(buf[:n])
		}
		for _, b := range buf[:n] {
			switch b {
			case '\r':
				continue
			case '\n':
				if started.IsZero() {
					started = now
				}
				c.write(started, string(line))
				line, started = line[:0], time.Time{}
				continue
			}
			if started.IsZero() {
				started = now
			}
			line = append(line, b)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if len(line) > 0 && now.Sub(started) >= partialFlush {
				c.write(started, string(line))
				line, started = line[:0], time.Time{}
			}
			continue
		}
		if err != nil {
			if len(line) > 0 {
				c.write(started, string(line))
			}
			return
		}
	}
}

func (c *consoleLogger) write(at time.Time, text string) {
	text = ansiEscape.ReplaceAllString(text, "")
	text = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' {
			return -1
		}
		return r
	}, text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		fmt.Fprintf(c.file, "%d.%03d | %s\n", at.Unix(), at.Nanosecond()/1e6, text)
	}
}

// setTap sends a copy of the VM's output to w (nil: to nobody).
func (c *consoleLogger) setTap(w io.Writer) {
	c.mu.Lock()
	c.tap = w
	c.mu.Unlock()
}

// writeVM types p into the VM's serial port; dropped while it is off.
func (c *consoleLogger) writeVM(p []byte) {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		_, _ = conn.Write(p)
	}
}

// Close stops the listener and a connected VM's stream and waits for the
// goroutine.
func (c *consoleLogger) Close() error {
	err := c.ln.Close()
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
	return err
}

// ConsoleLine is one stamped serial-console line.
type ConsoleLine struct {
	At   time.Time
	Text string
}

// readConsoleLog parses a log written by consoleLogger.
func readConsoleLog(path string) ([]ConsoleLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var lines []ConsoleLine
	for _, raw := range bytes.Split(b, []byte("\n")) {
		ts, text, ok := strings.Cut(string(raw), " | ")
		if !ok {
			continue
		}
		at, err := parseEpoch(ts)
		if err != nil {
			continue
		}
		lines = append(lines, ConsoleLine{At: at, Text: text})
	}
	return lines, nil
}

// parseEpoch reads "1795318974.777" (or .%N nanoseconds from date(1)).
func parseEpoch(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	var nanos int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		frac += strings.Repeat("0", 9-len(frac))
		if nanos, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, err
		}
	}
	return time.Unix(secs, nanos), nil
}

// firstLine is the first line at or after since containing any of subs.
func firstLine(lines []ConsoleLine, since time.Time, subs ...string) (ConsoleLine, bool) {
	for _, l := range lines {
		if l.At.Before(since) {
			continue
		}
		for _, s := range subs {
			if strings.Contains(l.Text, s) {
				return l, true
			}
		}
	}
	return ConsoleLine{}, false
}
