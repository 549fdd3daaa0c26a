// Package rack is a simulated rack of servers for castiron's demo (castiron
// demo), the fleet benchmark's storm (bench/fleet) and tests: N machines on
// loopback, each behind a BMC from castiron's own simulators (ipmisim: IPMI
// 2.0 lanplus on UDP; redfishsim: Redfish over HTTP), each BMC on its own
// port. A machine powered on with a network boot device asks castiron for
// its iPXE script (GET /boot/ipxe?mac=, as iPXE does; castiron serves it
// with --pxe-interface or --netboot-http) after a short firmware delay,
// and then runs the simulated agent (ramdisk/agentsim) with the kernel
// arguments of that script; powered off, the agent stops. Booted from disk
// it "runs the OS" (prints a login prompt and idles).
//
// Every machine has a serial Console (what its firmware, iPXE, the agent
// and the OS print, with scrollback) that a BMC's Serial over LAN can
// attach to.
//
// Nothing in `castiron serve` uses it; `castiron demo` does.
package rack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/ramdisk/agentsim"
)

// Config describes a rack.
type Config struct {
	// N is the number of machines [8].
	N int
	// Protocols are the BMC kinds, given to machines in turn: "ipmi",
	// "redfish" [ipmi, redfish: every other machine].
	Protocols []string
	// BootURL is castiron's base URL for /boot/ipxe (what DHCP would
	// point iPXE at). Required.
	BootURL string
	// BootDelay is power-on to the boot device (firmware POST) [1s];
	// RamdiskDelay the ramdisk's load and kernel boot [1s].
	BootDelay, RamdiskDelay time.Duration
	// FetchRamdisk downloads the kernel and initramfs the script names
	// (the boot phase of a storm); off, only the script is asked for.
	FetchRamdisk bool
	// Netboot, when set, is the firmware's network boot before iPXE's
	// script (DHCP and TFTP from a namespace: bench/fleet/pxeboot): it
	// returns the script's URL and the HTTP client iPXE fetches it, the
	// kernel and the initramfs with. Unset, the script is asked of BootURL.
	Netboot func(ctx context.Context, m *Machine) (scriptURL string, hc *http.Client, err error)
	// LatencyMin/LatencyMax delay every BMC answer by a uniform random
	// time in between (real BMCs: 20-50 ms) [0].
	LatencyMin, LatencyMax time.Duration
	// FailureRate is the probability that a BMC request fails: an IPMI
	// packet lost (the client retries), a Redfish answer 503 [0].
	FailureRate float64
	// IPMIDistinct gives every IPMI BMC its own 127.x.y.z address from
	// IPMIBase, all on IPMIPort (ipmisim.Config.Distinct); otherwise each
	// has its own port on 127.0.0.1.
	IPMIDistinct bool
	IPMIBase     net.IP
	IPMIPort     int
	// MACPrefix is the first three bytes of the machines' MACs
	// ["52:54:00"]; the other three count machines and NICs.
	MACPrefix string
	// NICs per machine [2].
	NICs int
	// EraseRate is the simulated full erase speed (agentsim) [100 GiB/s].
	EraseRate int64
	// AgentMinHeartbeat is the agents' floor of castiron's heartbeat
	// interval [runloop's].
	AgentMinHeartbeat time.Duration
	Log               *slog.Logger
}

// maxAgentConns bounds the machines' connections to castiron.
const maxAgentConns = 1024

// Rack is a running set of machines; Close stops everything.
type Rack struct {
	Machines []*Machine

	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ipmi   *ipmisim.Fleet
	rf     []*http.Server
	http   *http.Client
	media  string
}

// Start builds the rack and starts its BMCs (every machine off).
func Start(ctx context.Context, cfg Config) (*Rack, error) {
	if cfg.N <= 0 {
		cfg.N = 8
	}
	if len(cfg.Protocols) == 0 {
		cfg.Protocols = []string{"ipmi", "redfish"}
	}
	if cfg.BootURL == "" && cfg.Netboot == nil {
		return nil, errors.New("rack: BootURL or Netboot is required")
	}
	if cfg.BootDelay == 0 {
		cfg.BootDelay = time.Second
	}
	if cfg.RamdiskDelay == 0 {
		cfg.RamdiskDelay = time.Second
	}
	if cfg.MACPrefix == "" {
		cfg.MACPrefix = "52:54:00"
	}
	if cfg.NICs <= 0 {
		cfg.NICs = 2
	}
	if cfg.LatencyMax < cfg.LatencyMin {
		cfg.LatencyMax = cfg.LatencyMin
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var nIPMI int
	for i := range cfg.N {
		switch p := cfg.Protocols[i%len(cfg.Protocols)]; p {
		case "ipmi":
			nIPMI++
		case "redfish":
		default:
			return nil, fmt.Errorf("rack: protocol %q: want ipmi or redfish", p)
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Rack{cfg: cfg, ctx: runCtx, cancel: cancel, http: &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 4 * cfg.N, MaxIdleConnsPerHost: 4 * cfg.N, IdleConnTimeout: 90 * time.Second,
		// The machines share this process's file descriptors with their
		// BMCs' sockets: at 10,000 machines one connection per agent ran
		// out of them (RLIMIT_NOFILE 20,000), so requests queue for one of
		// maxAgentConns connections instead.
		MaxConnsPerHost:    maxAgentConns,
		DisableCompression: true,
	}}}
	if nIPMI > 0 {
		f, err := ipmisim.Start(runCtx, ipmisim.Config{N: nIPMI, Distinct: cfg.IPMIDistinct, Base: cfg.IPMIBase, Port: cfg.IPMIPort,
			LatencyMin: cfg.LatencyMin, LatencyMax: cfg.LatencyMax, DropRate: cfg.FailureRate, Serial: true})
		if err != nil {
			cancel()
			return nil, err
		}
		r.ipmi = f
	}
	var err error
	if r.media, err = os.MkdirTemp("", "castiron-rack-media-"); err != nil {
		r.Close()
		return nil, err
	}
	ipmiNext := 0
	for i := range cfg.N {
		if err := r.add(i, &ipmiNext); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

func (r *Rack) add(i int, ipmiNext *int) error {
	cfg := r.cfg
	m := &Machine{Index: i, Name: fmt.Sprintf("rack-%03d", i+1), Protocol: cfg.Protocols[i%len(cfg.Protocols)],
		Console: &Console{}, rack: r, state: StateOff, log: cfg.Log}
	for j := range cfg.NICs {
		m.MACs = append(m.MACs, fmt.Sprintf("%s:%02x:%02x:%02x", cfg.MACPrefix, (i>>12)&0xff, (i>>4)&0xff, (i&0xf)<<4|j&0xf))
	}
	m.Hardware = agentsim.NewHardware(i, m.MACs)
	m.Disks = agentsim.NewDisks(m.Hardware)
	if m.Protocol == "ipmi" {
		m.ipmi = r.ipmi.BMCs[*ipmiNext]
		*ipmiNext++
		m.Hardware.BMCAddress = m.ipmi.Host()
		m.Console.wire = m.ipmi.Serial() // the boot log over Serial-over-LAN
		m.ipmi.OnPower(func(ev ipmisim.PowerEvent) {
			switch ev {
			case ipmisim.PowerOn, ipmisim.PowerRestart:
				m.powerOn(m.bootDevice(nil))
			case ipmisim.PowerOff:
				m.powerOff()
			}
		})
		r.Machines = append(r.Machines, m)
		return nil
	}
	bootMode := "UEFI"
	if m.Hardware.BootMode == "bios" {
		bootMode = "Legacy"
	}
	srv, err := redfishsim.New(redfishsim.Config{MACs: m.MACs, UUID: m.Hardware.SystemUUID, BootMode: bootMode,
		MemoryGiB: float64(m.Hardware.MemoryMiB >> 10), CPUs: m.Hardware.Sockets, Threads: m.Hardware.CPUs / max(1, m.Hardware.Sockets),
		Machine: redfishMachine{m: m}, MediaDir: r.media, Logger: cfg.Log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	m.redfish, m.rfURL = srv, "http://"+ln.Addr().String()
	m.Hardware.BMCAddress = "127.0.0.1"
	srv.SetBaseURL(m.rfURL)
	hs := &http.Server{Handler: r.lossy(srv), ReadHeaderTimeout: 30 * time.Second}
	r.rf = append(r.rf, hs)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = hs.Serve(ln)
	}()
	r.Machines = append(r.Machines, m)
	return nil
}

// lossy gives a Redfish BMC the rack's latency and failure rate.
func (r *Rack) lossy(h http.Handler) http.Handler {
	cfg := r.cfg
	if cfg.LatencyMax == 0 && cfg.FailureRate == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d := cfg.LatencyMin
		if span := cfg.LatencyMax - cfg.LatencyMin; span > 0 {
			d += rand.N(span + 1)
		}
		if !sleep(req.Context(), d) {
			return
		}
		if cfg.FailureRate > 0 && rand.Float64() < cfg.FailureRate {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"Base.1.8.ServiceTemporarilyUnavailable","message":"The service is temporarily unavailable (simulated failure)."}}`)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// Machine returns the machine with a MAC, or nil.
func (r *Rack) Machine(mac string) *Machine {
	for _, m := range r.Machines {
		for _, x := range m.MACs {
			if x == mac {
				return m
			}
		}
	}
	return nil
}

// Close powers every machine off and stops the BMCs.
func (r *Rack) Close() {
	r.cancel()
	for _, hs := range r.rf {
		_ = hs.Close()
	}
	if r.ipmi != nil {
		r.ipmi.Close()
	}
	r.wg.Wait()
	for _, m := range r.Machines {
		m.powerOff()
	}
	r.http.CloseIdleConnections()
	if r.media != "" {
		_ = os.RemoveAll(r.media)
	}
}
