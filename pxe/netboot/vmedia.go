package netboot

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"

	"castiron/pxe/boot"
)

// VMediaConfig configures the handler of virtual media ISOs.
type VMediaConfig struct {
	// Dir holds the ISOs, "<node uuid>-<digest>.iso" (engine builds them).
	Dir string
	// Gate says which nodes may fetch theirs; nil refuses everyone.
	Gate     boot.NodeGate
	Recorder boot.Recorder
	Meter    boot.Meter
	Logger   *slog.Logger
}

// isoName is "<node uuid>-<16 hex>.iso".
var isoName = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-[0-9a-f]{16}\.iso$`)

// NewVMedia serves GET (and HEAD, with Range) /boot/vmedia/<file>: the
// virtual media ISO a BMC fetches for a node, only while engine says the
// node boots its ramdisk (like the iPXE script: castiron hands out nothing
// for a node it was not asked to boot). Mount it at "/boot/vmedia/".
func NewVMedia(cfg VMediaConfig) *Handler {
	h := newHandler(Config{Recorder: cfg.Recorder, Meter: cfg.Meter, Logger: cfg.Logger})
	h.mux.HandleFunc("GET /boot/vmedia/{file}", func(w http.ResponseWriter, r *http.Request) {
		file := r.PathValue("file")
		m := isoName.FindStringSubmatch(file)
		if m == nil {
			textError(w, http.StatusNotFound, "castiron: no such virtual media image")
			return
		}
		if cfg.Gate == nil || !cfg.Gate.AllowNode(r.Context(), m[1]) {
			h.cfg.Meter.Transfer("http", kindName(boot.HTTPISO), 0, "refused")
			h.rec.Record(r.Context(), boot.Event{NodeUUID: m[1], Kind: boot.HTTPISO, Detail: "refused: node not in a state that boots"})
			textError(w, http.StatusNotFound, "castiron: node %s is not booting its ramdisk", m[1])
			return
		}
		h.serveFile(w, r, filepath.Join(cfg.Dir, file), boot.HTTPISO, m[1])
	})
	return h
}
