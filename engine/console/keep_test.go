package console

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"castiron/engine/driver"
)

// printLink is a serial link whose machine prints lines (from a channel)
// until the link's context ends.
type printLink struct{ lines chan string }

func (l printLink) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-l.lines:
			if _, err := out.Write([]byte(s)); err != nil {
				return err
			}
		}
	}
}

func (printLink) Close(context.Context) error { return nil }

func attachScrollback(t *testing.T, m *Manager) []byte {
	t.Helper()
	sb, v, err := m.Attach(nodeUUID, false)
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	return sb
}

// TestScrollbackKeptAcrossRestart: what a console printed is on disk
// within KeepInterval; a manager that stops (a conductor restart) and a
// new one that starts the console again show it first, with the restart
// marked; disabling the console (Stop) removes it, so the next start
// begins empty. Without a Dir nothing is written.
func TestScrollbackKeptAcrossRestart(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	file := filepath.Join(dir, nodeUUID+".scrollback")
	lines := make(chan string, 4)
	open := func(context.Context) (driver.SerialLink, error) { return printLink{lines}, nil }
	start := func(m *Manager) {
		t.Helper()
		if _, err := m.Start(context.Background(), nodeUUID, "127.0.0.1", Ports{Min: 1}.orFree(t), open); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Dir: dir, KeepInterval: 20 * time.Millisecond, Logger: testLogger(t)}

	m := New(cfg)
	start(m)
	lines <- "BIOS POST ok\r\nGRUB: no bootable device\r\n"
	waitFor(t, "the scrollback on disk", func() bool {
		b, _ := os.ReadFile(file)
		return bytes.Contains(b, []byte("no bootable device"))
	})
	lines <- "last words before the restart\r\n"
	waitFor(t, "the output in memory", func() bool { return bytes.Contains(attachScrollback(t, m), []byte("last words")) })
	m.Close() // the conductor stops: its last output is saved

	m2 := New(cfg)
	t.Cleanup(m2.Close)
	start(m2)
	sb := attachScrollback(t, m2)
	for _, want := range []string{"no bootable device", "last words before the restart", "console restarted at"} {
		if !bytes.Contains(sb, []byte(want)) {
			t.Fatalf("scrollback after the restart lacks %q:\n%s", want, sb)
		}
	}
	if bytes.Index(sb, []byte("last words")) > bytes.Index(sb, []byte("console restarted at")) {
		t.Errorf("the restart mark comes before the old output:\n%s", sb)
	}
	lines <- "after the restart\r\n"
	waitFor(t, "new output", func() bool { return bytes.Contains(attachScrollback(t, m2), []byte("after the restart")) })

	m2.Stop(nodeUUID) // disabled
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("scrollback file after disable: %v", err)
	}
	start(m2)
	if sb := attachScrollback(t, m2); len(sb) != 0 {
		t.Fatalf("a console enabled again starts with old output:\n%s", sb)
	}
	m2.Stop(nodeUUID)

	// No Dir: nothing on disk.
	m3 := New(Config{KeepInterval: 20 * time.Millisecond, Logger: testLogger(t)})
	t.Cleanup(m3.Close)
	start(m3)
	lines <- "in memory only\r\n"
	waitFor(t, "the output", func() bool { return bytes.Contains(attachScrollback(t, m3), []byte("in memory only")) })
	m3.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files in the scrollback directory: %v", ents)
	}
}
