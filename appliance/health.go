package appliance

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"castiron/engine"
	"castiron/httpapi/health"
	"castiron/storage"
)

// readiness is what /readyz checks: the database takes a write, the
// conductor's heartbeat is recent, and every listener this configuration
// has is up.
func readiness(store *storage.SQLite, cond *engine.Conductor, apiUp *atomic.Bool, prov *provisioning) *health.Probes {
	checks := []health.Check{
		{Name: "database", Run: func(ctx context.Context) error {
			return store.CheckWritable(ctx, cond.Hostname())
		}},
		{Name: "conductor", Run: func(context.Context) error { return heartbeatFresh(cond.Heartbeat(), time.Now()) }},
		listenerCheck("api listener", apiUp.Load),
	}
	return health.New(append(checks, prov.listenerChecks()...)...)
}

// heartbeatFresh fails when the conductor would look dead to others.
func heartbeatFresh(h engine.HeartbeatState, now time.Time) error {
	if h.Last.IsZero() {
		return errors.New("not started")
	}
	age := now.Sub(h.Last).Round(time.Second)
	if age <= h.Timeout {
		return nil
	}
	if h.Err != nil {
		return fmt.Errorf("no heartbeat for %s (limit %s): %w", age, h.Timeout, h.Err)
	}
	return fmt.Errorf("no heartbeat for %s (limit %s)", age, h.Timeout)
}

func listenerCheck(name string, up func() bool) health.Check {
	return health.Check{Name: name, Run: func(context.Context) error {
		if !up() {
			return errors.New("not listening")
		}
		return nil
	}}
}
