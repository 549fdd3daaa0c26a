package appliance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"castiron/engine"
)

func TestHeartbeatFresh(t *testing.T) {
	now := time.Unix(10000, 0)
	cases := []struct {
		h    engine.HeartbeatState
		want string // "" = ready
	}{
		{engine.HeartbeatState{}, "not started"},
		{engine.HeartbeatState{Last: now.Add(-5 * time.Second), Timeout: time.Minute}, ""},
		{engine.HeartbeatState{Last: now.Add(-5 * time.Second), Err: errors.New("busy"), Timeout: time.Minute}, ""},
		{engine.HeartbeatState{Last: now.Add(-75 * time.Second), Timeout: time.Minute}, "no heartbeat for 1m15s (limit 1m0s)"},
		{engine.HeartbeatState{Last: now.Add(-75 * time.Second), Err: errors.New("database is locked"), Timeout: time.Minute},
			"no heartbeat for 1m15s (limit 1m0s): database is locked"},
	}
	for _, tc := range cases {
		err := heartbeatFresh(tc.h, now)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.h, err, tc.want)
		}
	}
}
