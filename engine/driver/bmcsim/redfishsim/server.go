package redfishsim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Server is one emulated BMC; it is an http.Handler (serve it with
// net/http, httptest or Serve).
type Server struct {
	cfg Config
	fl  flavourDefaults

	// base is the URL the BMC is reached at (absolute session Locations of
	// the iLO flavour); set by Serve or SetBaseURL.
	base string

	mu       sync.Mutex
	sys      systemState
	bios     biosState
	storage  storageState
	firmware []*Component
	media    []*mediaSlot
	sessions map[string]*session // token -> session
	nextID   int
	tasks    []*task
	jobs     []*Job // iDRAC job queue
	faults   []*faultRule
	stats    Stats
	// downUntil: the BMC is resetting itself until then (resetBMC).
	downUntil time.Time
	ssh       sshState // the SSH serial console (sshconsole.go)

	tmpMedia string // MediaDir made by New (removed by Close)
	srv      *http.Server
	done     chan struct{}
}

// Stats counts what the BMC saw (for tests and the benchmark).
type Stats struct {
	Requests, Logins, Logouts, AuthFailures int
	Resets                                  []string
	Inserts, Ejects                         int
	// BMCResets counts resets of the BMC itself (Manager.Reset,
	// iDRACReset).
	BMCResets int
}

type systemState struct {
	power        string // state-only mode ("On"/"Off")
	target       string
	enabled      string
	mode         string
	httpBootURI  string
	led          string
	chassisLED   string
	health       string
	secureBoot   bool
	secureActive bool // SecureBootCurrentBoot: what the last boot used
	keysDeleted  bool // SecureBoot.ResetKeys DeleteAllKeys: SetupMode
	assetTag     string
	lastBoot     Boot // what the last start booted with (Target "" before any)
}

type session struct {
	id       string
	user     string
	token    string
	lastUsed time.Time
}

type mediaSlot struct {
	id       string
	types    []string
	image    string
	inserted bool
	local    string // downloaded file (Machine mode)
}

// New makes a BMC from cfg (not yet serving).
func New(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	fl := flavours[cfg.Flavour]
	s := &Server{cfg: cfg, fl: fl, sessions: map[string]*session{}, done: make(chan struct{})}
	s.sys = systemState{power: "Off", target: "None", enabled: "Disabled", mode: cfg.BootMode,
		led: "Off", chassisLED: "Off", health: "OK"}
	s.bios = newBIOS(cfg.Flavour, cfg.BootMode)
	s.storage = newStorage(fl, cfg.Drives, cfg.RAIDTypes)
	for _, c := range fl.firmware {
		c := c
		s.firmware = append(s.firmware, &c)
	}
	for _, sd := range fl.slots {
		s.media = append(s.media, &mediaSlot{id: sd.id, types: sd.types})
	}
	if cfg.Machine != nil && cfg.MediaDir == "" {
		d, err := os.MkdirTemp("", "redfishsim-media-")
		if err != nil {
			return nil, err
		}
		s.cfg.MediaDir, s.tmpMedia = d, d
	}
	return s, nil
}

// SetBaseURL tells the BMC the URL it is reached at (httptest servers).
func (s *Server) SetBaseURL(u string) {
	s.mu.Lock()
	s.base = strings.TrimRight(u, "/")
	s.mu.Unlock()
}

// Serve answers on ln until ctx ends or Close; it returns when the server
// stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.base == "" {
		s.base = "http://" + ln.Addr().String()
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	srv := s.srv
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving (when Serve runs), closes the Machine (or powers it
// off) and removes downloaded media.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	var errs []error
	if srv != nil {
		errs = append(errs, srv.Close())
	}
	s.closeSSH()
	if c, ok := s.cfg.Machine.(interface{ Close(context.Context) error }); ok {
		errs = append(errs, c.Close(ctx))
	} else if m := s.cfg.Machine; m != nil && m.Running() {
		errs = append(errs, m.PowerOff(ctx, true))
	}
	if s.tmpMedia != "" {
		errs = append(errs, os.RemoveAll(s.tmpMedia))
	}
	return errors.Join(errs...)
}

// Paths of the BMC's main resources (without the iLO's trailing slash).
func (s *Server) SystemPath() string  { return Rooted + "/Systems/" + s.cfg.SystemID }
func (s *Server) ManagerPath() string { return Rooted + "/Managers/" + s.cfg.ManagerID }
func (s *Server) ChassisPath() string { return Rooted + "/Chassis/" + s.cfg.ChassisID }

// User and Password are the BMC's credentials.
func (s *Server) User() string     { return s.cfg.User }
func (s *Server) Password() string { return s.cfg.Password }

// MACs are the system's NICs.
func (s *Server) MACs() []string { return slices.Clone(s.cfg.MACs) }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Resets = slices.Clone(st.Resets)
	return st
}

// PowerState is "On" or "Off" (the Machine's when there is one).
func (s *Server) PowerState() string {
	if m := s.cfg.Machine; m != nil {
		if m.Running() {
			return "On"
		}
		return "Off"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sys.power
}

// SetHealth sets the system's Status.Health ("OK", "Warning", "Critical").
func (s *Server) SetHealth(h string) {
	s.mu.Lock()
	s.sys.health = h
	s.mu.Unlock()
}

// DropSessions forgets every session, as a BMC that rebooted: the next
// request with a token gets 401.
func (s *Server) DropSessions() {
	s.mu.Lock()
	clear(s.sessions)
	s.mu.Unlock()
}

// Sessions is the number of live sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// odata writes an @odata.id as the flavour does (iLO: trailing slash).
func (s *Server) odata(p string) string {
	if s.cfg.Flavour == ILO && p != "" {
		return p + "/"
	}
	return p
}

func (s *Server) link(p string) map[string]any { return map[string]any{"@odata.id": s.odata(p)} }

func (s *Server) collection(p, typ, name string, members []string) map[string]any {
	ms := make([]any, 0, len(members))
	for _, m := range members {
		ms = append(ms, s.link(m))
	}
	return map[string]any{"@odata.id": s.odata(p), "@odata.type": "#" + typ + "Collection." + typ + "Collection",
		"Name": name, "Members": ms, "Members@odata.count": len(ms)}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// --- HTTP ---

// redfishError writes a Redfish error body (DSP0266 §9.6) with one Base
// message.
func redfishError(w http.ResponseWriter, code int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code":    "Base.1.8.GeneralError",
		"message": "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []any{map[string]any{
			"@odata.type": "#Message.v1_1_1.Message", "MessageId": "Base.1.8." + id, "Message": msg,
			"Severity": "Warning", "Resolution": "See the message.",
		}},
	}})
}

// apiError is an answer other than 2xx, made by a handler.
type apiError struct {
	code int
	id   string
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errf(code int, id, format string, args ...any) error {
	return &apiError{code: code, id: id, msg: fmt.Sprintf(format, args...)}
}

func notFound(p string) error {
	return errf(http.StatusNotFound, "ResourceMissingAtURI", "The resource at the URI %s was not found.", p)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// answer is what a handler returns: a body (GET), a status, headers.
type answer struct {
	code   int
	body   any
	header map[string]string
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ControlAPI && strings.HasPrefix(r.URL.Path, ControlPrefix+"/") {
		s.serveControl(w, r) // never slowed or failed by the injected faults
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	rule := s.matchFault(r)
	down := s.cfg.Now().Before(s.downUntil)
	s.mu.Unlock()
	if down {
		// Rebooting: nothing answers (the connection closes, as a
		// client of a BMC that went away sees it).
		(&faultRule{Fault: Fault{Drop: true}}).apply(w, r)
		return
	}
	if d := s.cfg.Latency; d > 0 && !sleep(r.Context(), d) {
		return
	}
	if rule != nil && rule.apply(w, r) {
		return
	}
	p := strings.TrimRight(r.URL.Path, "/")
	if p == "" {
		p = "/"
	}
	if p == "/redfish" {
		writeJSON(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"})
		return
	}
	if p != Rooted && !strings.HasPrefix(p, Rooted+"/") {
		redfishError(w, http.StatusNotFound, "ResourceMissingAtURI", "The resource at the URI "+r.URL.Path+" was not found.")
		return
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, 1<<30))
		if err != nil {
			redfishError(w, http.StatusBadRequest, "MalformedJSON", "The request body could not be read: "+err.Error())
			return
		}
	}
	segs := strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, Rooted), "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		segs = nil
	}
	a, err := s.route(r, p, segs, body)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			if ae.code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="redfishsim"`)
			}
			redfishError(w, ae.code, ae.id, ae.msg)
			return
		}
		redfishError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.body == nil {
		w.WriteHeader(a.code)
		return
	}
	writeJSON(w, a.code, a.body)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// route dispatches one request. Handlers that drive the Machine unlock
// the Server around the Machine's calls themselves.
func (s *Server) route(r *http.Request, p string, segs []string, body []byte) (answer, error) {
	s.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			s.mu.Unlock()
		}
	}
	defer unlock()
	s.advanceTasks()
	open := len(segs) == 0 || (len(segs) == 1 && (segs[0] == "odata" || segs[0] == "$metadata"))
	if len(segs) == 2 && segs[0] == "SessionService" && segs[1] == "Sessions" && r.Method == http.MethodPost && !s.cfg.NoSessionService {
		return s.login(body)
	}
	if !open {
		if err := s.authenticate(r); err != nil {
			return answer{}, err
		}
	}
	head := ""
	if len(segs) > 0 {
		head = segs[0]
	}
	switch head {
	case "":
		return get(r, s.serviceRoot)
	case "odata":
		return get(r, func() (any, error) {
			return map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": []any{}}, nil
		})
	case "SessionService":
		return s.routeSessions(r, segs[1:])
	case "Systems":
		if len(segs) == 1 {
			return get(r, func() (any, error) {
				return s.collection(Rooted+"/Systems", "ComputerSystem", "Computer System Collection", []string{s.SystemPath()}), nil
			})
		}
		if segs[1] != s.cfg.SystemID {
			return answer{}, notFound(p)
		}
		return s.routeSystem(r, p, segs[2:], body, unlock)
	case "Managers":
		if len(segs) == 1 {
			return get(r, func() (any, error) {
				return s.collection(Rooted+"/Managers", "Manager", "Manager Collection", []string{s.ManagerPath()}), nil
			})
		}
		if segs[1] != s.cfg.ManagerID {
			return answer{}, notFound(p)
		}
		if len(segs) == 2 {
			return get(r, s.manager)
		}
		if len(segs) == 3 && segs[2] == "NetworkProtocol" {
			return get(r, func() (any, error) { return s.networkProtocol(), nil })
		}
		if segs[2] == "VirtualMedia" && s.cfg.VirtualMedia != "system" {
			return s.routeMedia(r, p, s.ManagerPath()+"/VirtualMedia", segs[3:], body, unlock)
		}
		if len(segs) == 4 && segs[2] == "Actions" && segs[3] == "Manager.Reset" {
			return s.managerReset(r, body)
		}
		if s.cfg.Flavour == IDRAC && segs[2] == "Jobs" {
			return s.routeJobs(r, p, segs[3:], body)
		}
		if s.cfg.Flavour == IDRAC && len(segs) >= 5 && segs[2] == "Oem" && segs[3] == "Dell" && segs[4] == "Jobs" {
			return s.routeJobs(r, p, segs[5:], body)
		}
	case "Chassis":
		if len(segs) == 1 {
			return get(r, func() (any, error) {
				return s.collection(Rooted+"/Chassis", "Chassis", "Chassis Collection", []string{s.ChassisPath()}), nil
			})
		}
		if len(segs) > 2 && segs[1] == s.cfg.ChassisID && segs[2] == "NetworkAdapters" {
			return s.routeAdapters(r, p, segs[3:])
		}
		if segs[1] != s.cfg.ChassisID || len(segs) > 2 {
			return answer{}, notFound(p)
		}
		switch r.Method {
		case http.MethodGet:
			return answer{code: http.StatusOK, body: s.chassis()}, nil
		case http.MethodPatch:
			var in struct{ IndicatorLED *string }
			if err := decodePatch(body, &in, "IndicatorLED"); err != nil {
				return answer{}, err
			}
			if in.IndicatorLED != nil {
				if err := checkLED(*in.IndicatorLED); err != nil {
					return answer{}, err
				}
				s.sys.chassisLED = *in.IndicatorLED
			}
			return answer{code: http.StatusNoContent}, nil
		}
		return answer{}, notAllowed(r)
	case "UpdateService":
		if !s.cfg.NoUpdateService {
			return s.routeUpdate(r, p, segs[1:], body, unlock)
		}
	case "TaskService":
		return s.routeTasks(r, p, segs[1:])
	case "Registries":
		return s.routeRegistries(r, p, segs[1:])
	case "Dell":
		if s.cfg.Flavour == IDRAC {
			return s.routeDell(r, p, segs[1:], body)
		}
	}
	return answer{}, notFound(p)
}

func notAllowed(r *http.Request) error {
	return errf(http.StatusMethodNotAllowed, "OperationNotAllowed", "The %s operation is not allowed on %s.", r.Method, r.URL.Path)
}

// get answers a GET with fn's body; other methods are not allowed.
func get(r *http.Request, fn func() (any, error)) (answer, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return answer{}, notAllowed(r)
	}
	b, err := fn()
	if err != nil {
		return answer{}, err
	}
	return answer{code: http.StatusOK, body: b}, nil
}

// decodePatch decodes a PATCH body into v, refusing properties not in
// writable (400 PropertyNotWritable / PropertyUnknown, as a BMC does).
func decodePatch(body []byte, v any, writable ...string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service: %v", err)
	}
	for k := range raw {
		if strings.HasPrefix(k, "@") {
			continue
		}
		if !slices.Contains(writable, k) {
			return errf(http.StatusBadRequest, "PropertyNotWritable", "The property %s is a read only property and cannot be assigned a value.", k)
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errf(http.StatusBadRequest, "PropertyValueTypeError", "A property of the request has a value of the wrong type: %v", err)
	}
	return nil
}

func checkLED(v string) error {
	if !slices.Contains([]string{"Lit", "Blinking", "Off"}, v) {
		return errf(http.StatusBadRequest, "PropertyValueNotInList", "The value %s for the property IndicatorLED is not in the list of acceptable values.", v)
	}
	return nil
}

func (s *Server) serviceRoot() (any, error) {
	root := map[string]any{
		"@odata.id": s.odata(Rooted), "@odata.type": "#ServiceRoot.v1_11_0.ServiceRoot",
		"Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.11.0", "UUID": s.cfg.UUID,
		"Vendor": s.fl.vendor, "Product": s.fl.product,
		"Systems": s.link(Rooted + "/Systems"), "Managers": s.link(Rooted + "/Managers"),
		"Chassis":     s.link(Rooted + "/Chassis"),
		"TaskService": s.link(Rooted + "/TaskService"), "Registries": s.link(Rooted + "/Registries"),
		"ProtocolFeaturesSupported": map[string]any{"ExpandQuery": map[string]any{"ExpandAll": false}},
	}
	if !s.cfg.NoUpdateService {
		root["UpdateService"] = s.link(Rooted + "/UpdateService")
	}
	if !s.cfg.NoSessionService {
		root["SessionService"] = s.link(Rooted + "/SessionService")
		root["Links"] = map[string]any{"Sessions": s.link(Rooted + "/SessionService/Sessions")}
	}
	return root, nil
}
