// Package pxeboot is the fleet bench's network-boot client (issue 28): the
// PXE firmware and iPXE of many simulated machines against castiron's
// provisioning network, from a network namespace the bench created. One
// boot is what a BIOS or UEFI machine does: DHCP DORA as the PXE ROM
// (vendor class PXEClient, its architecture), a TFTP fetch of the boot file
// the ACK names (undionly.kpxe, ipxe.efi), DHCP DORA again as iPXE (user
// class "iPXE"), whose ACK names the iPXE script's URL; the script, kernel
// and initramfs are then fetched over HTTP with Client.HTTP, whose
// connections leave from the same namespace.
//
// Every machine speaks DHCP with its own chaddr through one raw socket on
// the namespace's interface (nclient4's broadcast conn, filtered in the
// kernel to UDP port 68); replies are handed to the machine whose chaddr
// they carry (castiron broadcasts replies to clients without an address).
// TFTP and HTTP leave from the interface's one static address: the
// machines do not configure the addresses they lease.
package pxeboot

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/mdlayher/packet"
	"github.com/pin/tftp/v3"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Config says where the clients are.
type Config struct {
	// Netns is the network namespace (a name under /run/netns) the
	// clients' sockets are opened in; "" for this process's own.
	Netns string
	// Interface is the clients' interface in Netns, on castiron's
	// provisioning network.
	Interface string
	// DHCPTimeout is the wait for one DHCP answer at the first try [4s,
	// a PXE ROM's first], doubled at each next one; DHCPRetries the tries
	// of an exchange [4: 4+8+16+32 s, a PXE ROM's minute].
	DHCPTimeout time.Duration
	DHCPRetries int
	// TFTPTimeout is pin/tftp's per-packet timeout [2s].
	TFTPTimeout time.Duration
	// MaxConns bounds HTTP connections to castiron [256].
	MaxConns int
}

// Client boots machines; Close releases its sockets and threads.
type Client struct {
	cfg   Config
	HTTP  *http.Client
	Stats *Stats

	ns    chan func()   // work run on a thread inside cfg.Netns
	stop  chan struct{} // ends the namespace threads
	wg    sync.WaitGroup
	raw   net.PacketConn
	demux *demux
}

// nsThreads is how many threads open sockets inside the namespace at once
// (a dial blocks its thread until connected).
const nsThreads = 8

// New opens the raw DHCP socket in cfg.Netns and starts the namespace's
// threads.
func New(cfg Config) (*Client, error) {
	if cfg.DHCPTimeout <= 0 {
		cfg.DHCPTimeout = 4 * time.Second
	}
	if cfg.DHCPRetries <= 0 {
		cfg.DHCPRetries = 4
	}
	if cfg.TFTPTimeout <= 0 {
		cfg.TFTPTimeout = 2 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 256
	}
	c := &Client{cfg: cfg, Stats: newStats(), ns: make(chan func()), stop: make(chan struct{})}
	ready := make(chan error, nsThreads)
	for range nsThreads {
		c.wg.Add(1)
		go c.nsThread(ready)
	}
	for range nsThreads {
		if err := <-ready; err != nil {
			c.Close()
			return nil, err
		}
	}
	err := c.inNS(func() error {
		ifc, err := net.InterfaceByName(cfg.Interface)
		if err != nil {
			return err
		}
		// Without the filter the socket would copy every IPv4 packet of
		// the interface, the HTTP downloads too, to this process.
		prog, err := bpf.Assemble(dhcpReplyFilter)
		if err != nil {
			return err
		}
		pc, err := packet.Listen(ifc, packet.Datagram, unix.ETH_P_IP, &packet.Config{Filter: prog})
		if err != nil {
			return err
		}
		// One socket takes every machine's replies: with the default
		// receive queue (~200 KiB) a power-on storm's burst of OFFERs
		// overflowed it and most DORAs waited for a retry.
		if rc, err := pc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20) != nil {
					unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
				}
			})
		}
		c.raw = nclient4.NewBroadcastUDPConn(pc, &net.UDPAddr{Port: nclient4.ClientPort})
		return nil
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("pxeboot: DHCP socket on %s in %q: %w", cfg.Interface, cfg.Netns, err)
	}
	c.demux = newDemux(c.raw, c.stop)
	c.wg.Go(c.demux.loop)
	c.HTTP = &http.Client{Transport: &counting{stats: c.Stats, rt: &http.Transport{
		Proxy: nil, DialContext: c.dial, MaxConnsPerHost: cfg.MaxConns, MaxIdleConnsPerHost: cfg.MaxConns,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}}
	return c, nil
}

// dhcpReplyFilter passes IPv4 UDP datagrams to port 68 that are not
// fragments (the socket is SOCK_DGRAM: data starts at the IP header).
var dhcpReplyFilter = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 9, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_UDP, SkipTrue: 5},
	bpf.LoadAbsolute{Off: 6, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 3},
	bpf.LoadMemShift{Off: 0},
	bpf.LoadIndirect{Off: 2, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: nclient4.ClientPort, SkipFalse: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
}

// nsThread runs work inside the namespace on a thread of its own. It
// never unlocks the thread: when it returns, Go ends the thread, so no
// goroutine ever runs in the wrong namespace.
func (c *Client) nsThread(ready chan<- error) {
	defer c.wg.Done()
	runtime.LockOSThread()
	if c.cfg.Netns != "" {
		f, err := os.Open("/run/netns/" + c.cfg.Netns)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err != nil {
			ready <- err
			return
		}
	}
	ready <- nil
	for {
		select {
		case <-c.stop:
			return
		case fn := <-c.ns:
			fn()
		}
	}
}

// inNS runs fn on a namespace thread: sockets it opens are the
// namespace's.
func (c *Client) inNS(fn func() error) error {
	errc := make(chan error, 1)
	select {
	case c.ns <- func() { errc <- fn() }:
	case <-c.stop:
		return net.ErrClosed
	}
	return <-errc
}

func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := c.inNS(func() (err error) {
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// Close stops everything New started.
func (c *Client) Close() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	if c.raw != nil {
		c.raw.Close()
	}
	if c.HTTP != nil {
		c.HTTP.CloseIdleConnections()
	}
	c.wg.Wait()
}

// Machine is what a boot needs to know of the machine.
type Machine struct {
	MAC  net.HardwareAddr
	UEFI bool // x86-64 UEFI (arch 7, ipxe.efi); else BIOS (arch 0, undionly.kpxe)
}

// Boot is one network boot up to iPXE's script: DORA as the PXE ROM, TFTP
// of the boot file, DORA as iPXE. It returns the script's URL.
func (c *Client) Boot(ctx context.Context, m Machine) (string, error) {
	arch, vc := byte(0), "PXEClient:Arch:00000:UNDI:002001"
	if m.UEFI {
		arch, vc = 7, "PXEClient:Arch:00007:UNDI:003016"
	}
	pxe := []dhcpv4.Modifier{
		dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(vc)),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, arch})),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 2, 1})),
		dhcpv4.WithRequestedOptions(dhcpv4.OptionBootfileName, dhcpv4.OptionTFTPServerName),
	}
	ack, err := c.dora(ctx, m.MAC, pxe)
	if err != nil {
		return "", fmt.Errorf("PXE DHCP: %w", err)
	}
	file := ack.BootFileNameOption()
	if file == "" {
		file = ack.BootFileName
	}
	if file == "" {
		return "", fmt.Errorf("PXE DHCP: the ACK names no boot file")
	}
	server := ack.ServerIPAddr
	if server == nil || server.IsUnspecified() {
		server = ack.ServerIdentifier()
	}
	if err := c.tftp(ctx, net.JoinHostPort(server.String(), "69"), file); err != nil {
		return "", fmt.Errorf("TFTP %s from %s: %w", file, server, err)
	}
	ipxe := append(slices.Clone(pxe), dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE"))))
	ack, err = c.dora(ctx, m.MAC, ipxe)
	if err != nil {
		return "", fmt.Errorf("iPXE DHCP: %w", err)
	}
	script := ack.BootFileNameOption()
	if script == "" {
		script = ack.BootFileName
	}
	if script == "" {
		return "", fmt.Errorf("iPXE DHCP: the ACK names no script")
	}
	return script, nil
}

// dora is DISCOVER, OFFER, REQUEST, ACK for mac through the shared socket,
// retried as a PXE ROM retries (the PXE specification's schedule: 4, 8, 16
// and 32 s, about a minute in all): DHCPTimeout doubles at each of the
// DHCPRetries tries.
func (c *Client) dora(ctx context.Context, mac net.HardwareAddr, mods []dhcpv4.Modifier) (*dhcpv4.DHCPv4, error) {
	t := time.Now()
	var lease *nclient4.Lease
	var err error
	wait := c.cfg.DHCPTimeout
	for try := 0; try < c.cfg.DHCPRetries; try++ {
		lease, err = c.doraOnce(ctx, mac, mods, wait)
		if err == nil || ctx.Err() != nil {
			break
		}
		wait *= 2
	}
	if err != nil {
		if ctx.Err() == nil { // not the machine powered off mid-boot
			c.Stats.doraErr.Add(1)
		}
		return nil, err
	}
	c.Stats.dora(time.Since(t))
	return lease.ACK, nil
}

// doraOnce is one exchange, each message sent once and waited for up to
// wait.
func (c *Client) doraOnce(ctx context.Context, mac net.HardwareAddr, mods []dhcpv4.Modifier, wait time.Duration) (*nclient4.Lease, error) {
	sub := c.demux.sub(mac)
	cl, err := nclient4.NewWithConn(sub, mac, nclient4.WithTimeout(wait), nclient4.WithRetry(1))
	if err != nil {
		sub.Close()
		return nil, err
	}
	defer cl.Close()
	return cl.Request(ctx, mods...)
}

// tftp fetches file as iPXE's loader is fetched (blksize 1432, tsize) and
// discards it.
func (c *Client) tftp(ctx context.Context, addr, file string) error {
	tc, err := tftp.NewClient(addr)
	if err != nil {
		return err
	}
	tc.SetBlockSize(1432)
	tc.RequestTSize(true)
	tc.SetTimeout(c.cfg.TFTPTimeout)
	tc.SetRetries(5)
	var wt io.WriterTo
	err = c.inNS(func() (err error) { // Receive opens the socket and sends the RRQ
		wt, err = tc.Receive(file, "octet")
		return err
	})
	if err == nil {
		var n int64
		n, err = wt.WriteTo(io.Discard)
		if err == nil {
			c.Stats.tftp(n)
			return nil
		}
	}
	if ctx.Err() == nil {
		c.Stats.tftpErr.Add(1)
	}
	return err
}

// counting counts HTTP response bytes and failed requests.
type counting struct {
	stats *Stats
	rt    http.RoundTripper
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		if r.Context().Err() == nil {
			c.stats.httpErr.Add(1)
		}
		return nil, err
	}
	c.stats.httpReq.Add(1)
	if resp.StatusCode != http.StatusOK {
		c.stats.httpErr.Add(1)
	}
	resp.Body = &countBody{ReadCloser: resp.Body, s: c.stats}
	return resp, nil
}

type countBody struct {
	io.ReadCloser
	s *Stats
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.s.httpBytes(int64(n))
	return n, err
}

// Stats are what the boots did (a step cut short by the machine's power
// going off is not an error): DORAs and their latency (DISCOVER to ACK,
// retries included), TFTP transfers and bytes, HTTP requests and bytes, in
// per-second buckets from Start for rates.
type Stats struct {
	doraErr, tftpErr, httpErr, httpReq atomic.Int64

	mu      sync.Mutex
	start   time.Time
	doraLat []time.Duration
	sec     map[int]*second
}

type second struct {
	doras, tftps     int
	tftpBytes, httpB int64
}

func newStats() *Stats { return &Stats{start: time.Now(), sec: map[int]*second{}} }

// Reset starts counting anew from now.
func (s *Stats) Reset() {
	s.doraErr.Store(0)
	s.tftpErr.Store(0)
	s.httpErr.Store(0)
	s.httpReq.Store(0)
	s.mu.Lock()
	s.start, s.doraLat, s.sec = time.Now(), nil, map[int]*second{}
	s.mu.Unlock()
}

func (s *Stats) bucket() *second {
	i := int(time.Since(s.start) / time.Second)
	b := s.sec[i]
	if b == nil {
		b = &second{}
		s.sec[i] = b
	}
	return b
}

func (s *Stats) dora(d time.Duration) {
	s.mu.Lock()
	s.doraLat = append(s.doraLat, d)
	s.bucket().doras++
	s.mu.Unlock()
}

func (s *Stats) tftp(n int64) {
	s.mu.Lock()
	b := s.bucket()
	b.tftps++
	b.tftpBytes += n
	s.mu.Unlock()
}

func (s *Stats) httpBytes(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.bucket().httpB += n
	s.mu.Unlock()
}

// Summary is Stats summed up. Rates are given twice: the mean over the
// seconds in which that kind of traffic happened (boots come in waves:
// inspection, then deployment) and the busiest second's.
type Summary struct {
	DORAs, DORAErrors                  int
	DORAP50, DORAP99, DORAMax          float64 // ms
	DORAPerSMean, DORAPerSPeak         float64
	TFTPs, TFTPErrors                  int
	TFTPPerSMean, TFTPPerSPeak         float64
	TFTPMB                             float64
	TFTPMBpsMean, TFTPMBpsPeak         float64
	HTTPRequests, HTTPErrors           int
	HTTPMB, HTTPMBpsMean, HTTPMBpsPeak float64
}

// Summary sums up what happened since the start (or Reset).
func (s *Stats) Summary() Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Summary{DORAErrors: int(s.doraErr.Load()), TFTPErrors: int(s.tftpErr.Load()),
		HTTPRequests: int(s.httpReq.Load()), HTTPErrors: int(s.httpErr.Load())}
	lat := slices.Clone(s.doraLat)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.DORAs = len(lat)
	if len(lat) > 0 {
		ms := func(q float64) float64 {
			return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
		}
		r.DORAP50, r.DORAP99, r.DORAMax = ms(0.5), ms(0.99), ms(1)
	}
	const mb = 1e6
	var dSec, tSec, hSec int
	var tBytes, hBytes int64
	for _, b := range s.sec {
		if b.doras > 0 {
			dSec++
			r.DORAPerSPeak = max(r.DORAPerSPeak, float64(b.doras))
		}
		if b.tftps > 0 {
			tSec++
			r.TFTPs += b.tftps
			tBytes += b.tftpBytes
			r.TFTPPerSPeak = max(r.TFTPPerSPeak, float64(b.tftps))
			r.TFTPMBpsPeak = max(r.TFTPMBpsPeak, float64(b.tftpBytes)/mb)
		}
		if b.httpB > 0 {
			hSec++
			hBytes += b.httpB
			r.HTTPMBpsPeak = max(r.HTTPMBpsPeak, float64(b.httpB)/mb)
		}
	}
	r.TFTPMB, r.HTTPMB = float64(tBytes)/mb, float64(hBytes)/mb
	if dSec > 0 {
		r.DORAPerSMean = float64(r.DORAs) / float64(dSec)
	}
	if tSec > 0 {
		r.TFTPPerSMean = float64(r.TFTPs) / float64(tSec)
		r.TFTPMBpsMean = r.TFTPMB / float64(tSec)
	}
	if hSec > 0 {
		r.HTTPMBpsMean = r.HTTPMB / float64(hSec)
	}
	return r
}
