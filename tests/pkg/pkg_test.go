// Package pkg tests castiron's packages: the Debian package (make deb) and
// the OCI image (make image), each built by its make target and then
// installed or unpacked and run the way an operator would.
package pkg

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory (this file is tests/pkg/).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// need skips, or under CI=true fails, without root or one of the tools.
func need(t *testing.T, root bool, tools ...string) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	if root && os.Geteuid() != 0 {
		missing("needs root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing("needs " + tool)
		}
	}
}

// makeOutput runs `make TARGET [VAR=value...]` in the repository and
// returns the last line of its output that names an existing file under
// build/ (the artifact).
func makeOutput(t *testing.T, target string, vars ...string) string {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command("make", append([]string{"--no-print-directory", target}, vars...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		p := strings.TrimSpace(lines[i])
		if strings.HasPrefix(p, "build/") {
			if st, err := os.Stat(filepath.Join(root, p)); err == nil && st.Mode().IsRegular() {
				return filepath.Join(root, p)
			}
		}
	}
	t.Fatalf("make %s named no file under build/:\n%s", target, out)
	return ""
}
