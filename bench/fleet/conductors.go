package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"castiron/storage/pgtest"
)

// pgRatio shows the three conductors' rate over one's, when both ran.
func pgRatio(r string) string {
	if r == "-" {
		return ""
	}
	return "; 3 conductors/1: " + r
}

// pgServer is the PostgreSQL server of the pg1 and pg3 targets (one per
// run, a new database per target), started on first use.
var pgServer *pgtest.Server

// startConductors runs n castiron conductors (c.after) on one new
// PostgreSQL database, power sync every second with c.workers workers
// each: the ring gives each a third of the fleet (n = 3), so the fleet's
// BMC reads should be n times one conductor's when BMC latency, not CPU,
// bounds them. Nodes are created through the first; reads are counted at
// the BMCs, whichever conductor makes them.
func startConductors(c config, dir string, n int) (*server, error) {
	if pgServer == nil {
		pg, err := pgtest.Start()
		if err != nil {
			return nil, err
		}
		pgServer = pg
	}
	db, err := pgServer.NewDatabase(context.Background())
	if err != nil {
		return nil, err
	}
	var all []*server
	stopAll := func() {
		for _, s := range all {
			s.stop()
		}
	}
	for i := 1; i <= n; i++ {
		s, err := startCastiron(c.after, filepath.Join(dir, fmt.Sprintf("c%d", i)), "--database", db,
			"--conductor-name", fmt.Sprintf("c%d", i), "--power-sync-workers", strconv.Itoa(c.workers))
		if err != nil {
			stopAll()
			return nil, err
		}
		all = append(all, s)
	}
	// Every conductor on every ring (each re-reads the conductors table
	// every second) before nodes are placed.
	time.Sleep(2 * time.Second)
	var bases []string
	for _, s := range all {
		bases = append(bases, s.base)
	}
	return &server{base: all[0].base, bases: bases, stop: stopAll, pids: func() []int {
		var out []int
		for _, s := range all {
			out = append(out, s.pids()...)
		}
		return out
	}}, nil
}
