package boot

import (
	"context"
	"testing"
	"time"
)

func TestTookDetail(t *testing.T) {
	tests := []struct {
		ev     Event
		stored string
		took   time.Duration
		ok     bool
	}{
		{Event{Detail: "ip=10.0.0.5 arch=0", Took: 1234567 * time.Nanosecond}, "ip=10.0.0.5 arch=0 took=0.001235s", 1235 * time.Microsecond, true},
		{Event{Detail: "", Took: 2 * time.Second}, " took=2.000000s", 2 * time.Second, true},
		{Event{Detail: "file=x bytes=3"}, "file=x bytes=3", 0, false},
	}
	for _, tc := range tests {
		got := tc.ev.TookDetail()
		if got != tc.stored {
			t.Errorf("TookDetail(%+v) = %q, want %q", tc.ev, got, tc.stored)
		}
		took, ok := ParseTook(got)
		if took != tc.took || ok != tc.ok {
			t.Errorf("ParseTook(%q) = %s %v, want %s %v", got, took, ok, tc.took, tc.ok)
		}
	}
	if _, ok := ParseTook("refused took=soon"); ok {
		t.Error("ParseTook accepted a malformed value")
	}
}

func TestSinceReceived(t *testing.T) {
	if d := SinceReceived(context.Background()); d != 0 {
		t.Fatalf("no arrival noted: %s, want 0", d)
	}
	ctx := WithReceived(context.Background(), time.Now().Add(-time.Second))
	if d := SinceReceived(ctx); d < time.Second || d > time.Minute {
		t.Fatalf("SinceReceived = %s, want about 1 s", d)
	}
}
