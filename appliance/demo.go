package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"castiron/engine/driver/bmcsim/rack"
)

// demoImage is the OS image the demo deploys, written into the images
// directory castiron serves (/images/), and its size.
const (
	demoImage     = "demo-os.img"
	demoImageSize = 16 << 20
)

// demoConfig is `castiron demo`'s settings.
type demoConfig struct {
	n, deploy   int
	listen      string
	dataDir     string
	enrollOnly  bool
	bootDelay   time.Duration
	latency     time.Duration
	failureRate float64
	logLevel    string
	version     string
	out         io.Writer
	// ready, when set, gets the API URL and the nodes once enrolled
	// (tests).
	ready func(url string, nodes map[string]*rack.Machine)
}

// Demo is `castiron demo [flags]`: castiron on loopback with a simulated
// rack (engine/driver/bmcsim/rack): IPMI and Redfish BMCs, machines that
// network-boot castiron's iPXE script and run a simulated agent. The nodes
// are enrolled and taken through inspection and cleaning to available (a
// few on to active) while the user watches in the web UI or the CLI. It
// needs no root: no DHCP or TFTP, the machines ask for their iPXE script
// over HTTP (--netboot-http).
func Demo(args []string, version string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dc := demoConfig{version: version, out: os.Stdout}
	fs.IntVar(&dc.n, "n", 8, "simulated machines (every other one with a Redfish BMC, the others IPMI)")
	fs.IntVar(&dc.deploy, "deploy", 2, "how many of them are deployed (active) once available; the others stay available")
	fs.StringVar(&dc.listen, "listen", "127.0.0.1:6385", "address:port of the API and web UI (loopback only)")
	fs.StringVar(&dc.dataDir, "data-dir", "", "directory for the database and logs (default: a temporary directory, removed at exit)")
	fs.BoolVar(&dc.enrollOnly, "enroll-only", false, "enroll the nodes and leave them in enroll (take them further yourself)")
	fs.DurationVar(&dc.bootDelay, "boot-delay", 2*time.Second, "simulated firmware and ramdisk boot time of each power-on")
	fs.DurationVar(&dc.latency, "bmc-latency", 20*time.Millisecond, "simulated BMC answer delay (each answer takes between it and twice it)")
	fs.Float64Var(&dc.failureRate, "bmc-failure-rate", 0, "probability that a BMC request fails (an IPMI packet lost, a Redfish 503)")
	fs.StringVar(&dc.logLevel, "log-level", "info", "castiron's log level (the log goes to DATA-DIR/castiron.log)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo: unexpected argument %q", fs.Arg(0))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runDemo(ctx, dc)
}

// loopbackOnly refuses a listen address that is not a loopback address.
func loopbackOnly(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: castiron demo listens on a loopback address only (127.0.0.1, ::1)", listen)
	}
	return nil
}

// runDemo runs the demo until ctx ends.
func runDemo(ctx context.Context, dc demoConfig) error {
	if err := loopbackOnly(dc.listen); err != nil {
		return err
	}
	dir := dc.dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "castiron-demo-")
		if err != nil {
			return err
		}
		dir = d
		defer os.RemoveAll(d)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	defer lock.release()
	ln, err := net.Listen("tcp", dc.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String()
	serveArgs := []string{"--listen", ln.Addr().String(), "--data-dir", dir, "--netboot-http", "--public-url", url,
		"--conductor-name", "demo", "--log-level", dc.logLevel, "--power-sync-interval", "20s", "--callback-timeout", "10m",
		// Serial consoles of the IPMI machines (SOL to the simulated BMC).
		"--console-port-range", "46000:46999"}
	c, err := parseServeFlags(serveArgs, func(string) (string, bool) { return "", false })
	if err != nil {
		return err
	}
	c.version = dc.version
	logf, err := os.OpenFile(filepath.Join(dir, "castiron.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer logf.Close()
	log, err := newLogger(logf, "text", dc.logLevel)
	if err != nil {
		return err
	}
	sum, err := writeDemoImage(c.pxe.imagesDir)
	if err != nil {
		return err
	}
	if err := writeDemoRamdisk(c.pxe.ramdiskDir); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := newApp(ctx, c, log)
	if err != nil {
		return err
	}
	defer a.close()
	a.ln = ln
	appErr := make(chan error, 1)
	go func() { appErr <- a.run(ctx) }()

	r, err := rack.Start(ctx, rack.Config{N: dc.n, BootURL: url, BootDelay: dc.bootDelay, RamdiskDelay: dc.bootDelay / 2,
		FetchRamdisk: true, LatencyMin: dc.latency, LatencyMax: 2 * dc.latency, FailureRate: dc.failureRate, Log: log.With("component", "rack")})
	if err != nil {
		cancel()
		return errors.Join(err, <-appErr)
	}
	defer r.Close()
	out := dc.out
	fmt.Fprintf(out, "castiron demo: %d simulated machines behind IPMI and Redfish BMCs on loopback, castiron at %s\n\n", dc.n, url)
	fmt.Fprintf(out, "  web UI   %s/\n", url)
	cli := "castiron node list"
	if url != "http://127.0.0.1:6385" { // the client commands' default
		cli += " --url " + url
	}
	fmt.Fprintf(out, "  CLI      %s   (or: export OS_ENDPOINT=%s OS_AUTH_TYPE=none; openstack baremetal node list)\n", cli, url)
	fmt.Fprintf(out, "  deploy   openstack baremetal node set NODE --instance-info image_source=%s --instance-info image_checksum=%s\n", demoImage, sum)
	fmt.Fprintf(out, "           openstack baremetal node deploy NODE\n")
	fmt.Fprintf(out, "  log      %s\n\n", filepath.Join(dir, "castiron.log"))
	fmt.Fprintf(out, "Ctrl-C stops the demo%s.\n\n", map[bool]string{true: " and removes its data", false: ""}[dc.dataDir == ""])

	cl := &rack.Client{URL: url, Timeout: 10 * time.Minute}
	nodes := map[string]*rack.Machine{}
	for _, m := range r.Machines {
		var extra map[string]any
		if m.Protocol == "ipmi" { // their BMCs carry the boot log over SOL
			extra = map[string]any{"console_interface": "ipmitool-socat"}
		}
		id, err := cl.Enroll(ctx, m, extra)
		if err != nil {
			if ctx.Err() != nil { // Ctrl-C while enrolling
				return <-appErr
			}
			cancel()
			return errors.Join(fmt.Errorf("enroll %s: %w", m.Name, err), <-appErr)
		}
		nodes[id] = m
	}
	fmt.Fprintf(out, "%s  %d nodes enrolled\n", stamp(), len(nodes))
	if dc.ready != nil {
		dc.ready(url, nodes)
	}
	var wg sync.WaitGroup
	if !dc.enrollOnly {
		var mu sync.Mutex
		deployed := 0
		for id, m := range nodes {
			wg.Go(func() { demoNode(ctx, cl, out, id, m, sum, &mu, &deployed, dc.deploy) })
		}
	}
	select {
	case err = <-appErr:
		cancel()
	case <-ctx.Done():
		err = <-appErr
	}
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// demoNode takes one node to available, and to active while fewer than
// deploy nodes were.
func demoNode(ctx context.Context, cl *rack.Client, out io.Writer, id string, m *rack.Machine, sum string, mu *sync.Mutex, deployed *int, deploy int) {
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s  %-9s %-7s "+format+"\n", append([]any{stamp(), m.Name, m.Protocol}, a...)...)
	}
	for _, v := range []string{"manage", "inspect", "provide"} {
		if err := cl.Provision(ctx, id, v, nil); err != nil {
			if ctx.Err() == nil {
				say("%s failed: %v", v, err)
			}
			return
		}
		switch v {
		case "inspect":
			h := m.Hardware
			say("inspected: %s %s, %d CPUs, %d GiB RAM, disks: %d", h.Manufacturer, h.Product, h.CPUs, h.MemoryMiB>>10, len(h.Disks))
		case "provide":
			say("cleaned, available")
		}
	}
	mu.Lock()
	mine := *deployed < deploy
	if mine {
		*deployed++
	}
	mu.Unlock()
	if !mine {
		return
	}
	if err := cl.Deploy(ctx, id, demoImage, sum); err != nil {
		if ctx.Err() == nil {
			say("deploy failed: %v", err)
		}
		return
	}
	say("deployed, active")
}

// writeDemoRamdisk puts stand-ins for the ramdisk's kernel and initramfs
// where castiron serves them from, unless real ones are there: the
// simulated machines download them as iPXE would, so each boot's timeline
// shows the transfers.
func writeDemoRamdisk(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for name, size := range map[string]int{"vmlinuz": 8 << 20, "initramfs": 24 << 20} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		line := "castiron demo: stand-in for the ramdisk's " + name + " (make ramdisk builds the real one)\n"
		b := []byte(strings.Repeat(line, size/len(line)+1))[:size]
		if err := os.WriteFile(p, b, 0o640); err != nil {
			return err
		}
	}
	return nil
}

func stamp() string { return time.Now().Format("15:04:05") }

// writeDemoImage puts the demo's OS image (a raw image of a repeated
// pattern, so the agent's download and checksum are real) into dir and
// returns its sha256.
func writeDemoImage(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	block := []byte(strings.Repeat("castiron demo OS image\n", 2048))
	h := sha256.New()
	f, err := os.Create(filepath.Join(dir, demoImage))
	if err != nil {
		return "", err
	}
	w := io.MultiWriter(f, h)
	for n := 0; n < demoImageSize; {
		k := min(len(block), demoImageSize-n)
		if _, err := w.Write(block[:k]); err != nil {
			f.Close()
			return "", err
		}
		n += k
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
