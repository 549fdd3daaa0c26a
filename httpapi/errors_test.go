package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request whose client went away (its context canceled) is not logged
// as an internal error nor answered 500.
func TestAbandonedRequestNotInternal(t *testing.T) {
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(prev)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/v1/nodes", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	writeError(w, r, fmt.Errorf("reading nodes: %w", context.Canceled))
	if w.Code != 499 || strings.Contains(logged.String(), "internal error") {
		t.Fatalf("status %d, log %q", w.Code, logged.String())
	}
	// A canceled context of the client's own making is different from
	// one castiron passed on: an unrelated Canceled with a live request
	// stays an internal error.
	r = httptest.NewRequest("GET", "/v1/nodes", nil)
	w = httptest.NewRecorder()
	writeError(w, r, fmt.Errorf("reading nodes: %w", context.Canceled))
	if w.Code != 500 {
		t.Fatalf("live request: status %d, want 500", w.Code)
	}
}
