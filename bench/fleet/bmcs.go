package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/bmcsim/redfishsim"
)

// bmcs is a simulated fleet as the benchmark sees it: per-BMC power reads
// (to find when every BMC was read), the traffic a read costs, and the
// node create body that points a server at BMC i.
type bmcs interface {
	Len() int
	Reads(i int) uint64
	TotalReads() uint64
	// Traffic is what the BMCs received: packets (IPMI) or HTTP requests
	// (Redfish), so traffic per read shows what one read costs.
	Traffic() uint64
	Node(i int) map[string]any
	Close()
}

// ipmiFleet is castiron's IPMI simulator (lanplus, suite 17).
type ipmiFleet struct{ f *ipmisim.Fleet }

func startIPMI(c config, n int) (bmcs, error) {
	f, err := ipmisim.Start(context.Background(), ipmisim.Config{N: n, Distinct: true, Base: net.ParseIP(c.base), Port: c.port,
		LatencyMin: c.latMin, LatencyMax: c.latMax, CipherSuites: nil})
	if err != nil {
		return nil, err
	}
	return ipmiFleet{f}, nil
}

func (p ipmiFleet) Len() int           { return len(p.f.BMCs) }
func (p ipmiFleet) Reads(i int) uint64 { return p.f.BMCs[i].Stats().Reads }
func (p ipmiFleet) TotalReads() uint64 { return p.f.Stats().Reads }
func (p ipmiFleet) Traffic() uint64    { return p.f.Stats().Received }
func (p ipmiFleet) Close()             { p.f.Close() }
func (p ipmiFleet) Node(i int) map[string]any {
	b := p.f.BMCs[i]
	return map[string]any{"driver": "ipmi", "driver_info": map[string]any{
		"ipmi_address": b.Host(), "ipmi_port": b.Port(), "ipmi_cipher_suite": "17",
		"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword,
	}}
}

// rfFleet is castiron's Redfish emulator in its state-only mode, one
// HTTP BMC per 127.x.y.z address (so per-BMC limits see N BMCs), each
// answering every request 20-50 ms late. A power read is a GET of the
// ComputerSystem, counted in front of the emulator.
type rfFleet struct {
	bmcs   []*rfBMC
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type rfBMC struct {
	srv      *redfishsim.Server
	url      string
	reads    atomic.Uint64
	requests atomic.Uint64
}

func (b *rfBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.requests.Add(1)
	if r.Method == http.MethodGet && r.URL.Path == b.srv.SystemPath() {
		b.reads.Add(1)
	}
	b.srv.ServeHTTP(w, r)
}

func startRedfish(c config, n int) (bmcs, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &rfFleet{cancel: cancel}
	ip := net.ParseIP(c.rfBase).To4()
	if ip == nil {
		cancel()
		return nil, fmt.Errorf("bad -redfish-base %q", c.rfBase)
	}
	for i := range n {
		addr := net.IPv4(ip[0], ip[1]+byte((int(ip[2])*256+int(ip[3])+i)/65536), byte((int(ip[2])*256+int(ip[3])+i)/256%256), byte((int(ip[3])+i)%256))
		lat := c.latMin
		if c.latMax > c.latMin {
			lat += time.Duration(rand.Int64N(int64(c.latMax - c.latMin)))
		}
		srv, err := redfishsim.New(redfishsim.Config{Latency: lat, SystemID: fmt.Sprintf("sys-%d", i)})
		if err != nil {
			f.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(addr.String(), fmt.Sprint(c.port)))
		if err != nil {
			f.Close()
			return nil, err
		}
		b := &rfBMC{srv: srv, url: "http://" + ln.Addr().String()}
		f.bmcs = append(f.bmcs, b)
		hs := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
		f.wg.Add(2)
		go func() { defer f.wg.Done(); _ = hs.Serve(ln) }()
		go func() { defer f.wg.Done(); <-ctx.Done(); _ = hs.Close() }()
	}
	return f, nil
}

func (f *rfFleet) Len() int           { return len(f.bmcs) }
func (f *rfFleet) Reads(i int) uint64 { return f.bmcs[i].reads.Load() }
func (f *rfFleet) TotalReads() uint64 {
	var s uint64
	for _, b := range f.bmcs {
		s += b.reads.Load()
	}
	return s
}
func (f *rfFleet) Traffic() uint64 {
	var s uint64
	for _, b := range f.bmcs {
		s += b.requests.Load()
	}
	return s
}
func (f *rfFleet) Close() {
	f.cancel()
	f.wg.Wait()
	for _, b := range f.bmcs {
		_ = b.srv.Close(context.Background())
	}
}
func (f *rfFleet) Node(i int) map[string]any {
	b := f.bmcs[i]
	return map[string]any{"driver": "redfish", "driver_info": map[string]any{
		"redfish_address": b.url, "redfish_system_id": b.srv.SystemPath(),
		"redfish_username": b.srv.User(), "redfish_password": b.srv.Password(),
	}}
}
