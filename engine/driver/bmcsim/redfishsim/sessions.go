package redfishsim

// Sessions and authentication (SessionService, X-Auth-Token, basic auth):
// split from server.go, which routes the requests.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// authenticate checks the X-Auth-Token or the basic credentials.
func (s *Server) authenticate(r *http.Request) error {
	now := s.cfg.Now()
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		ss, ok := s.sessions[tok]
		if ok && now.Sub(ss.lastUsed) > s.cfg.SessionTimeout {
			delete(s.sessions, tok)
			ok = false
		}
		if !ok {
			s.stats.AuthFailures++
			return errf(http.StatusUnauthorized, "NoValidSession", "There is no valid session established with the implementation.")
		}
		ss.lastUsed = now
		return nil
	}
	u, p, ok := r.BasicAuth()
	if !ok || s.cfg.NoBasicAuth {
		s.stats.AuthFailures++
		return errf(http.StatusUnauthorized, "NoValidSession", "There is no valid session established with the implementation.")
	}
	if u != s.cfg.User || p != s.cfg.Password {
		s.stats.AuthFailures++
		return errf(http.StatusUnauthorized, "InsufficientPrivilege", "Invalid username or password.")
	}
	return nil
}

func (s *Server) login(body []byte) (answer, error) {
	var in struct{ UserName, Password string }
	if err := json.Unmarshal(body, &in); err != nil {
		return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
	}
	if in.UserName != s.cfg.User || in.Password != s.cfg.Password {
		s.stats.AuthFailures++
		return answer{}, errf(http.StatusUnauthorized, "InsufficientPrivilege", "Invalid username or password.")
	}
	s.nextID++
	ss := &session{id: fmt.Sprint(s.nextID), user: in.UserName, token: newID(), lastUsed: s.cfg.Now()}
	s.sessions[ss.token] = ss
	s.stats.Logins++
	p := Rooted + "/SessionService/Sessions/" + ss.id
	loc := s.odata(p)
	if s.cfg.Flavour == ILO && s.base != "" {
		loc = s.base + loc // iLO answers an absolute Location
	}
	return answer{code: http.StatusCreated, body: s.sessionBody(ss),
		header: map[string]string{"X-Auth-Token": ss.token, "Location": loc}}, nil
}

func (s *Server) sessionBody(ss *session) map[string]any {
	return map[string]any{"@odata.id": s.odata(Rooted + "/SessionService/Sessions/" + ss.id),
		"@odata.type": "#Session.v1_3_0.Session", "Id": ss.id, "Name": "User Session", "UserName": ss.user}
}

func (s *Server) routeSessions(r *http.Request, segs []string) (answer, error) {
	if s.cfg.NoSessionService {
		return answer{}, notFound(r.URL.Path)
	}
	switch {
	case len(segs) == 0:
		if r.Method == http.MethodPatch {
			return answer{code: http.StatusNoContent}, nil
		}
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.odata(Rooted + "/SessionService"), "@odata.type": "#SessionService.v1_1_8.SessionService",
				"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true,
				"SessionTimeout": int(s.cfg.SessionTimeout / time.Second), "Sessions": s.link(Rooted + "/SessionService/Sessions")}, nil
		})
	case len(segs) == 1 && segs[0] == "Sessions":
		return get(r, func() (any, error) {
			var ids []string
			for _, ss := range s.sessions {
				ids = append(ids, Rooted+"/SessionService/Sessions/"+ss.id)
			}
			slices.Sort(ids)
			return s.collection(Rooted+"/SessionService/Sessions", "Session", "Session Collection", ids), nil
		})
	case len(segs) == 2 && segs[0] == "Sessions":
		for tok, ss := range s.sessions {
			if ss.id != segs[1] {
				continue
			}
			switch r.Method {
			case http.MethodGet:
				return answer{code: http.StatusOK, body: s.sessionBody(ss)}, nil
			case http.MethodDelete:
				delete(s.sessions, tok)
				s.stats.Logouts++
				return answer{code: http.StatusNoContent}, nil
			}
			return answer{}, notAllowed(r)
		}
	}
	return answer{}, notFound(r.URL.Path)
}
