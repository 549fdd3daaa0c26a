// Command loadgen drives an Ironic-compatible /v1 API (castiron or the real
// OpenStack Ironic) on the loopback interface and reports throughput and
// latency. Every mode stops by itself after a count or a duration.
//
// Usage:
//
//	loadgen [common flags] MODE [mode flags]
//
// Modes:
//
//	create    -n N -workers W            POST /v1/nodes, creates/s
//	list      -duration D -workers W     GET /v1/nodes?limit=L (first page and a deep page)
//	get       -duration D -workers W     GET /v1/nodes/{uuid} over random existing nodes
//	lifecycle -n N -workers W            create, manage -> manageable, provide -> available
//	startup   -cmd CMD                   start CMD, time until GET /v1 answers 200, stop it
//	rss       -pids "P ..." | -kb K      resident memory of a process tree
//	ready     -wait D                    wait until GET /v1 answers 200 (no record)
//	table     -in FILE.jsonl             markdown comparison table from the records
//
// Each measurement prints one JSON line on stdout (target, mode, params,
// figures) and one human-readable line on stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// common holds the flags every mode accepts, before or after the mode name.
type common struct {
	url        string
	target     string
	label      string
	apiVersion string
	timeout    time.Duration
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", c.url, "base URL of the API (loopback only), e.g. http://127.0.0.1:6385")
	fs.StringVar(&c.target, "target", c.target, "target name written into the records (castiron, ironic, ...)")
	fs.StringVar(&c.label, "label", c.label, "free label written into the records (e.g. 1k, 10k, idle)")
	fs.StringVar(&c.apiVersion, "api-version", c.apiVersion, "X-OpenStack-Ironic-API-Version sent with every request")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "per-request timeout")
}

type mode struct {
	name  string
	usage string
	run   func(ctx context.Context, c *common, args []string) error
}

var modes = []mode{
	{"create", "POST /v1/nodes N times", runCreate},
	{"list", "GET /v1/nodes?limit=L for a duration (first page and a deep page)", runList},
	{"get", "GET /v1/nodes/{uuid} for a duration", runGet},
	{"lifecycle", "create N nodes and take each enroll -> manageable -> available", runLifecycle},
	{"startup", "start a server command, time until GET /v1 answers 200, stop it", runStartup},
	{"rss", "record the resident memory of a process tree", runRSS},
	{"ready", "wait until GET /v1 answers 200", runReady},
	{"table", "markdown comparison table from JSON records", runTable},
}

func usage(fs *flag.FlagSet) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: loadgen [common flags] MODE [flags]\n\nmodes:\n")
		for _, m := range modes {
			fmt.Fprintf(w, "  %-10s %s\n", m.name, m.usage)
		}
		fmt.Fprintf(w, "\ncommon flags (also accepted after MODE):\n")
		fs.PrintDefaults()
	}
}

func main() {
	c := &common{
		url:        "http://127.0.0.1:6385",
		target:     "unnamed",
		apiVersion: "1.78",
		timeout:    60 * time.Second,
	}
	top := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	c.register(top)
	top.Usage = usage(top)
	if err := top.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if top.NArg() == 0 {
		top.Usage()
		os.Exit(2)
	}
	name, args := top.Arg(0), top.Args()[1:]
	var m *mode
	for i := range modes {
		if modes[i].name == name {
			m = &modes[i]
		}
	}
	if m == nil {
		fmt.Fprintf(os.Stderr, "loadgen: unknown mode %q\n", name)
		top.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.run(ctx, c, args); err != nil {
		stop()
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", name, err)
		os.Exit(1)
	}
}

// newFlags makes a mode's flag set that also knows the common flags.
func newFlags(name string, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet("loadgen "+name, flag.ContinueOnError)
	c.register(fs)
	return fs
}

// parse parses args and rejects leftovers, so a typo does not silently run
// a default benchmark.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}
