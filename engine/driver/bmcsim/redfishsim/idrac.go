package redfishsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The iDRAC flavour's job queue, as Dell's Redfish API guide describes it
// for iDRAC 9 (facts carried over, nothing copied): pending BIOS settings
// apply at a reboot only when a configuration job targets them — created
// by POST …/Managers/iDRAC.Embedded.1/Jobs {"TargetSettingsURI": …}, or by
// a PATCH of Bios/Settings with @Redfish.SettingsApplyTime OnReset, or by
// Bios.ResetBios — and the queue is cleared through the DellJobService's
// DeleteJobQueue action (JID_CLEARALL), as Ironic's idrac interfaces do
// before cleaning. Without a job, iDRAC keeps the settings pending across
// reboots; a second configuration job, or a PATCH while one is scheduled,
// is refused.

// Job is one entry of the iDRAC job queue.
type Job struct {
	ID       string
	Name     string
	JobType  string // "BIOSConfiguration"
	State    string // "Scheduled", "Completed", "Failed"
	Message  string
	Target   string // TargetSettingsURI
	Percent  int
	Created  time.Time
	Finished time.Time
}

func (s *Server) jobsPath() string { return s.ManagerPath() + "/Jobs" }

func (s *Server) jobServicePath() string {
	return Rooted + "/Dell/Managers/" + s.cfg.ManagerID + "/DellJobService"
}

// scheduledBIOSJob is the BIOS configuration job waiting for a reboot.
func (s *Server) scheduledBIOSJob() *Job {
	for _, j := range s.jobs {
		if j.JobType == "BIOSConfiguration" && j.State == "Scheduled" {
			return j
		}
	}
	return nil
}

// newBIOSJob schedules the job that applies the pending BIOS settings at
// the next reboot.
func (s *Server) newBIOSJob() (*Job, error) {
	if s.scheduledBIOSJob() != nil {
		return nil, errf(http.StatusBadRequest, "ActionNotSupported", "Pending configuration values are already committed, unable to perform another set operation. (SYS011)")
	}
	if len(s.bios.pending) == 0 {
		return nil, errf(http.StatusBadRequest, "ActionParameterValueError", "No pending data is present to create a Configuration job. (SYS030)")
	}
	now := s.cfg.Now()
	j := &Job{ID: fmt.Sprintf("JID_%d%02d", now.Unix()%1000000000, len(s.jobs)), Name: "Configure: BIOS.Setup.1-1",
		JobType: "BIOSConfiguration", State: "Scheduled", Message: "Task successfully scheduled.",
		Target: s.biosPath() + "/" + s.fl.biosSettings, Created: now}
	s.jobs = append(s.jobs, j)
	return j, nil
}

// runBIOSJob is the reboot: the scheduled job applies the settings. It
// reports whether the pending settings may apply.
func (s *Server) runBIOSJob() bool {
	if s.cfg.Flavour != IDRAC {
		return true
	}
	j := s.scheduledBIOSJob()
	if j == nil {
		return false
	}
	j.State, j.Message, j.Percent, j.Finished = "Completed", "Job completed successfully. (PR19)", 100, s.cfg.Now()
	return true
}

func (s *Server) jobResource(j *Job) map[string]any {
	body := map[string]any{
		"@odata.id": s.odata(s.jobsPath() + "/" + j.ID), "@odata.type": "#DellJob.v1_0_2.DellJob",
		"Id": j.ID, "Name": j.Name, "JobType": j.JobType, "JobState": j.State, "Message": j.Message,
		"MessageId":       map[string]string{"Scheduled": "JCP001", "Completed": "PR19", "Failed": "SYS051"}[j.State],
		"PercentComplete": j.Percent, "TargetSettingsURI": j.Target,
		"StartTime": "TIME_NOW", "CompletionTime": nil,
	}
	if !j.Finished.IsZero() {
		body["CompletionTime"] = j.Finished.UTC().Format(time.RFC3339)
	}
	return body
}

// routeJobs serves …/Managers/{id}/Jobs[/{jid}] (also under Oem/Dell).
func (s *Server) routeJobs(r *http.Request, p string, segs []string, body []byte) (answer, error) {
	switch {
	case len(segs) == 0:
		switch r.Method {
		case http.MethodGet:
			var ms []string
			for _, j := range s.jobs {
				ms = append(ms, s.jobsPath()+"/"+j.ID)
			}
			return answer{code: http.StatusOK, body: s.collection(s.jobsPath(), "DellJob", "JobQueue", ms)}, nil
		case http.MethodPost:
			var in struct {
				TargetSettingsURI string
			}
			if err := json.Unmarshal(body, &in); err != nil {
				return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
			}
			if strings.TrimRight(in.TargetSettingsURI, "/") != s.biosPath()+"/"+s.fl.biosSettings {
				return answer{}, errf(http.StatusBadRequest, "ActionParameterValueError", "The value %s for TargetSettingsURI is not supported (the BIOS settings are %s).", in.TargetSettingsURI, s.biosPath()+"/"+s.fl.biosSettings)
			}
			j, err := s.newBIOSJob()
			if err != nil {
				return answer{}, err
			}
			return answer{code: http.StatusOK, header: map[string]string{"Location": s.jobsPath() + "/" + j.ID}}, nil
		}
		return answer{}, notAllowed(r)
	case len(segs) == 1:
		i := slices.IndexFunc(s.jobs, func(j *Job) bool { return j.ID == segs[0] })
		if i < 0 {
			return answer{}, notFound(p)
		}
		switch r.Method {
		case http.MethodGet:
			return answer{code: http.StatusOK, body: s.jobResource(s.jobs[i])}, nil
		case http.MethodDelete:
			s.jobs = slices.Delete(s.jobs, i, i+1)
			return answer{code: http.StatusOK}, nil
		}
		return answer{}, notAllowed(r)
	}
	return answer{}, notFound(p)
}

// routeDell serves the DellJobService and DelliDRACCardService
// (/redfish/v1/Dell/Managers/{id}/…).
func (s *Server) routeDell(r *http.Request, p string, segs []string, body []byte) (answer, error) {
	if len(segs) >= 3 && segs[0] == "Managers" && segs[1] == s.cfg.ManagerID && segs[2] == "DelliDRACCardService" {
		return s.routeIDRACCard(r, p, segs[3:], body)
	}
	if len(segs) < 3 || segs[0] != "Managers" || segs[1] != s.cfg.ManagerID || segs[2] != "DellJobService" {
		return answer{}, notFound(p)
	}
	switch {
	case len(segs) == 3:
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.jobServicePath(), "@odata.type": "#DellJobService.v1_1_0.DellJobService",
				"Id": "Job Service", "Name": "DellJobService",
				"Actions": map[string]any{
					"#DellJobService.DeleteJobQueue": map[string]any{"target": s.jobServicePath() + "/Actions/DellJobService.DeleteJobQueue"},
					"#DellJobService.SetupJobQueue":  map[string]any{"target": s.jobServicePath() + "/Actions/DellJobService.SetupJobQueue"},
				}}, nil
		})
	case len(segs) == 5 && segs[3] == "Actions" && segs[4] == "DellJobService.DeleteJobQueue":
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		var in struct{ JobID string }
		if err := json.Unmarshal(body, &in); err != nil || in.JobID == "" {
			return answer{}, errf(http.StatusBadRequest, "ActionParameterMissing", "The action DeleteJobQueue requires the parameter JobID.")
		}
		if in.JobID == "JID_CLEARALL" || in.JobID == "JID_CLEARALL_FORCE" {
			// Clearing the queue also drops what the jobs would have
			// applied, as on the iDRAC.
			s.jobs, s.bios.pending = nil, nil
			return answer{code: http.StatusOK}, nil
		}
		i := slices.IndexFunc(s.jobs, func(j *Job) bool { return j.ID == in.JobID })
		if i < 0 {
			return answer{}, errf(http.StatusBadRequest, "ActionParameterValueError", "Invalid Job ID %s. (SUP011)", in.JobID)
		}
		s.jobs = slices.Delete(s.jobs, i, i+1)
		return answer{code: http.StatusOK}, nil
	}
	return answer{}, notFound(p)
}

// Jobs returns copies of the iDRAC job queue.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Job
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	return out
}
