// Package netboot serves the HTTP half of a network boot under /boot/ on
// the API port: the per-node iPXE script (only for machines engine's Gate
// allows) and the agent's kernel and initramfs.
//
//	GET /boot/ipxe?mac=aa:bb:cc:dd:ee:ff   iPXE script (also /boot/ipxe/{mac})
//	GET /boot/vmlinuz?mac=...              kernel (Range, HEAD)
//	GET /boot/initramfs?mac=...            initramfs (Range, HEAD)
//	GET /boot/snponly.efi                  an iPXE binary (UEFI HTTP boot)
//	GET /boot/ca.cpio                      castiron's CA as an initramfs overlay (TLS)
package netboot

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"castiron/pxe/boot"
)

// URLs say where a node reaches castiron, without trailing slashes: Boot is
// the plain-HTTP base iPXE loads the kernel and initramfs from, API the base
// the agent calls (its ipa-api-url). They differ when the API speaks TLS.
type URLs struct{ Boot, API string }

// Config configures a Handler.
type Config struct {
	// URLs gives the URLs for a node that reached castiron on the local
	// address local (an IPv6 node is told IPv6 URLs). Nil: PublicURL.
	URLs func(local netip.Addr) URLs
	// PublicURL is the API's URL as nodes reach it, e.g.
	// "http://10.0.0.1:6385", used for both. Empty (and no URLs): taken
	// from each request's Host.
	PublicURL string
	// KernelPath and InitramfsPath are the agent ramdisk's files (x86_64);
	// opened per request, so a rebuilt ramdisk is served without a restart.
	KernelPath, InitramfsPath string
	// Ramdisks are the other architectures' ramdisks by cpu_arch
	// ("aarch64"), chosen by ?arch= (what the firmware told DHCP) or the
	// node's cpu_arch.
	Ramdisks map[string]Ramdisk
	// Loaders are the boot loaders UEFI HTTP boot clients fetch (DHCP's
	// HTTPBootBase + name): file name -> path, e.g. "snponly.efi" ->
	// "/usr/lib/ipxe/snponly.efi". Other names are 404.
	Loaders map[string]string
	// TrustArchive, when set, gives castiron's CA bundle as an initramfs
	// overlay (served at /boot/ca.cpio): the script has iPXE load it as a
	// second initrd, so the agent verifies castiron over HTTPS.
	TrustArchive func(ctx context.Context) ([]byte, error)
	// ExtraKernelArgs are appended to the kernel command line.
	ExtraKernelArgs []string
	// InspectionKernelArgs are appended when the ramdisk boots to inspect
	// (Ironic's [inspector] extra_kernel_params), e.g. ipa-collect-lldp=1.
	InspectionKernelArgs []string
	// Gate decides who gets a script; nil refuses everyone.
	Gate boot.Gate
	// Recorder gets http_* timeline events; nil keeps nothing.
	Recorder boot.Recorder
	// Logger; nil uses slog.Default().
	Logger *slog.Logger
	// Meter counts scripts and files sent (metrics); nil counts nothing.
	Meter boot.Meter
}

// Handler is the /boot/ http.Handler.
type Handler struct {
	cfg Config
	mux *http.ServeMux
	rec boot.Recorder
	log *slog.Logger
	// Script retry loop; constants except in tests.
	attempts, retrySecs int
}

// New makes the handler; mount it at "/boot/".
func New(cfg Config) *Handler {
	h := newHandler(cfg)
	if cfg.Gate == nil {
		h.log.Warn("netboot: no gate configured, refusing every boot script")
	}
	// GET patterns answer HEAD too.
	h.mux.HandleFunc("GET /boot/ipxe", h.serveScript)
	h.mux.HandleFunc("GET /boot/ipxe/{mac}", h.serveScript)
	h.mux.HandleFunc("GET /boot/vmlinuz", func(w http.ResponseWriter, r *http.Request) {
		h.serveFile(w, r, h.ramdisk(r.URL.Query().Get("arch")).KernelPath, boot.HTTPKernel, "")
	})
	h.mux.HandleFunc("GET /boot/initramfs", func(w http.ResponseWriter, r *http.Request) {
		h.serveFile(w, r, h.ramdisk(r.URL.Query().Get("arch")).InitramfsPath, boot.HTTPInitramfs, "")
	})
	h.mux.HandleFunc("GET /boot/ca.cpio", h.serveTrust)
	h.mux.HandleFunc("GET /boot/{loader}", func(w http.ResponseWriter, r *http.Request) {
		path, ok := cfg.Loaders[r.PathValue("loader")]
		if !ok {
			textError(w, http.StatusNotFound, "castiron: no such boot file")
			return
		}
		h.serveFile(w, r, path, boot.HTTPLoader, "")
	})
	return h
}

// newHandler fills the defaults; the caller adds its routes.
func newHandler(cfg Config) *Handler {
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	h := &Handler{
		cfg: cfg, mux: http.NewServeMux(), rec: cfg.Recorder, log: cfg.Logger,
		attempts: defaultAttempts, retrySecs: defaultRetrySeconds,
	}
	if h.rec == nil {
		h.rec = boot.Discard{}
	}
	if h.cfg.Meter == nil {
		h.cfg.Meter = boot.NoMeter{}
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// serveScript answers iPXE's request for its script. Every refusal is a
// short plain-text body so whoever reads the node's console or the HTTP log
// sees why; iPXE treats any non-2xx as a failed boot attempt.
func (h *Handler) serveScript(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	raw := r.PathValue("mac")
	if raw == "" {
		raw = r.URL.Query().Get("mac")
	}
	mac, ok := parseMAC(raw)
	if !ok {
		textError(w, http.StatusBadRequest, "castiron: boot script needs ?mac=aa:bb:cc:dd:ee:ff (got %q)", truncate(raw, 40))
		return
	}
	ev := boot.Event{MAC: mac.String(), Kind: boot.HTTPScript}
	var decision boot.Decision
	allowed := false
	if h.cfg.Gate != nil {
		decision, allowed = h.cfg.Gate.Allow(r.Context(), mac)
	}
	if !allowed {
		ev.Detail = "refused: not allowed to network-boot"
		h.cfg.Meter.Transfer("http", "ipxe-script", 0, "refused")
		h.rec.Record(r.Context(), ev)
		h.log.InfoContext(r.Context(), "boot script refused", "mac", ev.MAC, "client", r.RemoteAddr)
		textError(w, http.StatusNotFound, "castiron: no network boot for %s: not enrolled, or not in a state that boots", ev.MAC)
		return
	}
	urls := h.urls(r)
	arch := h.arch(r.URL.Query().Get("arch"), decision)
	render := renderScript
	if decision.Instance != nil {
		render = renderInstanceScript
	}
	script := render(scriptParams{
		Arch:      arch,
		BootURL:   urls.Boot,
		APIURL:    urls.API,
		MAC:       mac,
		Decision:  decision,
		ExtraArgs: h.cfg.ExtraKernelArgs,
		Inspect:   h.cfg.InspectionKernelArgs,
		Trust:     h.cfg.TrustArchive != nil,
		Attempts:  h.attempts,
		RetrySecs: h.retrySecs,
	})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	n, err := w.Write([]byte(script))
	if err != nil {
		h.log.InfoContext(r.Context(), "boot script write failed", "mac", ev.MAC, "err", err)
	}
	h.cfg.Meter.Transfer("http", "ipxe-script", int64(n), okOrIncomplete(err == nil))
	ev.NodeUUID = decision.NodeUUID
	ev.Detail = "purpose=" + decision.Purpose + " arch=" + arch
	ev.Took = time.Since(start)
	h.rec.Record(r.Context(), ev)
	h.log.InfoContext(r.Context(), "boot script served", "mac", ev.MAC, "node", decision.NodeUUID, "purpose", decision.Purpose, "arch", arch, "client", r.RemoteAddr)
}

// serveTrust sends the CA overlay. It is public, like the CA certificate
// it holds.
func (h *Handler) serveTrust(w http.ResponseWriter, r *http.Request) {
	if h.cfg.TrustArchive == nil {
		textError(w, http.StatusNotFound, "castiron: TLS is off, no CA bundle")
		return
	}
	b, err := h.cfg.TrustArchive(r.Context())
	if err != nil {
		h.log.Error("CA bundle overlay", "err", err)
		textError(w, http.StatusServiceUnavailable, "castiron: CA bundle unavailable")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

// urls are the configured URLs for the address the node reached, or
// without any, the URL the node used.
func (h *Handler) urls(r *http.Request) URLs {
	var local netip.Addr
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			local = ap.Addr().Unmap()
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return h.urlsFor(local, scheme+"://"+r.Host)
}

// urlsFor: Config.URLs for local, else PublicURL, else fallback (the URL
// the node used).
func (h *Handler) urlsFor(local netip.Addr, fallback string) URLs {
	if h.cfg.URLs != nil {
		u := h.cfg.URLs(local)
		return URLs{Boot: strings.TrimRight(u.Boot, "/"), API: strings.TrimRight(u.API, "/")}
	}
	if h.cfg.PublicURL != "" {
		return URLs{Boot: h.cfg.PublicURL, API: h.cfg.PublicURL}
	}
	return URLs{Boot: fallback, API: fallback}
}

func textError(w http.ResponseWriter, code int, format string, a ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", a...)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
