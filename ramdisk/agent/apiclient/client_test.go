package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"castiron/ramdisk/protocol"
)

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&StatusError{Code: 500}, true},
		{&StatusError{Code: 503}, true},
		{&StatusError{Code: 429}, true},
		{&StatusError{Code: 408}, true},
		{&StatusError{Code: 400}, false},
		{&StatusError{Code: 404}, false},
		{fmt.Errorf("heartbeat: %w", &StatusError{Code: 409}), false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{context.DeadlineExceeded, true}, // the 30 s request timeout
		{fmt.Errorf("lookup: %w", context.Canceled), false},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for attempt, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceiling *= time.Millisecond
		for range 50 {
			if d := b.Delay(attempt); d < ceiling/2 || d > ceiling {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", attempt, d, ceiling/2, ceiling)
			}
		}
	}
	if d := (Backoff{}).Delay(100); d < DefaultBackoffMax/2 || d > DefaultBackoffMax {
		t.Errorf("zero Backoff Delay(100) = %v, want within the default cap", d)
	}
}

// Heartbeat answers: castiron's instruction, stock Ironic's empty 202 (wait),
// and errors that carry the status.
func TestHeartbeatAnswers(t *testing.T) {
	tests := []struct {
		code int
		body string
		want string // command, or "error NNN"
	}{
		{202, `{"command":"run_step","step":{"id":"a","interface":"deploy","step":"write_image"},"heartbeat_interval":2}`, "run_step"},
		{202, ``, "wait"},
		{202, `not json`, "wait"},
		{200, `{}`, "wait"},
		{409, `{"error_message":"locked"}`, "error 409"},
		{500, `oops`, "error 500"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/heartbeat/n-1" || r.Header.Get("User-Agent") != "castiron-agent/t" ||
				r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("request %s %s %v", r.Method, r.URL, r.Header)
			}
			w.WriteHeader(tt.code)
			io.WriteString(w, tt.body)
		}))
		in, err := New(srv.URL+"/", "castiron-agent/t").Heartbeat(context.Background(), "n-1", protocol.Heartbeat{AgentToken: "x"})
		srv.Close()
		got := ""
		if err != nil {
			got = fmt.Sprintf("error %d", StatusCode(err))
		} else {
			got = in.Command
		}
		if got != tt.want {
			t.Errorf("answer %d %q: got %s (err %v), want %s", tt.code, tt.body, got, err, tt.want)
		}
	}
}

func TestContinueInspectionAnswers(t *testing.T) {
	tests := []struct {
		body      string
		wantNode  string
		wantToken string
	}{
		{`{"node":{"uuid":"u-1"},"config":{"agent_token":"t-1"}}`, "u-1", "t-1"},
		{`{"uuid":"u-2"}`, "u-2", ""},
		{``, "", ""},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(202)
			io.WriteString(w, tt.body)
		}))
		res, err := New("", "").ContinueInspection(context.Background(), srv.URL+"/v1/continue_inspection", protocol.InspectionData{})
		srv.Close()
		if err != nil {
			t.Fatalf("%q: %v", tt.body, err)
		}
		token := ""
		if res.Lookup != nil {
			token = res.Lookup.Config.AgentToken
		}
		if res.NodeUUID != tt.wantNode || token != tt.wantToken {
			t.Errorf("%q: node %q token %q", tt.body, res.NodeUUID, token)
		}
	}
}
