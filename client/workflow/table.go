package workflow

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"castiron/client"
)

// Result is how one node ended in a bulk command.
type Result struct {
	Label     string
	UUID      string
	Action    string // created, updated, unchanged, introspected, provided, ...
	State     string // provision state at the end
	OK        bool
	LastError string
}

// table writes aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// oneLine keeps table cells on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Summary prints the final table and counts; it returns the number failed.
func Summary(w io.Writer, results []Result) int {
	sort.SliceStable(results, func(i, j int) bool { return !results[i].OK && results[j].OK })
	rows := make([][]string, 0, len(results))
	failed := 0
	for _, r := range results {
		res := "succeeded"
		if !r.OK {
			res = "FAILED"
			failed++
		}
		rows = append(rows, []string{r.Label, r.UUID, res, r.Action, r.State, oneLine(r.LastError)})
	}
	fmt.Fprintln(w)
	table(w, []string{"NODE", "UUID", "RESULT", "ACTION", "STATE", "LAST ERROR"}, rows)
	fmt.Fprintf(w, "\n%d succeeded, %d failed\n", len(results)-failed, failed)
	return failed
}

// nodeTable is `castiron node list`.
func nodeTable(w io.Writer, nodes []client.Node) {
	rows := make([][]string, 0, len(nodes))
	for _, n := range nodes {
		rows = append(rows, []string{n.UUID, dash(n.Name), dash(n.Driver), dash(n.PowerState),
			n.ProvisionState, fmt.Sprint(n.Maintenance), dash(oneLine(n.LastError))})
	}
	table(w, []string{"UUID", "NAME", "DRIVER", "POWER", "PROVISION STATE", "MAINTENANCE", "LAST ERROR"}, rows)
}

// nodeShow is `castiron node show`: one field a line, sorted.
func nodeShow(w io.Writer, n *client.Node) error {
	var m map[string]any
	if err := json.Unmarshal(n.Raw, &m); err != nil {
		return err
	}
	delete(m, "links")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		var s string
		switch x := v.(type) {
		case nil:
			s = "None"
		case string:
			s = x
		default:
			b, _ := json.Marshal(x)
			s = string(b)
		}
		rows = append(rows, []string{k, oneLine(s)})
	}
	table(w, []string{"FIELD", "VALUE"}, rows)
	return nil
}

func conductorTable(w io.Writer, cs []client.Conductor) {
	rows := make([][]string, 0, len(cs))
	for _, c := range cs {
		rows = append(rows, []string{c.Hostname, dash(c.ConductorGroup), fmt.Sprint(c.Alive), strings.Join(c.Drivers, ",")})
	}
	table(w, []string{"HOSTNAME", "GROUP", "ALIVE", "DRIVERS"}, rows)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
