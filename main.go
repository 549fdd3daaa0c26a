// Command castiron is a bare-metal provisioning appliance in one binary: the
// OpenStack Ironic /v1 API, its conductor, and embedded storage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"castiron/appliance"
	"castiron/client/workflow"
	"castiron/engine"
	"castiron/httpapi"
)

// version is set at build time with -ldflags "-X main.version=..." and
// only read: main passes appliance.Version's reading of it (the stamp, else
// what the Go toolchain recorded) down to what reports it.
var version = "dev"

func main() {
	ver := appliance.Version(version)
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = appliance.Serve(args, ver)
	case "demo":
		err = appliance.Demo(args, ver)
	case "version":
		fmt.Println("castiron", ver, "(Ironic API 1.1 -", fmt.Sprintf("1.%d)", httpapi.MaxMinor))
	case "states":
		err = states(args)
	case "config":
		err = appliance.PrintConfig(args)
	case "backup":
		err = appliance.Backup(args)
	case "restore":
		err = appliance.Restore(args)
	case "tls":
		err = appliance.TLS(args)
	case "policy":
		err = appliance.Policy(args)
	case "import", "introspect", "provide", "manage", "abort", "configure", "node", "conductor":
		os.Exit(workflow.Main(cmd, args))
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "castiron: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // -h printed the flags; asking for help is not a failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "castiron:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: castiron [command] [flags]

commands:
  serve        run the appliance (default); "castiron serve -h" lists flags
  demo         castiron with a simulated rack on loopback (web UI, CLI); "castiron demo -h"
  states --dot print the provision state machine as a Graphviz diagram
  config       print the configuration file for the given serve flags
               (every key, with its default): castiron config > castiron.yaml
  backup FILE  consistent copy of the database, also while serving
  restore FILE make FILE the database (castiron must be stopped)
  tls rotate   replace castiron's own CA (--tls-auto) in --data-dir
  policy list  print the effective access policy (Ironic's rules, with
               --policy-file's overrides)
  version      print the version
`+workflow.Usage+`

Every serve flag also reads an environment variable (--data-dir:
CASTIRON_DATA_DIR) and a key of the --config file (data-dir: ...);
a flag wins over the environment, which wins over the file.
`)
}

func states(args []string) error {
	fs := flag.NewFlagSet("states", flag.ContinueOnError)
	dot := fs.Bool("dot", false, "print the Graphviz diagram")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dot {
		fmt.Print(engine.Dot())
		return nil
	}
	for _, t := range engine.Transitions() {
		fmt.Printf("%-16s --%-9s--> %s\n", t.From, t.Event, t.To)
	}
	return nil
}
