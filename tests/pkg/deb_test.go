package pkg

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebInstall builds the package with make deb and runs debinstall.sh
// under unshare: apt install in a throwaway overlay root, the user, data dir,
// conffile, enablement, systemd-analyze verify, the unit's ExecStart as the
// castiron user with the unit's capabilities only (DHCP and TFTP bound),
// backup while serving, castiron.service started by systemd booted in the
// same root (systemd-nspawn) with the README's configuration edits, an
// upgrade while it runs (restarted, nodes and the edited conffile kept),
// purge.
func TestDebInstall(t *testing.T) {
	need(t, true, "make", "unshare", "apt-get", "dpkg-deb", "systemd-analyze", "setpriv", "curl", "ip", "ss", "systemd-nspawn", "htpasswd")
	deb := makeOutput(t, "deb")
	st, err := os.Stat(deb)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %.1f MB", filepath.Base(deb), float64(st.Size())/1e6)
	if !strings.HasPrefix(filepath.Base(deb), "castiron_") || !strings.HasSuffix(deb, ".deb") {
		t.Fatalf("make deb wrote %s, want build/castiron_VERSION_ARCH.deb", deb)
	}

	// The same package one version up, for the upgrade under systemd.
	version := strings.Split(filepath.Base(deb), "_")[1]
	upgrade := makeOutput(t, "deb", "DEB_VERSION="+version+"+upgradetest")
	defer os.Remove(upgrade)

	cmd := exec.Command("unshare", "-m", "-n", "--propagation", "private",
		filepath.Join(repoRoot(t), "tests/pkg/debinstall.sh"), deb, upgrade)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	var oks []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "ok: ") {
			oks = append(oks, l)
		}
	}
	if err != nil {
		t.Fatalf("debinstall.sh: %v\n%s", err, out)
	}
	t.Logf("debinstall.sh:\n%s", strings.Join(oks, "\n"))
	// One line per check of debinstall.sh: a check that stopped printing
	// (edited away) is a failure too.
	if want := 13; len(oks) != want {
		t.Fatalf("debinstall.sh printed %d ok lines, want %d:\n%s", len(oks), want, out)
	}
}
