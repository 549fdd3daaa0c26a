package netboot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"castiron/pxe/boot"
)

// serveFile sends the kernel or initramfs with http.ServeContent (Range,
// If-Modified-Since, HEAD) and records what was sent once the response is
// done. The file is opened per request so `make ramdisk` takes effect at
// once; an open file keeps serving the old bytes if it is replaced mid-way.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, path, kind, nodeUUID string) {
	start := time.Now()
	what := filepath.Base(path)
	if path == "" {
		textError(w, http.StatusServiceUnavailable, "castiron: %s path not configured", kindName(kind))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		h.cfg.Meter.Transfer("http", kindName(kind), 0, "error")
	}
	if errors.Is(err, fs.ErrNotExist) {
		h.log.WarnContext(r.Context(), "boot file missing", "path", path)
		textError(w, http.StatusServiceUnavailable, "castiron: ramdisk not built: run make ramdisk (%s missing)", what)
		return
	}
	if err != nil {
		h.log.ErrorContext(r.Context(), "boot file unreadable", "path", path, "err", err)
		textError(w, http.StatusInternalServerError, "castiron: cannot read %s", what)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		textError(w, http.StatusServiceUnavailable, "castiron: %s is not a regular file", what)
		return
	}

	cw := &countingWriter{ResponseWriter: w, status: http.StatusOK}
	http.ServeContent(cw, r, what, st.ModTime(), f)
	if r.Method == http.MethodHead {
		return
	}

	mac := ""
	if m, ok := parseMAC(r.URL.Query().Get("mac")); ok {
		mac = m.String()
	}
	detail := fmt.Sprintf("status=%d bytes=%d size=%d duration=%s", cw.status, cw.n, st.Size(), time.Since(start).Round(time.Millisecond))
	if rng := r.Header.Get("Range"); rng != "" {
		detail += " range=" + truncate(rng, 40)
	}
	complete := true
	if want := cw.Header().Get("Content-Length"); cw.status < 300 && want != fmt.Sprint(cw.n) {
		detail += " incomplete"
		complete = false
	}
	result := okOrIncomplete(complete)
	if cw.status >= 300 && cw.status != http.StatusNotModified {
		result = "refused" // a bad Range (416) and the like
	}
	h.cfg.Meter.Transfer("http", kindName(kind), cw.n, result)
	// castiron's own time is until the first byte (file opened, headers
	// out); the body goes out with sendfile at the pace the client reads.
	var took time.Duration
	if !cw.first.IsZero() {
		took = cw.first.Sub(start)
	}
	h.rec.Record(r.Context(), boot.Event{MAC: mac, NodeUUID: nodeUUID, Kind: kind, Detail: detail, Took: took})
	h.log.InfoContext(r.Context(), "boot file served", "file", what, "mac", mac, "status", cw.status, "bytes", cw.n, "duration", time.Since(start), "client", r.RemoteAddr)
}

func okOrIncomplete(ok bool) string {
	if ok {
		return "ok"
	}
	return "incomplete"
}

func kindName(kind string) string {
	switch kind {
	case boot.HTTPKernel:
		return "kernel"
	case boot.HTTPLoader:
		return "boot loader"
	case boot.HTTPISO:
		return "iso"
	}
	return "initramfs"
}

// countingWriter counts body bytes and keeps the status. It passes
// ReadFrom through so net/http can still use sendfile for the file.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
	first  time.Time // the response began: headers written
}

func (c *countingWriter) began() {
	if c.first.IsZero() {
		c.first = time.Now()
	}
}

func (c *countingWriter) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
	c.began()
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.began()
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) ReadFrom(src io.Reader) (int64, error) {
	c.began()
	var n int64
	var err error
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(c.ResponseWriter, src)
	}
	c.n += n
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
