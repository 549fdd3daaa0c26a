package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"castiron/client"
	"castiron/client/cloudconfig"
)

// Commands are the client subcommands Main serves.
var Commands = []string{"import", "introspect", "provide", "manage", "abort", "configure", "node", "conductor"}

// Usage lines for the binary's help.
const Usage = `
client commands (public Ironic API only; work against any Ironic):
  import FILE  register nodes from instackenv.json/.yaml [--introspect] [--provide] [--validate-only]
  introspect   inspect manageable nodes: NODE... | --all-manageable [--provide]
  provide      make manageable nodes available: NODE... | --all-manageable
  manage       move nodes to manageable (verifies BMC credentials): NODE...
  abort        abort a node's inspect/clean/deploy wait: NODE...
  configure    set boot defaults on manageable nodes: --boot-mode, --root-device, --deploy-image
  node         node list [--discovered] | node show NODE  [-o table|json]
  conductor    conductor list [-o table|json]
  Client commands authenticate as the openstack CLI does: --os-cloud/OS_CLOUD
  (clouds.yaml), OS_* variables and --os-* options (Keystone password,
  application credential or token; http_basic; none). Without any, they speak
  to http://127.0.0.1:6385 with no auth. --url/--user/--password
  (CASTIRON_URL/CASTIRON_USER/CASTIRON_PASSWORD) still work; -h lists all.`

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1 // a node failed, a refusal, or an API error
	ExitUsage  = 2
)

// env is what Main needs from the process, so tests can run it in-process.
type env struct {
	stdout, stderr io.Writer
	tty            bool
}

// Main runs one client subcommand and returns the exit code.
func Main(cmd string, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return Run(ctx, cmd, args, os.Stdout, os.Stderr, term.IsTerminal(int(os.Stdout.Fd())))
}

// Run is Main with explicit streams; tty picks live progress bars.
func Run(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, tty bool) int {
	e := &env{stdout: stdout, stderr: stderr, tty: tty}
	err := e.run(ctx, cmd, args)
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitUsage
	case errors.As(err, &ue):
		if !ue.printed {
			fmt.Fprintf(stderr, "castiron %s: %s\n", cmd, ue.msg)
		}
		return ExitUsage
	case errors.Is(err, errNodesFailed):
		return ExitFailed
	}
	fmt.Fprintf(stderr, "castiron %s: %s\n", cmd, err)
	return ExitFailed
}

type usageError struct {
	msg     string
	printed bool // the flag package already showed it with the usage
}

func (u usageError) Error() string { return u.msg }

var errNodesFailed = errors.New("some nodes failed")

// common holds the flags every client command takes.
type common struct {
	fs          *flag.FlagSet
	auth        *cloudconfig.Options
	concurrency int
	timeout     time.Duration
	output      string
	all         bool
}

func (e *env) flags(name string) *common {
	c := &common{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(e.stderr)
	c.auth = cloudconfig.Register(c.fs)
	return c
}

func (c *common) bulkFlags() {
	c.fs.IntVar(&c.concurrency, "concurrency", 20, "nodes worked on at once; the rest queue")
	c.fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "how long one node may take for each state change")
}

// parse accepts flags before and after positional arguments.
func (c *common) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{msg: err.Error(), printed: true}
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if c.concurrency < 0 {
		return nil, usageError{msg: "--concurrency must be positive"}
	}
	if c.output != "" && c.output != "table" && c.output != "json" {
		return nil, usageError{msg: "-o must be table or json"}
	}
	return pos, nil
}

// connect resolves the auth settings (a bad setting is a usage error) and
// connects; a refused credential is an API error.
func (c *common) connect(ctx context.Context) (*client.Client, error) {
	cfg, err := c.auth.Resolve()
	if err != nil {
		return nil, usageError{msg: err.Error()}
	}
	return client.New(ctx, cfg)
}

// manageable connects and selects the named manageable nodes (every
// manageable one with --all-manageable).
func (e *env) manageable(ctx context.Context, c *common, names []string) (*Runner, []*client.Node, error) {
	cl, err := c.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	r := e.runner(c, cl)
	nodes, err := r.Select(ctx, names, c.all, "manageable")
	return r, nodes, err
}

func (e *env) runner(c *common, cl *client.Client) *Runner {
	return &Runner{Client: cl, Concurrency: c.concurrency, Timeout: c.timeout}
}

// finish prints the summary and turns failures into the exit code.
func (e *env) finish(results []Result) error {
	if Summary(e.stdout, results) > 0 {
		return errNodesFailed
	}
	return nil
}

func (e *env) run(ctx context.Context, cmd string, args []string) error {
	switch cmd {
	case "import":
		return e.importCmd(ctx, args)
	case "introspect", "provide", "manage", "abort":
		return e.stateCmd(ctx, cmd, args)
	case "configure":
		return e.configureCmd(ctx, args)
	case "node":
		return e.nodeCmd(ctx, args)
	case "conductor":
		return e.conductorCmd(ctx, args)
	}
	return usageError{msg: "unknown command " + strconv.Quote(cmd)}
}

func (e *env) importCmd(ctx context.Context, args []string) error {
	c := e.flags("import")
	c.bulkFlags()
	introspect := c.fs.Bool("introspect", false, "introspect the nodes once manageable")
	provide := c.fs.Bool("provide", false, "make the nodes available at the end")
	validate := c.fs.Bool("validate-only", false, "check the file (schema, duplicate MACs/names/BMCs) and touch nothing")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{msg: "usage: castiron import FILE [--introspect] [--provide] [--concurrency N] [--validate-only]"}
	}
	specs, err := LoadFile(pos[0])
	if err != nil {
		return err
	}
	if *validate {
		fmt.Fprintf(e.stdout, "%s: %d node(s), no problems found\n", pos[0], len(specs))
		return nil
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return err
	}
	r := e.runner(c, cl)
	results, err := r.withProgress(e, "import", len(specs), func() ([]Result, error) {
		return r.Import(ctx, specs, ImportOptions{Introspect: *introspect, Provide: *provide})
	})
	if err != nil {
		return err
	}
	created, known := 0, 0
	for _, res := range results {
		switch {
		case strings.HasPrefix(res.Action, "created"):
			created++
		case strings.HasPrefix(res.Action, "updated"), strings.HasPrefix(res.Action, "unchanged"):
			known++
		}
	}
	err = e.finish(results)
	fmt.Fprintf(e.stdout, "%d node(s) created, %d already registered\n", created, known)
	return err
}

func (e *env) stateCmd(ctx context.Context, cmd string, args []string) error {
	c := e.flags(cmd)
	c.bulkFlags()
	var provide bool
	if cmd == "introspect" || cmd == "provide" {
		c.fs.BoolVar(&c.all, "all-manageable", false, "every node in manageable")
	}
	if cmd == "introspect" {
		c.fs.BoolVar(&provide, "provide", false, "make the nodes available after introspection")
	}
	names, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(names) == 0 && !c.all {
		return usageError{msg: "name the nodes" + map[bool]string{true: " or give --all-manageable"}[cmd == "introspect" || cmd == "provide"]}
	}
	r, nodes, err := e.manageable(ctx, c, names)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		fmt.Fprintln(e.stdout, "no manageable nodes")
		return nil
	}
	var results []Result
	switch cmd {
	case "introspect":
		results, err = r.withProgress(e, cmd, len(nodes), func() ([]Result, error) { return r.Introspect(ctx, nodes, provide) })
	case "provide":
		results, err = r.withProgress(e, cmd, len(nodes), func() ([]Result, error) { return r.Provide(ctx, nodes) })
	case "manage":
		results, err = r.withProgress(e, cmd, len(nodes), func() ([]Result, error) { return r.Manage(ctx, nodes), nil })
	case "abort":
		results, err = r.withProgress(e, cmd, len(nodes), func() ([]Result, error) { return r.Abort(ctx, nodes), nil })
	}
	if err != nil {
		return err
	}
	return e.finish(results)
}

// withProgress gives the runner a display sized for n nodes; a refusal
// happens before any node is shown.
func (r *Runner) withProgress(e *env, title string, n int, f func() ([]Result, error)) ([]Result, error) {
	var p Progress
	r.Progress = lazyProgress{get: func() Progress {
		if p == nil {
			p = NewProgress(e.stdout, e.tty, title, n)
		}
		return p
	}}
	return f()
}

// lazyProgress creates the display on first use, so refusals print cleanly.
type lazyProgress struct{ get func() Progress }

func (l lazyProgress) Task(label string) Task { return l.get().Task(label) }
func (l lazyProgress) Close()                 { l.get().Close() }

func (e *env) configureCmd(ctx context.Context, args []string) error {
	c := e.flags("configure")
	c.bulkFlags()
	c.fs.BoolVar(&c.all, "all-manageable", false, "every node in manageable")
	bootMode := c.fs.String("boot-mode", "", "uefi or bios")
	rootDevice := c.fs.String("root-device", "", `root device hints as JSON, e.g. '{"size": 100}'`)
	image := c.fs.String("deploy-image", "", "deploy ramdisk prefix: sets deploy_kernel=PREFIX.kernel, deploy_ramdisk=PREFIX.initramfs")
	kernel := c.fs.String("deploy-kernel", "", "driver_info/deploy_kernel")
	ramdisk := c.fs.String("deploy-ramdisk", "", "driver_info/deploy_ramdisk")
	names, err := c.parse(args)
	if err != nil {
		return err
	}
	o, err := ParseConfigure(*bootMode, *rootDevice, *image, *kernel, *ramdisk)
	if err != nil {
		return usageError{msg: err.Error()}
	}
	if len(names) == 0 && !c.all {
		return usageError{msg: "name the nodes or give --all-manageable"}
	}
	r, nodes, err := e.manageable(ctx, c, names)
	if err != nil {
		return err
	}
	results, err := r.withProgress(e, "configure", len(nodes), func() ([]Result, error) { return r.Configure(ctx, nodes, o) })
	if err != nil {
		return err
	}
	return e.finish(results)
}

func (e *env) nodeCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "show") {
		return usageError{msg: "usage: castiron node list [--discovered] | castiron node show NODE [-o table|json]"}
	}
	sub := args[0]
	c := e.flags("node " + sub)
	c.fs.StringVar(&c.output, "o", "table", "output format: table or json")
	var discovered bool
	if sub == "list" {
		c.fs.BoolVar(&discovered, "discovered", false, "only the nodes discovery enrolled (--pxe-discovery)")
	}
	pos, err := c.parse(args[1:])
	if err != nil {
		return err
	}
	if (sub == "show") != (len(pos) == 1) || len(pos) > 1 {
		return usageError{msg: "usage: castiron node list [--discovered] | castiron node show NODE [-o table|json]"}
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return err
	}
	if sub == "show" {
		n, err := cl.GetNode(ctx, pos[0])
		if err != nil {
			return errors.New(faultOf(err))
		}
		if c.output == "json" {
			return writeJSON(e.stdout, n.Raw)
		}
		return nodeShow(e.stdout, n)
	}
	nodes, err := cl.ListNodes(ctx, nil)
	if err != nil {
		return errors.New(faultOf(err))
	}
	if discovered {
		// The API has no filter on driver_internal_info: filter here.
		nodes = slices.DeleteFunc(nodes, func(n client.Node) bool { return !n.Discovered() })
	}
	if c.output == "json" {
		return writeRaws(e.stdout, nodes, func(n client.Node) json.RawMessage { return n.Raw })
	}
	nodeTable(e.stdout, nodes)
	return nil
}

func (e *env) conductorCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "list" {
		return usageError{msg: "usage: castiron conductor list [-o table|json]"}
	}
	c := e.flags("conductor list")
	c.fs.StringVar(&c.output, "o", "table", "output format: table or json")
	if pos, err := c.parse(args[1:]); err != nil {
		return err
	} else if len(pos) > 0 {
		return usageError{msg: "usage: castiron conductor list [-o table|json]"}
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return err
	}
	cs, err := cl.ListConductors(ctx)
	if err != nil {
		return errors.New(faultOf(err))
	}
	if c.output == "json" {
		return writeRaws(e.stdout, cs, func(c client.Conductor) json.RawMessage { return c.Raw })
	}
	conductorTable(e.stdout, cs)
	return nil
}

// writeRaws writes each item's JSON as the server sent it, in one array
// (-o json).
func writeRaws[T any](w io.Writer, items []T, raw func(T) json.RawMessage) error {
	raws := make([]json.RawMessage, 0, len(items))
	for _, x := range items {
		raws = append(raws, raw(x))
	}
	return writeJSON(w, raws)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
