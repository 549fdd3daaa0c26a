package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/sys/unix"
)

// consoleHandler writes one line per record for a serial console:
//
//	castiron-agent[3.21]: inventory posted node=1be26c0b-...
//	castiron-agent[4.02]: WARN lookup failed err="HTTP 404: ..." in=1.2s
//
// The number is the time since boot, like the kernel's own lines, so the
// agent's lines sort into the kernel log.
type consoleHandler struct {
	mu     *sync.Mutex
	w      io.Writer
	level  slog.Leveler
	prefix string
	attrs  string // preformatted " k=v" from WithAttrs
	group  string
	uptime func() time.Duration
}

func newConsoleHandler(w io.Writer, level slog.Leveler, prefix string) *consoleHandler {
	return &consoleHandler{mu: &sync.Mutex{}, w: w, level: level, prefix: prefix, uptime: bootTime}
}

// bootTime is CLOCK_BOOTTIME: time since boot, suspend included.
func bootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func (h *consoleHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *consoleHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s[%.2f]: ", h.prefix, h.uptime().Seconds())
	if r.Level != slog.LevelInfo {
		b.WriteString(r.Level.String())
		b.WriteByte(' ')
	}
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *consoleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		appendAttr(&b, h.group, a)
	}
	c := *h
	c.attrs = b.String()
	return &c
}

func (h *consoleHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = joinKey(h.group, name)
	return &c
}

func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, ga := range a.Value.Group() {
			appendAttr(b, joinKey(group, a.Key), ga)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(joinKey(group, a.Key))
	b.WriteByte('=')
	b.WriteString(quoteIfNeeded(a.Value.String()))
}

func joinKey(group, key string) string {
	if group == "" {
		return key
	}
	return group + "." + key
}

// quoteIfNeeded keeps a value one token: quoted when it has blanks, quotes,
// '=' or unprintable runes.
func quoteIfNeeded(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == '"' || r == '=' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
