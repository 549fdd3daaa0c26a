package appliance

import "runtime/debug"

// versionOf is the version castiron reports: the one -ldflags stamped
// (make build, make deb, make image); else, for `go build` or
// `go install castiron@vX`, what the Go toolchain recorded: the module
// version, or the VCS commit (12 digits, "-dirty" with uncommitted changes);
// else "dev".
func versionOf(stamped string, bi *debug.BuildInfo) string {
	if stamped != "dev" && stamped != "" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	return rev[:min(12, len(rev))] + dirty
}

// buildInfo is debug.ReadBuildInfo's result, nil without one.
func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// Version is what castiron reports as its version: stamped (main's
// -X main.version) when set, else what the toolchain recorded (versionOf).
func Version(stamped string) string { return versionOf(stamped, buildInfo()) }
