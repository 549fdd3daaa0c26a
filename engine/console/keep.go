package console

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
)

// Scrollback kept on disk (Config.Dir): a conductor restart (an upgrade,
// a crash, a power cut) keeps what each console printed before it, so the
// operator who opens the console of a machine that failed to boot still
// sees its last output. Each session writes its scrollback to
// Dir/<uuid>.scrollback every Config.KeepInterval while it has new output
// (and once more when the conductor stops), by a temporary file and a
// rename, so a file is always whole; a console that starts finds it and
// shows it first, followed by a line that says where the restart was.
// Disabling the console (or deleting the node) removes the file: that ends
// the console, as in Ironic.

// scrollbackPath is uuid's file ("" without a Dir).
func (m *Manager) scrollbackPath(uuid string) string {
	if m.cfg.Dir == "" {
		return ""
	}
	return filepath.Join(m.cfg.Dir, uuid+".scrollback")
}

// restore puts what uuid's console printed before into the new session's
// ring, with a line marking the restart.
func (s *session) restore() {
	p := s.m.scrollbackPath(s.uuid)
	if p == "" {
		return
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 {
		if err != nil && !os.IsNotExist(err) {
			s.log.Warn("console scrollback not restored", "err", err)
		}
		return
	}
	s.ring.write(b)
	s.ring.write([]byte(fmt.Sprintf("\r\n[castiron: console restarted at %s; the output above is from before]\r\n",
		time.Now().UTC().Format(time.RFC3339))))
	s.dirty = true
}

// keep writes the scrollback while the session runs, and once more when it
// ends.
func (s *session) keep() {
	defer s.wg.Done()
	if s.m.scrollbackPath(s.uuid) == "" {
		return
	}
	t := time.NewTicker(s.m.cfg.KeepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			s.save()
			return
		case <-t.C:
			s.save()
		}
	}
}

// save writes the scrollback when it changed since the last save.
func (s *session) save() {
	s.mu.Lock()
	if !s.dirty || s.forget {
		s.mu.Unlock()
		return
	}
	b := s.ring.bytes()
	s.dirty = false
	s.mu.Unlock()
	p := s.m.scrollbackPath(s.uuid)
	if err := writeWhole(p, b); err != nil {
		s.log.Warn("console scrollback not kept", "err", err)
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
	}
}

// writeWhole replaces p with b through a temporary file and a rename
// (renameio), so a reader never sees half a file.
func writeWhole(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return renameio.WriteFile(p, b, 0o600)
}

// discard removes uuid's kept scrollback (the console was disabled).
func (m *Manager) discard(uuid string) {
	if p := m.scrollbackPath(uuid); p != "" {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			m.cfg.Logger.Warn("console scrollback not removed", "node", uuid, "err", err)
		}
	}
}
