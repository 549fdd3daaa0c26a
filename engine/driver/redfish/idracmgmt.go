package redfish

import (
	"context"
	"errors"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
)

// iDRAC's own management actions, through Dell's OEM services linked from
// the Manager (Links.Oem.Dell), as sushy-oem-idrac reaches them for
// Ironic's idrac-redfish management steps: DellJobService.DeleteJobQueue
// with JID_CLEARALL (clear_job_queue) and DelliDRACCardService.iDRACReset
// (reset_idrac). Hand-written: gofish has no Dell OEM resources.

var (
	_ driver.BMCJobQueueClearer = (*Driver)(nil)
	_ driver.BMCResetter        = (*Driver)(nil)
)

// BMCResetDownWait bounds the wait for the BMC to go away after a reset
// was accepted (it keeps answering for a moment); BMCResetUpWait the wait
// for it to answer again.
const (
	BMCResetDownWait = 60 * time.Second
	BMCResetUpWait   = 10 * time.Minute
)

// dellService returns the @odata.id of the Dell OEM service name that the
// node's Manager links; an iDRAC without it gets sushy-oem-idrac's words.
func (o *op) dellService(name string) (string, error) {
	path := o.inf.systemID
	if path == "" {
		p, err := o.onlySystem()
		if err != nil {
			return "", err
		}
		path = p
	}
	var sys struct {
		Links struct {
			ManagedBy []struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if err := getJSON(o.c, path, &sys); err != nil {
		return "", opError(o.inf, err, "Redfish read of system %s failed", path)
	}
	for _, m := range sys.Links.ManagedBy {
		var mgr struct {
			Links struct {
				Oem struct {
					Dell map[string]struct {
						ID string `json:"@odata.id"`
					}
				}
			}
		}
		if err := getJSON(o.c, m.ID, &mgr); err != nil {
			return "", opError(o.inf, err, "Redfish read of manager %s failed", m.ID)
		}
		if s, ok := mgr.Links.Oem.Dell[name]; ok && s.ID != "" {
			return s.ID, nil
		}
	}
	return "", fault.New(fault.Invalid, "Oem/Dell/%s is missing from the manager of system %s: not an iDRAC, or its firmware is too old (iDRAC 9 needs 4.x or newer)", name, path)
}

// dellAction posts body to action of the Dell service the node's Manager
// links.
func (d *Driver) dellAction(ctx context.Context, n driver.Node, service, action string, body any, what string) (*op, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return nil, err
	}
	svc, err := o.dellService(service)
	if err != nil {
		return nil, err
	}
	resp, err := o.c.Post(svc+"/Actions/"+action, body)
	if err != nil {
		return nil, opError(o.inf, err, "Failed to %s of node %s", what, n.UUID)
	}
	resp.Body.Close()
	return o, nil
}

// ClearBMCJobQueue deletes every job of the iDRAC's queue (JID_CLEARALL:
// scheduled configuration jobs and what they would have applied).
func (d *Driver) ClearBMCJobQueue(ctx context.Context, n driver.Node) error {
	_, err := d.dellAction(ctx, n, "DellJobService", "DellJobService.DeleteJobQueue",
		map[string]string{"JobID": "JID_CLEARALL"}, "clear the job queue of the iDRAC")
	return err
}

// ResetBMC posts iDRACReset (graceful) and waits, as sushy-oem-idrac
// does, for the iDRAC to go away and then to serve the node's system again
// (a new session: the old ones die with the reset).
func (d *Driver) ResetBMC(ctx context.Context, n driver.Node) error {
	o, err := d.dellAction(ctx, n, "DelliDRACCardService", "DelliDRACCardService.iDRACReset",
		map[string]string{"Force": "Graceful"}, "reset the iDRAC")
	if err != nil {
		return err
	}
	answers := func() bool {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.MaxPollInterval+time.Second)
		defer cancel()
		po, err := d.begin(pctx, n)
		if err != nil {
			return false
		}
		_, err = po.system()
		return err == nil
	}
	wait := func(until time.Time, want bool) bool {
		delay := d.cfg.PollInterval
		for {
			if answers() == want {
				return true
			}
			if time.Now().After(until) {
				return false
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
			delay = min(2*delay, d.cfg.MaxPollInterval)
		}
	}
	start := time.Now()
	if !wait(start.Add(BMCResetDownWait), false) {
		if ctx.Err() != nil {
			return opError(o.inf, ctx.Err(), "The iDRAC of node %s was reset", n.UUID)
		}
		// It took the reset but never went away: a reset that was queued,
		// or a BMC too quick to see go. Carry on, as it answers.
		d.log.WarnContext(ctx, "redfish: the iDRAC accepted a reset but kept answering", "node", n.UUID, "waited", BMCResetDownWait)
		return nil
	}
	if !wait(time.Now().Add(BMCResetUpWait), true) {
		err := ctx.Err()
		if err == nil {
			err = errors.New("no answer")
		}
		return opError(o.inf, err, "The iDRAC of node %s did not come back within %s of its reset", n.UUID, BMCResetUpWait)
	}
	d.log.InfoContext(ctx, "redfish: iDRAC reset done", "node", n.UUID, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
