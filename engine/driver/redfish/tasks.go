package redfish

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"castiron/engine/driver"
)

// Redfish tasks (DSP0266 §13.2): an operation answered 202 carries a task
// monitor in Location; the monitor answers 202 while the task runs and then
// the task (or the operation's result). Firmware updates and, on some BMCs
// (iDRAC), volume create/delete run as tasks.

type rfTask struct {
	TaskState       string
	TaskStatus      string
	PercentComplete *int
	Messages        []struct {
		MessageID string `json:"MessageId"`
		Message   string
	}
}

// monitorOf is the task monitor path of a 202 answer: its Location
// header, else the body's TaskMonitor or @odata.id (a Task).
func monitorOf(resp *http.Response, body []byte) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		var t struct {
			TaskMonitor string
			ID          string `json:"@odata.id"`
		}
		if json.Unmarshal(body, &t) == nil {
			loc = firstNonEmpty(t.TaskMonitor, t.ID)
		}
	}
	if u, err := url.Parse(loc); err == nil && u.Host != "" {
		loc = u.RequestURI()
	}
	return loc
}

// taskState reads a task monitor once. A monitor that is gone (404) after
// answering is taken as a finished task, as Ironic's redfish RAID does
// ("assuming task completed successfully"): BMCs drop monitors of tasks
// that ended.
func (o *op) taskState(uri string) (driver.TaskState, error) {
	resp, err := o.c.Get(uri)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return driver.TaskState{Done: true, Percent: -1, Message: "the BMC no longer knows task " + uri}, nil
		}
		return driver.TaskState{}, opError(o.inf, err, "Redfish read of task %s failed", uri)
	}
	defer resp.Body.Close()
	var t rfTask
	_ = json.NewDecoder(resp.Body).Decode(&t)
	st := driver.TaskState{Percent: -1}
	if t.PercentComplete != nil {
		st.Percent = *t.PercentComplete
	}
	var msgs []string
	for _, m := range t.Messages {
		if m.Message != "" {
			msgs = append(msgs, m.Message)
		}
		if strings.Contains(m.MessageID, "ResetRequired") {
			st.ResetRequired = true
		}
	}
	st.Message = strings.Join(msgs, "; ")
	switch t.TaskState {
	case "Completed":
		st.Done = true
		st.Failed = t.TaskStatus == "Critical"
	case "Exception", "Killed", "Cancelled":
		st.Done, st.Failed = true, true
	case "":
		// The monitor answered with the operation's result, not a task.
		st.Done = resp.StatusCode != http.StatusAccepted
	}
	return st, nil
}

// waitTask polls a task monitor with backoff until the task ends or the
// operation's context does; a failed task is an error with the BMC's
// messages.
func (o *op) waitTask(uri, what string) (driver.TaskState, error) {
	start := time.Now()
	delay := o.d.cfg.PollInterval
	for {
		st, err := o.taskState(uri)
		if err != nil {
			return st, err
		}
		if st.Done {
			if st.Failed {
				return st, &bmcError{msg: fmt.Sprintf("Redfish task %s (%s) failed: %s", uri, what, firstNonEmpty(st.Message, "no message"))}
			}
			return st, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-o.c.ctx.Done():
			t.Stop()
			return st, &bmcError{msg: fmt.Sprintf("Redfish task %s (%s) still running after %s (%d%% done)",
				uri, what, time.Since(start).Round(time.Second), st.Percent), causes: []error{o.c.ctx.Err()}}
		case <-t.C:
		}
		delay = min(2*delay, o.d.cfg.MaxPollInterval)
	}
}
