package appliance

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"castiron/ramdisk/initramfs"
	"castiron/ramdisk/trust"
)

// siteListener is an HTTP listener on the provisioning network that serves
// part of the API: the agent's endpoints, or iPXE's /boot/.
type siteListener struct {
	name string // "agent listener", "boot listener"
	addr string
	tls  *tls.Config // nil: plain HTTP
	only func(path string) bool
	up   atomic.Bool
}

// siteListeners are the listeners the site needs: one for the agent per
// address the API listener misses (TLS like the API), and with TLS one
// plain-HTTP listener per address for iPXE, which cannot check castiron's
// certificate.
func siteListeners(site provisioningSite, ts *tlsSource) []*siteListener {
	var out []*siteListener
	for _, addr := range site.agentAddrs {
		l := &siteListener{name: "agent listener", addr: addr, only: agentPath}
		if ts != nil {
			l.tls = ts.config()
		}
		out = append(out, l)
	}
	for _, addr := range site.bootAddrs {
		out = append(out, &siteListener{name: "boot listener", addr: addr, only: bootPath})
	}
	return out
}

// serve runs the listener until ctx ends.
func (l *siteListener) serve(ctx context.Context, api http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: filtered(api, l.only), ReadHeaderTimeout: 10 * time.Second, TLSConfig: l.tls,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return err
	}
	if l.tls != nil {
		ln = tls.NewListener(ln, l.tls)
	}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info(l.name+" on the provisioning network", "addr", l.addr, "tls", l.tls != nil)
	l.up.Store(true)
	defer l.up.Store(false)
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// filtered serves the paths only allows and 404s everything else (the
// operator API stays on --listen).
func filtered(api http.Handler, only func(string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !only(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// agentPath: the endpoints a booting machine needs.
func agentPath(p string) bool {
	return p == "/v1" || p == "/v1/" || p == "/v1/lookup" || p == "/v1/continue_inspection" ||
		strings.HasPrefix(p, "/v1/heartbeat/") || bootPath(p) || strings.HasPrefix(p, "/images/")
}

// bootPath: what iPXE loads.
func bootPath(p string) bool { return strings.HasPrefix(p, "/boot/") }

// caOverlay is the CA bundle as an initramfs overlay iPXE loads after the
// ramdisk: the kernel unpacks it to trust.AgentCAPath.
func caOverlay(ctx context.Context, ts *tlsSource) ([]byte, error) {
	bundle, err := ts.bundle()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := initramfs.WriteOverlay(ctx, &b, map[string][]byte{trust.AgentCAPath: bundle}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
