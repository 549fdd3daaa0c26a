package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// row is one line of the comparison table: a figure of the last record that
// matches mode, variant and label.
type row struct {
	title          string
	mode, variant  string
	label          string
	figure         string
	higherIsBetter bool
	// goal is the ratio issue 15 asks for on this row (0: none); the ratio
	// cell says whether this run met it.
	goal float64
}

// The goals of the performance issue: every API figure ≥ ×50 Ironic's,
// idle RSS ≤ 1/10 of Ironic's.
const (
	goalAPI = 50
	goalRSS = 10
)

func runTable(_ context.Context, c *common, args []string) error {
	fs := newFlags("table", c)
	in := fs.String("in", "", "JSON-lines file written by the other modes (default stdin)")
	order := fs.String("targets", "", "comma-separated column order (default: order of appearance); the first is the baseline of the ratio column")
	if err := parse(fs, args); err != nil {
		return err
	}
	var r io.Reader = os.Stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	recs, err := readRecords(r)
	if err != nil {
		return err
	}
	return writeTable(os.Stdout, recs, *order)
}

func readRecords(r io.Reader) ([]record, error) {
	var recs []record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("bad record %q: %w", snippet([]byte(line)), err)
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}

func tableRows(recs []record) []row {
	rows := []row{
		{title: "start-up: launch to first `GET /v1` 200 (s, median)", mode: "startup", figure: "median_s", goal: goalAPI},
		{title: "start-up on a new, empty data dir (the database created at start) (s, median)", mode: "startup", label: "new-db", figure: "median_s"},
		{title: "RSS idle (MiB)", mode: "rss", label: "idle", figure: "rss_mib", goal: goalRSS},
		{title: "RSS idle: of which anonymous (MiB)", mode: "rss", label: "idle", figure: "rss_anon_mib"},
		{title: "RSS idle: of which file-backed, executable and libraries (MiB)", mode: "rss", label: "idle", figure: "rss_file_mib"},
		{title: "lifecycle of {n} nodes: create + manage + provide, wall (s)", mode: "lifecycle", figure: "total_s", goal: goalAPI},
		{title: "lifecycle of {n} nodes: of which manage -> manageable, provide -> available (s)", mode: "lifecycle", figure: "transitions_s"},
	}
	var labels []string
	for _, r := range recs {
		if (r.Mode == "create" || r.Mode == "list" || r.Mode == "get") && !slices.Contains(labels, r.Label) {
			labels = append(labels, r.Label)
		}
	}
	for _, l := range labels {
		at := ""
		if l != "" {
			at = ", " + l + " nodes"
		}
		rows = append(rows,
			row{title: "`POST /v1/nodes`" + at + " (filling up): creates/s", mode: "create", label: l, figure: "per_s", higherIsBetter: true, goal: goalAPI},
			row{title: "`GET /v1/nodes?limit=100`" + at + ": req/s", mode: "list", variant: "first", label: l, figure: "rps", higherIsBetter: true, goal: goalAPI},
			row{title: "`GET /v1/nodes?limit=100`" + at + ": p50 ms", mode: "list", variant: "first", label: l, figure: "p50_ms"},
			row{title: "`GET /v1/nodes?limit=100`" + at + ": p90 ms", mode: "list", variant: "first", label: l, figure: "p90_ms"},
			row{title: "`GET /v1/nodes?limit=100`" + at + ": p99 ms", mode: "list", variant: "first", label: l, figure: "p99_ms"},
			row{title: "`…&marker=<middle>`" + at + ": req/s", mode: "list", variant: "deep", label: l, figure: "rps", higherIsBetter: true, goal: goalAPI},
			row{title: "`…&marker=<middle>`" + at + ": p50 ms", mode: "list", variant: "deep", label: l, figure: "p50_ms"},
			row{title: "`…&marker=<middle>`" + at + ": p99 ms", mode: "list", variant: "deep", label: l, figure: "p99_ms"},
			row{title: "`GET /v1/nodes/{uuid}`" + at + ": req/s", mode: "get", label: l, figure: "rps", higherIsBetter: true, goal: goalAPI},
			row{title: "`GET /v1/nodes/{uuid}`" + at + ": p50 ms", mode: "get", label: l, figure: "p50_ms"},
			row{title: "`GET /v1/nodes/{uuid}`" + at + ": p99 ms", mode: "get", label: l, figure: "p99_ms"},
		)
	}
	rows = append(rows,
		row{title: "RSS after load (MiB)", mode: "rss", label: "after-load", figure: "rss_mib"},
		row{title: "server CPU time, start-up + whole workload (s)", mode: "rss", label: "after-load", figure: "cpu_s"},
	)
	return rows
}

func writeTable(w io.Writer, recs []record, order string) error {
	var targets []string
	for _, t := range strings.Split(order, ",") {
		if t = strings.TrimSpace(t); t != "" {
			targets = append(targets, t)
		}
	}
	for _, r := range recs {
		if !slices.Contains(targets, r.Target) {
			targets = append(targets, r.Target)
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("no records")
	}
	// last record wins
	find := func(target string, rw row) (*record, bool) {
		for i := len(recs) - 1; i >= 0; i-- {
			r := &recs[i]
			if r.Target == target && r.Mode == rw.mode && r.Variant == rw.variant && r.Label == rw.label {
				_, ok := r.Figures[rw.figure]
				return r, ok
			}
		}
		return nil, false
	}
	// One ratio column per target after the first (the baseline): with
	// three targets (ironic, castiron-base, castiron) both castiron builds
	// are compared with Ironic in the same table.
	fmt.Fprintf(w, "| measurement | %s |", strings.Join(targets, " | "))
	for _, t := range targets[1:] {
		fmt.Fprintf(w, " %s vs %s (×, >1 = %s better) |", t, targets[0], t)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "|---|%s", strings.Repeat("---:|", 2*len(targets)-1))
	fmt.Fprintln(w)
	for _, rw := range tableRows(recs) {
		cells := make([]string, len(targets))
		vals := make([]float64, len(targets))
		have := make([]bool, len(targets))
		any := false
		for i, t := range targets {
			rec, ok := find(t, rw)
			switch {
			case rec == nil:
				cells[i] = "—"
			case !ok && rec.OK:
				cells[i] = "—" // a figure this record's loadgen did not take yet
			case !ok:
				cells[i] = "failed"
				if rec.Note != "" || len(rec.Errors) > 0 {
					cells[i] = "failed ⚠"
				}
				any = true
			default:
				vals[i], have[i], any = rec.Figures[rw.figure], true, true
				cells[i] = num(vals[i])
				if !rec.OK {
					cells[i] += " ⚠"
				}
			}
		}
		if !any {
			continue
		}
		title := rw.title
		if strings.Contains(title, "{n}") {
			n := "N"
			for _, t := range targets {
				if rec, _ := find(t, rw); rec != nil && rec.Params["n"] != nil {
					n = fmt.Sprint(rec.Params["n"])
					break
				}
			}
			title = strings.ReplaceAll(title, "{n}", n)
		}
		fmt.Fprintf(w, "| %s | %s |", title, strings.Join(cells, " | "))
		for i := 1; i < len(targets); i++ {
			cell := "—"
			if have[0] && have[i] && vals[0] > 0 && vals[i] > 0 {
				f := vals[0] / vals[i]
				if rw.higherIsBetter {
					f = vals[i] / vals[0]
				}
				cell = "×" + num(f)
				if rw.goal > 0 {
					met := "met"
					if f < rw.goal {
						met = "not met"
					}
					cell += fmt.Sprintf(" (goal ×%s: %s)", num(rw.goal), met)
				}
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}

	// what went wrong, per record
	var bad []record
	for _, r := range recs {
		if !r.OK {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "\nNotes and failures (⚠ in the table):\n\n")
		for _, r := range bad {
			name := r.Mode
			if r.Variant != "" {
				name += " " + r.Variant
			}
			if r.Label != "" {
				name += " @" + r.Label
			}
			fmt.Fprintf(w, "- **%s, %s**", r.Target, name)
			if r.Note != "" {
				fmt.Fprintf(w, ": %s", r.Note)
			}
			fmt.Fprintln(w)
			keys := make([]string, 0, len(r.Errors))
			for k := range r.Errors {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "  - %d × `%s`\n", r.Errors[k], k)
			}
			for _, s := range r.ErrorSamples {
				fmt.Fprintf(w, "  - e.g. `%s`\n", strings.ReplaceAll(s, "`", "'"))
			}
		}
	}
	return nil
}

// num formats a figure with about three significant digits.
func num(f float64) string {
	a := f
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", f)
	case a >= 10:
		return fmt.Sprintf("%.1f", f)
	case a >= 1:
		return fmt.Sprintf("%.2f", f)
	default:
		return fmt.Sprintf("%.3f", f)
	}
}
