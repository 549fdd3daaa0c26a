package redfishsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ControlPrefix is where the emulator's own control API lives (outside
// /redfish, with the BMC's basic credentials), when Config.ControlAPI is
// set: what tests and the demo rack do to a BMC running in another
// process (cmd/redfishsim) that the Go API does in-process.
//
//	GET    /redfishsim/state          power, boot, health, BIOS, volumes, firmware, media, sessions, stats
//	POST   /redfishsim/faults         a Fault as JSON (Delay as a Go duration string): 201
//	DELETE /redfishsim/faults         every fault removed
//	POST   /redfishsim/drop-sessions  every session forgotten
//	PUT    /redfishsim/health         {"Health": "OK" | "Warning" | "Critical"}
const ControlPrefix = "/redfishsim"

// State is what GET /redfishsim/state answers.
type State struct {
	PowerState     string
	BootTarget     string
	BootEnabled    string
	BootMode       string
	Health         string
	SecureBoot     bool
	BIOS           map[string]any
	BIOSPending    map[string]any
	Volumes        []Volume
	Firmware       []Component
	Media          []Media
	Sessions       int
	Stats          Stats
	RunningTasks   int
	CompletedTasks int

	// HTTPBootURI is the Boot's HttpBootUri; LastBoot what the system last
	// started with (a Once override is used up by that start, so
	// BootTarget no longer shows it).
	HTTPBootURI string
	LastBoot    Boot
}

// Snapshot returns the BMC's state.
func (s *Server) Snapshot() State {
	cur, pending := s.BIOS()
	st := State{PowerState: s.PowerState(), BIOS: cur, BIOSPending: pending, Volumes: s.Volumes(),
		Firmware: s.Firmware(), Media: s.Media(), Sessions: s.Sessions(), Stats: s.Stats()}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.BootTarget, st.BootEnabled, st.BootMode = s.sys.target, s.sys.enabled, s.sys.mode
	st.HTTPBootURI, st.LastBoot = s.sys.httpBootURI, s.sys.lastBoot
	st.Health, st.SecureBoot = s.sys.health, s.sys.secureBoot
	for _, t := range s.tasks {
		switch t.state {
		case "Running":
			st.RunningTasks++
		case "Completed":
			st.CompletedTasks++
		}
	}
	return st
}

func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != s.cfg.User || p != s.cfg.Password {
		redfishError(w, http.StatusUnauthorized, "InsufficientPrivilege", "Invalid username or password.")
		return
	}
	switch what := strings.Trim(strings.TrimPrefix(r.URL.Path, ControlPrefix), "/"); {
	case what == "state" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Snapshot())
	case what == "faults" && r.Method == http.MethodPost:
		var in struct {
			Fault
			Delay string
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			redfishError(w, http.StatusBadRequest, "MalformedJSON", err.Error())
			return
		}
		f := in.Fault
		if in.Delay != "" {
			d, err := time.ParseDuration(in.Delay)
			if err != nil {
				redfishError(w, http.StatusBadRequest, "PropertyValueFormatError", "Delay: "+err.Error())
				return
			}
			f.Delay = d
		}
		s.InjectFault(f)
		w.WriteHeader(http.StatusCreated)
	case what == "faults" && r.Method == http.MethodDelete:
		s.mu.Lock()
		s.faults = nil
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case what == "drop-sessions" && r.Method == http.MethodPost:
		s.DropSessions()
		w.WriteHeader(http.StatusNoContent)
	case what == "health" && r.Method == http.MethodPut:
		var in struct{ Health string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !slices.Contains([]string{"OK", "Warning", "Critical"}, in.Health) {
			redfishError(w, http.StatusBadRequest, "PropertyValueNotInList", "Health: OK, Warning or Critical")
			return
		}
		s.SetHealth(in.Health)
		w.WriteHeader(http.StatusNoContent)
	default:
		redfishError(w, http.StatusNotFound, "ResourceMissingAtURI", "The resource at the URI "+r.URL.Path+" was not found.")
	}
}
