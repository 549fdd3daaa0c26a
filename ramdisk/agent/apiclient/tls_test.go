package apiclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"castiron/ramdisk/protocol"
	"castiron/ramdisk/trust"
	"castiron/ramdisk/trust/trusttest"
)

// TestRequireTLS: with castiron's CA the agent talks to castiron over
// HTTPS, and refuses a plain-HTTP URL, a server with another certificate
// (a rogue answering for castiron's address) and a redirect to plain HTTP;
// the rogue never sees a request.
func TestRequireTLS(t *testing.T) {
	var rogueHits atomic.Int32
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rogueHits.Add(1)
		w.Write([]byte(`{"node": {"uuid": "rogue"}}`))
	}))
	defer rogue.Close()
	rogueTLS := httptest.NewTLSServer(rogue.Config.Handler)
	defer rogueTLS.Close()
	castiron, cfg := trusttest.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/redirect" {
			http.Redirect(w, r, rogue.URL+"/v1/continue_inspection", http.StatusTemporaryRedirect)
			return
		}
		w.Write([]byte(`{"node": {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"}, "config": {"agent_token": "t"}}`))
	}))
	ctx := context.Background()

	c := New(castiron.URL, "test")
	if err := c.RequireTLS(cfg); err != nil {
		t.Fatal(err)
	}
	if lr, err := c.Lookup(ctx, []string{"52:54:00:00:00:01"}, ""); err != nil || lr.Node.UUID == "rogue" {
		t.Fatalf("lookup over TLS: %+v %v", lr, err)
	}
	if err := New(rogue.URL, "test").RequireTLS(cfg); !errors.Is(err, trust.ErrPlainHTTP) {
		t.Errorf("plain-HTTP API URL: %v", err)
	}
	if _, err := c.ContinueInspection(ctx, rogue.URL+"/v1/continue_inspection", protocol.InspectionData{}); !errors.Is(err, trust.ErrPlainHTTP) {
		t.Errorf("plain-HTTP callback: %v", err)
	}
	if _, err := c.ContinueInspection(ctx, castiron.URL+"/v1/redirect", protocol.InspectionData{}); !errors.Is(err, trust.ErrPlainHTTP) {
		t.Errorf("redirect to plain HTTP followed: %v", err)
	}
	impostor := New(rogueTLS.URL, "test")
	if err := impostor.RequireTLS(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := impostor.Lookup(ctx, []string{"52:54:00:00:00:01"}, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("server without castiron's certificate: %v", err)
	}
	if n := rogueHits.Load(); n != 0 {
		t.Errorf("the rogue server got %d requests", n)
	}
}
