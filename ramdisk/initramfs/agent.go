package initramfs

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// checkAgent makes sure path can run as /init: an ELF executable with no
// program interpreter (the initramfs has no dynamic loader or libc; a
// dynamic /init makes the kernel panic with "No working init found").
func checkAgent(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadAgent, path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%w: %s: ELF type %v is not an executable", ErrBadAgent, path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s is dynamically linked (build it with CGO_ENABLED=0)", ErrBadAgent, path)
		}
	}
	return nil
}

// agentVersion reads the version the agent was linked with
// (-ldflags '-X main.version=...' as recorded in Go's build info), else the
// module version, else "unknown". go build leaves -ldflags out of the build
// info when -trimpath is set, so such builds must pass Options.AgentVersion.
func agentVersion(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	for _, s := range bi.Settings {
		if s.Key == "-ldflags" {
			if v := ldflagsVersion(s.Value); v != "" {
				return v
			}
		}
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return "unknown"
}

// ldflagsVersion finds main.version in "-s -w -X main.version=1.2 -X ...",
// also in the "-X=main.version=1.2" spelling.
func ldflagsVersion(ldflags string) string {
	f := strings.Fields(ldflags)
	for i, w := range f {
		var def string
		switch {
		case w == "-X" && i+1 < len(f):
			def = f[i+1]
		case strings.HasPrefix(w, "-X="):
			def = strings.TrimPrefix(w, "-X=")
		default:
			continue
		}
		if v, ok := strings.CutPrefix(strings.Trim(def, `'"`), "main.version="); ok {
			return v
		}
	}
	return ""
}

// fileSHA256 identifies the agent in /etc/castiron-ramdisk even when its
// version string is "unknown".
func fileSHA256(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
