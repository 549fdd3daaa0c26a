package appliance

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"castiron/httpapi"
)

// newLogger writes format ("text": logfmt, "json": one object a line) at
// level and up; every line written in the course of an API request (and of
// the conductor tasks it started) carries the request's id.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return slog.New(requestIDHandler{h}), nil
}

// requestIDHandler adds request_id (and global_request_id when the client
// sent one) from the context of the call.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if ids := httpapi.RequestIDsOf(ctx); ids.Local != "" {
		r.AddAttrs(slog.String("request_id", ids.Local))
		if ids.Global != "" {
			r.AddAttrs(slog.String("global_request_id", ids.Global))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
