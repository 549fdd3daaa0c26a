// Package images serves the OS images castiron hosts for deployment, so edge
// nodes fetch them from the appliance on the provisioning network instead of
// the WAN. instance_info.image_source names them by file name.
package images

import (
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
)

// Handler serves files of dir under /images/<name> with Range support (the
// agent resumes and reads ranges); no directory listings, no paths outside
// dir (os.Root refuses them, symlinks included).
func Handler(dir string, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/images/")
		if name == "" || path.Clean(name) != name || strings.HasPrefix(name, ".") {
			http.Error(w, "invalid image name", http.StatusBadRequest)
			return
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			http.Error(w, "no images directory", http.StatusNotFound)
			return
		}
		defer root.Close()
		f, err := root.Open(name)
		if err != nil {
			status := http.StatusNotFound
			if !errors.Is(err, fs.ErrNotExist) {
				status = http.StatusBadRequest
			}
			http.Error(w, "image not found", status)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			http.Error(w, "image not found", http.StatusNotFound)
			return
		}
		log.DebugContext(r.Context(), "serving image", "image", name, "range", r.Header.Get("Range"), "remote", r.RemoteAddr)
		http.ServeContent(w, r, name, st.ModTime(), f)
	})
}
