// Package web is castiron's operator UI: plain HTML, CSS and JavaScript
// modules embedded in the binary, talking to the public /v1 REST API from
// the browser. It has no build step and fetches nothing from the network.
//
// The UI is served at GET / to browsers (httpapi.Options.HTML: the API keeps
// answering Ironic's version document there to API clients) and its assets
// under /ui/ (Mounts, for httpapi.Options.Extra).
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"castiron/engine"
	"castiron/httpapi"
	"castiron/httpapi/policy"
)

//go:embed static
var staticFS embed.FS

// Mounts maps the mux patterns of the UI's assets to ui (a Handler), for
// httpapi.Options.Extra; ui also goes in httpapi.Options.HTML for GET /.
func Mounts(ui http.Handler) map[string]http.Handler {
	return map[string]http.Handler{"GET /ui": ui, "GET /ui/": ui}
}

// Options configure the UI.
type Options struct {
	// Auth is the API's authenticator; nil means noauth. The UI asks for the
	// same credentials as the API (same realm), so the browser sends them on
	// the UI's own API calls too.
	Auth httpapi.Authenticator
	// Policy is the API's policy (nil: Ironic's defaults), for
	// /ui/api/me: a caller it refuses every change sees no action.
	Policy *policy.Enforcer
}

// asset is one embedded file, with its ETag and, once a client asked for
// it, a gzipped copy.
type asset struct {
	body  []byte
	ctype string
	etag  string

	gzOnce sync.Once
	gz     []byte // nil when gzip does not make it smaller
}

type handler struct {
	opts Options
	// assets and states are made on the first request that needs them:
	// most servers never serve the UI, and reading the embedded files
	// copies them to the heap.
	assets func() map[string]*asset
	states func() []byte
}

// Handler serves the UI: "/" is the single page, /ui/<file> its assets and
// /ui/api/states the provision state machine as JSON.
func Handler(opts Options) http.Handler {
	return &handler{opts: opts, assets: sync.OnceValue(loadAssets), states: sync.OnceValue(stateJSON)}
}

// loadAssets reads every embedded file, with its ETag.
func loadAssets() map[string]*asset {
	assets := map[string]*asset{}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		assets[p] = newAsset(p, b)
		return nil
	})
	if err != nil {
		panic(err)
	}
	return assets
}

func stateJSON() []byte {
	b, err := json.Marshal(StateTable())
	if err != nil {
		panic(err)
	}
	return b
}

func newAsset(name string, b []byte) *asset {
	sum := sha256.Sum256(b)
	return &asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: contentType(name)}
}

// contentType is the type of an embedded file by its extension. A fixed
// table, not mime.TypeByExtension: that loads the host's whole MIME
// database (about 400 KB of heap kept for the process's life) for the few
// kinds of file the UI has.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json"
	case ".png":
		return "image/png"
	case ".mjs":
		return "text/javascript; charset=utf-8"
	case ".txt", ".md":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// gzipped is the gzipped body, or nil when gzip does not make it smaller.
// Compressed on first use rather than at start-up: compress/flate's state
// and code are then only paged in when a browser loads the UI.
func (a *asset) gzipped() []byte {
	a.gzOnce.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(a.body)
		zw.Close()
		if buf.Len() < len(a.body) {
			a.gz = buf.Bytes()
		}
	})
	return a.gz
}

// csp allows only the UI's own origin: no inline script, no CDN.
// style-src-elem admits <style> elements made by script: the console's
// terminal (xterm.js) puts its theme and cell sizes in them; style
// attributes and stylesheets from elsewhere stay refused, and no script
// but the UI's own runs. connect-src 'self' covers the console's ws: and
// wss: to this origin.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; style-src-elem 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// terminalAssets are the files make web-vendor adds (npm's xterm.js, which
// the repository never holds); without them the Console tab says so.
var terminalAssets = []string{"vendor/xterm.mjs", "vendor/addon-fit.mjs", "vendor/xterm.css"}

// features is /ui/api/features: what this build of the UI can do.
type features struct {
	// Terminal: the console's terminal (xterm.js) is built in.
	Terminal bool `json:"terminal"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !h.authorized(w, r) {
		return
	}
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	switch p := r.URL.Path; {
	case p == "/" || p == "/ui/index.html":
		hdr.Set("Content-Security-Policy", csp)
		hdr.Set("Referrer-Policy", "no-referrer")
		h.serveAsset(w, r, h.assets()["index.html"])
	case p == "/ui" || p == "/ui/":
		http.Redirect(w, r, "/", http.StatusFound)
	case p == "/ui/api/me":
		me, err := httpapi.CallerOf(h.opts.Auth, h.opts.Policy, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable) // authorized just passed: Keystone went away
			return
		}
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(me)
	case p == "/ui/api/features":
		f := features{Terminal: true}
		for _, name := range terminalAssets {
			f.Terminal = f.Terminal && h.assets()[name] != nil
		}
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Cache-Control", "no-cache")
		json.NewEncoder(w).Encode(f)
	case p == "/ui/api/states":
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Cache-Control", "no-cache")
		w.Write(h.states())
	case strings.HasPrefix(p, "/ui/"):
		a := h.assets()[strings.TrimPrefix(p, "/ui/")]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		h.serveAsset(w, r, a)
	default:
		http.NotFound(w, r)
	}
}

// serveAsset answers with a or 304; assets are revalidated on each load
// (no-cache + ETag) so an upgraded binary is picked up at once.
func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, a *asset) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	hdr.Add("Vary", "Accept-Encoding")
	if slices.Contains(strings.Split(strings.ReplaceAll(r.Header.Get("If-None-Match"), " ", ""), ","), a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		if gz := a.gzipped(); gz != nil {
			hdr.Set("Content-Encoding", "gzip")
			body = gz
		}
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

// authorized applies the API's authenticator with the API's realm, so the
// browser's stored credentials cover both the UI and /v1. Under Keystone a
// browser has no way to send a token with a page load: the page, its
// assets and the state table (static, nothing of the site's) are public,
// and the page asks for a token, which it sends as X-Auth-Token on
// /ui/api/me and every /v1 call.
func (h *handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.Auth == nil {
		return true
	}
	token := httpapi.TokenAuth(h.opts.Auth)
	if token && r.URL.Path != "/ui/api/me" {
		return true
	}
	if _, ok := h.opts.Auth.Authenticate(r); ok {
		return true
	}
	if token {
		w.Header().Set("WWW-Authenticate", "Keystone")
	} else {
		w.Header().Set("WWW-Authenticate", `Basic realm="Baremetal API"`)
	}
	http.Error(w, "The request you have made requires authentication.", http.StatusUnauthorized)
	return false
}

// States is the JSON the UI reads from /ui/api/states: engine's state table
// and, derived from it, the operator verbs valid in each state.
type States struct {
	States      map[string]StateJSON `json:"states"`
	Transitions []TransitionJSON     `json:"transitions"`
	// Verbs maps each API target of PUT /states/provision to its event.
	Verbs          map[string]string `json:"verbs"`
	VerbMinVersion map[string]int    `json:"verb_min_version"`
	// Actions lists, per state, the provision targets the UI may offer
	// (canonical names: "deploy" and "undeploy", not "active"/"deleted"):
	// those engine.Actionable allows, none while the conductor is at work.
	Actions map[string][]string `json:"actions"`
}

// StateJSON is one state's attributes.
type StateJSON struct {
	Stable           bool   `json:"stable"`
	Failure          bool   `json:"failure"`
	WaitsForCallback bool   `json:"waits_for_callback"`
	Target           string `json:"target"`
	// Deletable: DELETE /v1/nodes/{id} is allowed here without maintenance.
	Deletable bool `json:"deletable"`
}

// TransitionJSON is one edge of the provision state machine.
type TransitionJSON struct {
	From  string `json:"from"`
	Event string `json:"event"`
	To    string `json:"to"`
	// Verb is true for operator verbs, false for conductor events.
	Verb bool `json:"verb"`
}

// targetOrder is the order the UI offers provision targets in; aliases of
// the same event ("active", "deleted") are left out.
var targetOrder = []string{"manage", "inspect", "provide", "clean", "deploy", "rebuild",
	"undeploy", "abort", "unhold", "adopt", "rescue", "unrescue", "service"}

// StateTable derives the UI's state JSON from engine.AllStates and engine.Transitions.
func StateTable() States {
	out := States{
		States:         map[string]StateJSON{},
		Verbs:          map[string]string{},
		VerbMinVersion: engine.VerbMinVersions(),
		Actions:        map[string][]string{},
	}
	for s, info := range engine.AllStates() {
		out.States[string(s)] = StateJSON{Stable: info.Stable, Failure: info.Failure,
			WaitsForCallback: info.WaitsForCallback, Target: string(info.Target), Deletable: engine.Deletable(s)}
		acts := []string{}
		// While the conductor works on a node (the StuckFails states:
		// verifying, cleaning, deploying, deleting, ...) it holds the node's
		// lock and the API answers 409 to any verb, so none is offered.
		for _, t := range targetOrder {
			if info.StuckFails {
				break
			}
			if ev, ok := engine.VerbEvent(t); ok && engine.Actionable(s, ev) {
				acts = append(acts, t)
			}
		}
		out.Actions[string(s)] = acts
	}
	for t, ev := range engine.VerbTargets() {
		out.Verbs[t] = string(ev)
	}
	for _, t := range engine.Transitions() {
		out.Transitions = append(out.Transitions, TransitionJSON{From: string(t.From), Event: string(t.Event),
			To: string(t.To), Verb: engine.IsAPIVerb(t.Event)})
	}
	return out
}
