package redfishsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Component is one entry of the firmware inventory (SoftwareInventory).
type Component struct {
	ID            string
	Name          string
	Version       string
	Updateable    bool
	ResetRequired bool   // an update is staged and applies at the next reset (BIOS)
	pending       string // staged version
	adapter       string // a NIC's firmware: the Chassis NetworkAdapter it runs on
}

// Image is what a firmware image file must hold for the emulator: JSON
// naming the component (inventory Id or Name; else the update's Targets)
// and the new version. Fail makes the update task end in Exception with
// that message; Never makes it run forever (a BMC task that never ends).
// Anything else is refused by the task ("not a firmware image").
type Image struct {
	Component string `json:",omitempty"`
	Version   string `json:",omitempty"`
	Fail      string `json:",omitempty"`
	Never     bool   `json:",omitempty"`
}

type task struct {
	id       string
	name     string
	state    string // Running, Completed, Exception
	start    time.Time
	end      time.Time
	delay    time.Duration
	never    bool
	messages []any
	done     func() error
}

// newTask starts a task that runs done when TaskDelay has passed (tasks
// advance on every request: no goroutine).
func (s *Server) newTask(name string, done func() error) *task {
	s.nextID++
	t := &task{id: fmt.Sprint(s.nextID), name: name, state: "Running", start: s.cfg.Now(), delay: s.cfg.TaskDelay, done: done}
	s.tasks = append(s.tasks, t)
	return t
}

func (t *task) fail(now time.Time, msg string) {
	t.state, t.end = "Exception", now
	t.messages = append(t.messages, map[string]any{"MessageId": "TaskEvent.1.0.TaskAborted", "Message": msg, "Severity": "Critical"})
}

func (s *Server) advanceTasks() {
	now := s.cfg.Now()
	for _, t := range s.tasks {
		if t.state != "Running" || t.never || now.Sub(t.start) < t.delay {
			continue
		}
		if t.done != nil {
			if err := t.done(); err != nil {
				t.fail(now, err.Error())
				continue
			}
		}
		t.state, t.end = "Completed", now
		t.messages = append(t.messages, map[string]any{"MessageId": "TaskEvent.1.0.TaskCompletedOK", "Message": "The task " + t.name + " has completed.", "Severity": "OK"})
	}
}

func (s *Server) taskPath(t *task) string    { return Rooted + "/TaskService/Tasks/" + t.id }
func (s *Server) monitorPath(t *task) string { return Rooted + "/TaskService/TaskMonitors/" + t.id }

func (s *Server) taskResource(t *task) map[string]any {
	pct := 100
	if t.state == "Running" {
		pct = 50
		if !t.never && t.delay > 0 {
			pct = min(99, int(s.cfg.Now().Sub(t.start)*100/t.delay))
		}
	}
	status := map[string]string{"Running": "OK", "Completed": "OK", "Exception": "Critical"}[t.state]
	body := map[string]any{
		"@odata.id": s.odata(s.taskPath(t)), "@odata.type": "#Task.v1_4_3.Task", "Id": t.id, "Name": t.name,
		"TaskState": t.state, "TaskStatus": status, "PercentComplete": pct,
		"StartTime": t.start.UTC().Format(time.RFC3339), "TaskMonitor": s.odata(s.monitorPath(t)),
		"Messages": append([]any{}, t.messages...),
	}
	if !t.end.IsZero() {
		body["EndTime"] = t.end.UTC().Format(time.RFC3339)
	}
	return body
}

// taskAccepted is the 202 of an operation that runs as a task: Location
// is the task monitor (DSP0266 §13.2).
func (s *Server) taskAccepted(t *task) answer {
	return answer{code: http.StatusAccepted, body: s.taskResource(t),
		header: map[string]string{"Location": s.odata(s.monitorPath(t)), "Retry-After": "1"}}
}

func (s *Server) findTask(id string) *task {
	i := slices.IndexFunc(s.tasks, func(t *task) bool { return t.id == id })
	if i < 0 {
		return nil
	}
	return s.tasks[i]
}

func (s *Server) routeTasks(r *http.Request, p string, segs []string) (answer, error) {
	switch {
	case len(segs) == 0:
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.odata(Rooted + "/TaskService"), "@odata.type": "#TaskService.v1_1_4.TaskService",
				"Id": "TaskService", "Name": "Task Service", "ServiceEnabled": true, "CompletedTaskOverWritePolicy": "Oldest",
				"Tasks": s.link(Rooted + "/TaskService/Tasks")}, nil
		})
	case len(segs) == 1 && segs[0] == "Tasks":
		return get(r, func() (any, error) {
			var ms []string
			for _, t := range s.tasks {
				ms = append(ms, s.taskPath(t))
			}
			return s.collection(Rooted+"/TaskService/Tasks", "Task", "Task Collection", ms), nil
		})
	case len(segs) == 2 && (segs[0] == "Tasks" || segs[0] == "TaskMonitors"):
		t := s.findTask(segs[1])
		if t == nil {
			return answer{}, notFound(p)
		}
		if r.Method == http.MethodDelete && segs[0] == "Tasks" {
			if t.state == "Running" {
				t.fail(s.cfg.Now(), "The task was cancelled.")
			}
			return answer{code: http.StatusNoContent}, nil
		}
		if r.Method != http.MethodGet {
			return answer{}, notAllowed(r)
		}
		code := http.StatusOK
		if segs[0] == "TaskMonitors" && t.state == "Running" {
			code = http.StatusAccepted // still running: the monitor answers 202
		}
		return answer{code: code, body: s.taskResource(t)}, nil
	}
	return answer{}, notFound(p)
}

// --- update service ---

func (s *Server) routeUpdate(r *http.Request, p string, segs []string, body []byte, unlock func()) (answer, error) {
	up := Rooted + "/UpdateService"
	switch {
	case len(segs) == 0:
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.odata(up), "@odata.type": "#UpdateService.v1_8_0.UpdateService",
				"Id": "UpdateService", "Name": "Update Service", "ServiceEnabled": true,
				"HttpPushUri": s.odata(up + "/update"), "MultipartHttpPushUri": s.odata(up + "/upload"),
				"FirmwareInventory": s.link(up + "/FirmwareInventory"),
				"Actions":           s.updateActions(up)}, nil
		})
	case len(segs) == 1 && segs[0] == "FirmwareInventory":
		return get(r, func() (any, error) {
			var ms []string
			for _, c := range s.firmware {
				ms = append(ms, up+"/FirmwareInventory/"+c.ID)
			}
			return s.collection(up+"/FirmwareInventory", "SoftwareInventory", "Firmware Inventory Collection", ms), nil
		})
	case len(segs) == 2 && segs[0] == "FirmwareInventory":
		i := slices.IndexFunc(s.firmware, func(c *Component) bool { return c.ID == segs[1] })
		if i < 0 {
			return answer{}, notFound(p)
		}
		c := s.firmware[i]
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.odata(up + "/FirmwareInventory/" + c.ID), "@odata.type": "#SoftwareInventory.v1_2_3.SoftwareInventory",
				"Id": c.ID, "Name": c.Name, "Version": c.Version, "Updateable": c.Updateable, "SoftwareId": c.ID,
				"Manufacturer": s.fl.manufacturer, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
				"RelatedItem": []any{s.link(s.SystemPath())}}, nil
		})
	case len(segs) == 2 && segs[0] == "Actions" && segs[1] == "UpdateService.SimpleUpdate" && !s.cfg.MultipartOnly:
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		var in struct {
			ImageURI         string
			TransferProtocol string
			Targets          []string
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
		}
		if in.ImageURI == "" {
			return answer{}, errf(http.StatusBadRequest, "ActionParameterMissing", "The action UpdateService.SimpleUpdate requires the parameter ImageURI to be present in the request body.")
		}
		if err := s.checkTargets(in.Targets); err != nil {
			return answer{}, err
		}
		// The BMC fetches the image (the request waits, as sushy-tools'
		// InsertMedia does); a fetch that fails ends the task in Exception.
		unlock()
		img, ferr := s.fetch(r.Context(), in.ImageURI)
		s.mu.Lock()
		t := s.updateTask(img, ferr, in.Targets)
		a := s.taskAccepted(t)
		s.mu.Unlock()
		return a, nil
	case len(segs) == 1 && (segs[0] == "upload" || segs[0] == "update"):
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		img, targets := body, []string(nil)
		if segs[0] == "upload" {
			var err error
			if img, targets, err = multipartImage(r, body); err != nil {
				return answer{}, err
			}
			if err := s.checkTargets(targets); err != nil {
				return answer{}, err
			}
		}
		return s.taskAccepted(s.updateTask(img, nil, targets)), nil
	}
	return answer{}, notFound(p)
}

func (s *Server) updateActions(up string) map[string]any {
	if s.cfg.MultipartOnly {
		return map[string]any{}
	}
	return map[string]any{"#UpdateService.SimpleUpdate": map[string]any{
		"target": s.odata(up + "/Actions/UpdateService.SimpleUpdate"),
		"TransferProtocol@Redfish.AllowableValues": []string{"HTTP", "HTTPS"},
	}}
}

func (s *Server) checkTargets(targets []string) error {
	for _, tg := range targets {
		if s.componentOf(tg) == nil {
			return errf(http.StatusBadRequest, "ActionParameterValueError", "The target %s is not an updateable component of the firmware inventory.", tg)
		}
	}
	return nil
}

// componentOf finds a component by inventory path, Id or Name. A System's
// path stands for its BIOS and the Manager's for the BMC firmware (Ironic
// sends the system as the target when a BMC has several; sushy-tools
// updates the BIOS for it).
func (s *Server) componentOf(ref string) *Component {
	switch strings.TrimRight(ref, "/") {
	case s.SystemPath(), s.ManagerPath():
		bios := strings.TrimRight(ref, "/") == s.SystemPath()
		for _, c := range s.firmware {
			if c.ResetRequired == bios {
				return c
			}
		}
	}
	id := strings.TrimRight(ref, "/")
	id = id[strings.LastIndex(id, "/")+1:]
	for _, c := range s.firmware {
		if c.ID == id || strings.EqualFold(c.Name, ref) || strings.EqualFold(c.ID, ref) {
			return c
		}
	}
	return nil
}

// multipartImage reads a multipart push (DSP0266 §13.4: UpdateParameters
// JSON and UpdateFile).
func multipartImage(r *http.Request, body []byte) ([]byte, []string, error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, nil, errf(http.StatusUnsupportedMediaType, "UnsupportedMediaType", "A multipart/form-data body is required.")
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var img []byte
	var targets []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, errf(http.StatusBadRequest, "MalformedJSON", "The multipart body could not be read: %v", err)
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return nil, nil, errf(http.StatusBadRequest, "MalformedJSON", "The multipart body could not be read: %v", err)
		}
		switch part.FormName() {
		case "UpdateParameters":
			var up struct{ Targets []string }
			if err := json.Unmarshal(data, &up); err != nil {
				return nil, nil, errf(http.StatusBadRequest, "MalformedJSON", "UpdateParameters is not valid JSON: %v", err)
			}
			targets = up.Targets
		case "UpdateFile":
			img = data
		}
	}
	if img == nil {
		return nil, nil, errf(http.StatusBadRequest, "ActionParameterMissing", "The multipart push needs an UpdateFile part.")
	}
	return img, targets, nil
}

// updateTask starts the task that applies a firmware image.
func (s *Server) updateTask(raw []byte, fetchErr error, targets []string) *task {
	t := s.newTask("Firmware update", nil)
	if fetchErr != nil {
		t.done = func() error { return fmt.Errorf("the image could not be downloaded: %v", fetchErr) }
		return t
	}
	var img Image
	if err := json.Unmarshal(raw, &img); err != nil || (img.Version == "" && img.Fail == "" && !img.Never) {
		t.done = func() error { return fmt.Errorf("the image is not a firmware image for this system") }
		return t
	}
	t.never = img.Never
	t.done = func() error {
		if img.Fail != "" {
			return fmt.Errorf("%s", img.Fail)
		}
		var cs []*Component
		if img.Component != "" {
			c := s.componentOf(img.Component)
			if c == nil {
				return fmt.Errorf("the image is for %s, which this system does not have", img.Component)
			}
			cs = append(cs, c)
		} else {
			for _, tg := range targets {
				cs = append(cs, s.componentOf(tg))
			}
		}
		if len(cs) == 0 {
			return fmt.Errorf("the image names no component and the update no Targets")
		}
		for _, c := range cs {
			if c.ResetRequired {
				c.pending = img.Version // applies at the next reset
				t.messages = append(t.messages, map[string]any{"MessageId": "Base.1.8.ResetRequired",
					"Message": c.Name + " " + img.Version + " is staged and applies at the next reset.", "Severity": "OK"})
			} else {
				c.Version = img.Version
			}
		}
		return nil
	}
	return t
}

// Firmware returns copies of the firmware inventory (Version is what runs;
// a staged version shows after the next reset).
func (s *Server) Firmware() []Component {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceTasks()
	var out []Component
	for _, c := range s.firmware {
		out = append(out, *c)
	}
	return out
}

// fetch downloads url (virtual media and firmware images).
func (s *Server) fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &httpStatusError{code: resp.StatusCode, url: url}
	}
	return io.ReadAll(io.LimitReader(resp.Body, 4<<30))
}

type httpStatusError struct {
	code int
	url  string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("GET %s: HTTP %d", e.url, e.code) }
