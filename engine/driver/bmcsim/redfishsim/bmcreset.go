package redfishsim

import (
	"encoding/json"
	"net/http"
	"slices"
)

// A reset of the BMC itself: Manager.Reset, or on the iDRAC flavour Dell's
// DelliDRACCardService.iDRACReset (what Ironic's idrac-redfish reset_idrac
// and known_good_state steps post). The BMC then goes away for
// Config.BMCResetTime (connections close unanswered) and comes back having
// forgotten every session; the host, its power and its settings are
// untouched, as on a server whose BMC reboots.

func (s *Server) idracCardServicePath() string {
	return Rooted + "/Dell/Managers/" + s.cfg.ManagerID + "/DelliDRACCardService"
}

// resetBMC starts the reset; the caller holds s.mu.
func (s *Server) resetBMC() {
	s.downUntil = s.cfg.Now().Add(s.cfg.BMCResetTime)
	clear(s.sessions)
	s.stats.BMCResets++
	s.cfg.Logger.Info("redfishsim: BMC reset", "down_for", s.cfg.BMCResetTime)
}

// managerReset is POST …/Managers/{id}/Actions/Manager.Reset.
func (s *Server) managerReset(r *http.Request, body []byte) (answer, error) {
	if r.Method != http.MethodPost {
		return answer{}, notAllowed(r)
	}
	var in struct{ ResetType string }
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
		}
	}
	if in.ResetType != "" && !slices.Contains([]string{"GracefulRestart", "ForceRestart"}, in.ResetType) {
		return answer{}, errf(http.StatusBadRequest, "ActionParameterNotSupported",
			"The parameter ResetType for the action Manager.Reset is not supported on the target resource (value %s).", in.ResetType)
	}
	s.resetBMC()
	return answer{code: http.StatusNoContent}, nil
}

// routeIDRACCard serves DelliDRACCardService and its iDRACReset action
// (segs after the service's name).
func (s *Server) routeIDRACCard(r *http.Request, p string, segs []string, body []byte) (answer, error) {
	switch {
	case len(segs) == 0:
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.idracCardServicePath(), "@odata.type": "#DelliDRACCardService.v1_1_0.DelliDRACCardService",
				"Id": "DelliDRACCardService", "Name": "DelliDRACCardService",
				"Actions": map[string]any{"#DelliDRACCardService.iDRACReset": map[string]any{
					"target":                        s.idracCardServicePath() + "/Actions/DelliDRACCardService.iDRACReset",
					"Force@Redfish.AllowableValues": []string{"Force", "Graceful"},
				}}}, nil
		})
	case len(segs) == 2 && segs[0] == "Actions" && segs[1] == "DelliDRACCardService.iDRACReset":
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		var in struct{ Force string }
		if len(body) > 0 {
			if err := json.Unmarshal(body, &in); err != nil {
				return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
			}
		}
		if in.Force != "" && in.Force != "Force" && in.Force != "Graceful" {
			return answer{}, errf(http.StatusBadRequest, "ActionParameterValueError", "The value %s for the parameter Force is not supported. (SYS426)", in.Force)
		}
		s.resetBMC()
		return answer{code: http.StatusOK, body: map[string]any{"@Message.ExtendedInfo": []any{map[string]any{
			"Message": "iDRAC restart operation triggered successfully.", "MessageId": "IDRAC.2.8.RAC069"}}}}, nil
	}
	return answer{}, notFound(p)
}
