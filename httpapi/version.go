package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// API microversions served: 1.1 up to MaxMinor. Every endpoint and node
// field Ironic defines up to 1.MaxMinor is served (see README).
const (
	MinMinor = 1
	MaxMinor = 115
)

const (
	hdrVersion    = "X-OpenStack-Ironic-API-Version"
	hdrMinVersion = "X-OpenStack-Ironic-API-Minimum-Version"
	hdrMaxVersion = "X-OpenStack-Ironic-API-Maximum-Version"
	hdrStdVersion = "OpenStack-API-Version"
)

// Version is a negotiated microversion 1.Minor.
type Version struct{ Minor int }

// AtLeast reports whether the request's version is >= 1.minor.
func (v Version) AtLeast(minor int) bool { return v.Minor >= minor }

func (v Version) String() string { return fmt.Sprintf("1.%d", v.Minor) }

type versionKey struct{}

func versionOf(r *http.Request) Version {
	if v, ok := r.Context().Value(versionKey{}).(Version); ok {
		return v
	}
	return Version{Minor: MinMinor}
}

func withVersion(ctx context.Context, v Version) context.Context {
	return context.WithValue(ctx, versionKey{}, v)
}

// versionError is a 406 in the {code,title,description} form Ironic's
// version middleware uses; withRange says whether min/max headers go along.
type versionError struct {
	desc      string
	withRange bool
}

// negotiate reads the requested version as Ironic does: the Ironic header,
// else the standard OpenStack-API-Version "baremetal 1.N", else 1.1;
// maxMinor is the server's ceiling (Options.MaxMinor).
func negotiate(r *http.Request, maxMinor int) (Version, *versionError) {
	raw := r.Header.Get(hdrVersion)
	if raw == "" {
		for _, h := range r.Header.Values(hdrStdVersion) {
			for _, part := range strings.Split(h, ",") {
				f := strings.Fields(part)
				if len(f) == 2 && strings.EqualFold(f[0], "baremetal") {
					raw = f[1]
				}
			}
		}
	}
	if raw == "" {
		return Version{Minor: MinMinor}, nil
	}
	if strings.EqualFold(strings.TrimSpace(raw), "latest") {
		return Version{Minor: maxMinor}, nil
	}
	major, minor, ok := strings.Cut(strings.TrimSpace(raw), ".")
	maj, err1 := strconv.Atoi(major)
	min, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || maj < 0 || min < 0 {
		return Version{}, &versionError{desc: "Invalid value for " + hdrVersion + " header"}
	}
	rng := fmt.Sprintf("The supported version range is: [1.%d, 1.%d].", MinMinor, maxMinor)
	if maj != 1 {
		return Version{}, &versionError{withRange: true,
			desc: fmt.Sprintf("Mutually exclusive versions requested. Version %d.%d requested but not supported by this service. %s", maj, min, rng)}
	}
	if min < MinMinor || min > maxMinor {
		return Version{}, &versionError{withRange: true,
			desc: fmt.Sprintf("Version %d.%d was requested but the minor version is not supported by this service. %s", maj, min, rng)}
	}
	return Version{Minor: min}, nil
}

// ParseMaxAPIVersion reads serve --max-api-version (Options.MaxMinor):
// "1.N" with MinMinor <= N <= MaxMinor pins the ceiling there, as Ironic's
// [DEFAULT]pin_release_version makes it answer as an older release; "" or
// "latest" is 0, the newest.
func ParseMaxAPIVersion(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "latest") {
		return 0, nil
	}
	major, minor, ok := strings.Cut(s, ".")
	n, err := strconv.Atoi(minor)
	if !ok || major != "1" || err != nil {
		return 0, fmt.Errorf("API version %q: want 1.N", s)
	}
	switch {
	case n < MinMinor:
		return 0, fmt.Errorf("API version %s is below the minimum 1.%d", s, MinMinor)
	case n > MaxMinor:
		return 0, fmt.Errorf("API version %s is above the maximum 1.%d", s, MaxMinor)
	}
	return n, nil
}

func setRangeHeaders(h http.Header, maxMinor int) {
	h.Set(hdrMinVersion, fmt.Sprintf("1.%d", MinMinor))
	h.Set(hdrMaxVersion, fmt.Sprintf("1.%d", maxMinor))
}
