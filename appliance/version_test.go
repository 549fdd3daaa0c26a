package appliance

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, c := range []struct {
		name, stamped string
		bi            *debug.BuildInfo
		want          string
	}{
		{"make stamps it", "016e31a-dirty", vcs("0123456789abcdef0123", "false"), "016e31a-dirty"},
		{"go install module@version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"go build in a clean checkout", "dev", vcs("0123456789abcdef0123", "false"), "0123456789ab"},
		{"go build with changes", "dev", vcs("0123456789abcdef0123", "true"), "0123456789ab-dirty"},
		{"no VCS information (-buildvcs=false)", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build information", "dev", nil, "dev"},
	} {
		if got := versionOf(c.stamped, c.bi); got != c.want {
			t.Errorf("%s: versionOf = %q, want %q", c.name, got, c.want)
		}
	}
}
