package main

import (
	"fmt"
	"strings"
)

// table prints the results side by side, a row per fleet size and a
// column per target, with the ratios the issue asks for.
func table(c config, rs []result) string {
	by := map[string]map[int]result{}
	for _, r := range rs {
		if by[r.Target] == nil {
			by[r.Target] = map[int]result{}
		}
		by[r.Target][r.N] = r
	}
	var cols []string
	for _, t := range c.targets {
		if by[t] != nil {
			cols = append(cols, t)
		}
	}
	name := map[string]string{"before": "castiron main", "after": "castiron fleet", "ironic": "Ironic 21.4",
		"pg1": fmt.Sprintf("1 conductor on PostgreSQL (%d workers)", c.workers), "pg3": fmt.Sprintf("3 conductors on PostgreSQL (%d workers each)", c.workers)}
	var b strings.Builder
	proto := "IPMI lanplus, suite 17"
	per := "packets/read"
	if c.bmc == "redfish" {
		proto, per = "Redfish over HTTP, castiron's emulator state-only", "requests/read"
	}
	fmt.Fprintf(&b, "\nPower sync, %d-%d ms BMCs (%s, one 127.x.y.z each), interval 1 s; columns: %s\n\n",
		c.latMin.Milliseconds(), c.latMax.Milliseconds(), proto, strings.Join(func() []string {
			var o []string
			for _, t := range cols {
				o = append(o, name[t])
			}
			return o
		}(), " / "))
	fmt.Fprintf(&b, "| nodes | BMC reads/min | x after/before | x after/Ironic | full sweep (warm) | cold sweep | %s | CPU cores | RSS MiB |\n|---|---|---|---|---|---|---|---|---|\n", per)
	for _, n := range c.ns {
		var reads, sweep, cold, pk, cores, rss []string
		for _, t := range cols {
			r, ok := by[t][n]
			if !ok {
				reads, sweep, cold, pk, cores, rss = append(reads, "-"), append(sweep, "-"), append(cold, "-"), append(pk, "-"), append(cores, "-"), append(rss, "-")
				continue
			}
			mark := ""
			if r.Errors != "" {
				mark = " ⚠"
			}
			reads = append(reads, fmt.Sprintf("%.0f%s", r.ReadsPerMin, mark))
			sw := fmt.Sprintf("%.1f s", r.SweepS)
			if !r.SweepExact {
				sw = "~" + sw
			}
			sweep = append(sweep, sw)
			cs := fmt.Sprintf("%.1f s", r.ColdSweepS)
			if !r.ColdDone {
				cs = ">" + cs
			}
			cold = append(cold, cs)
			pk = append(pk, fmt.Sprintf("%.2f", float64(r.Packets)/100))
			cores = append(cores, fmt.Sprintf("%.2f", r.Cores))
			rss = append(rss, fmt.Sprintf("%.0f", r.RSSMiB))
		}
		ratio := func(a, b string) string {
			ra, ok1 := by[a][n]
			rb, ok2 := by[b][n]
			if !ok1 || !ok2 || rb.ReadsPerMin == 0 {
				return "-"
			}
			return fmt.Sprintf("x%.1f", ra.ReadsPerMin/rb.ReadsPerMin)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, strings.Join(reads, " / "),
			ratio("after", "before"), ratio("after", "ironic")+pgRatio(ratio("pg3", "pg1")), strings.Join(sweep, " / "), strings.Join(cold, " / "),
			strings.Join(pk, " / "), strings.Join(cores, " / "), strings.Join(rss, " / "))
	}
	b.WriteString("\n~ extrapolated (N / rate: the window ended first); > the cold sweep was still running at the cap. packets/read (IPMI) counts every packet the BMCs received per power read (session setup, keepalives and Close Session included); requests/read (Redfish) every HTTP request (service root, sessions, the system). With the 1 s interval a target reads at most N x 60 a minute: a rate at that ceiling means passes shorter than a second.\n")
	for _, r := range rs {
		if r.Errors != "" {
			fmt.Fprintf(&b, "⚠ %s N=%d: %s\n", r.Target, r.N, r.Errors)
		}
	}
	return b.String()
}
