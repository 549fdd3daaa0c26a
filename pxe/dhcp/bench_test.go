package dhcp

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"castiron/pxe/boot"
)

// benchClients is perfdhcp's client count in the Kea comparison.
const benchClients = 10000

// benchPackets prebuilds, in wire format, relayed (giaddr, as perfdhcp -r
// sends) DISCOVERs and REQUESTs for n MACs. The REQUEST's option 50 holds
// a marker address at reqAt[i], which the benchmark overwrites with the
// offered address as a client would.
func benchPackets(b *testing.B, n int) (disc, req [][]byte, reqAt []int) {
	marker := []byte{50, 4, 10, 201, 254, 253}
	disc, req, reqAt = make([][]byte, n), make([][]byte, n), make([]int, n)
	relay := dhcpv4.WithGatewayIP(net.IPv4(10, 201, 0, 2))
	for i := range n {
		mac := net.HardwareAddr{0x52, 0x54, 0x01, byte(i >> 16), byte(i >> 8), byte(i)}
		disc[i] = packet(b, dhcpv4.MessageTypeDiscover, mac, plain, relay).ToBytes()
		req[i] = packet(b, dhcpv4.MessageTypeRequest, mac, plain, relay, serverID(testServer.AsSlice()),
			requested(net.IP(marker[2:]))).ToBytes()
		reqAt[i] = bytes.Index(req[i][240:], marker) + 240 + 2
	}
	return disc, req, reqAt
}

// BenchmarkDORA is the server's packet path without sockets: parse, gate,
// decide, lease write (durable, batched, group commit) and encode, for
// DISCOVER then REQUEST of 10,000 relayed clients, many at once. Reports DORA/s (wall clock: depends on what else
// the machine runs) and CPU per DORA.
func BenchmarkDORA(b *testing.B) {
	st := openStore(b, "")
	s := newTestServer(b, fullConfig("10.201.0.10", "10.201.255.250"), &allowGate{all: true}, st, boot.Discard{}, nil)
	ctx := context.Background()
	disc, reqs, reqAt := benchPackets(b, benchClients)
	var next atomic.Int64
	// Many REQUESTs in flight, as the server has when ACKs wait for their
	// commit (there in the lease writer's queue, here in goroutines).
	b.SetParallelism(64)
	b.ResetTimer()
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 1024)
		for pb.Next() {
			i := int(next.Add(1)-1) % benchClients
			d, err := dhcpv4.FromBytes(disc[i])
			if err != nil {
				b.Fatal(err)
			}
			offer, err := s.Reply(ctx, d)
			if err != nil || offer == nil {
				b.Fatalf("discover: %v %v", offer, err)
			}
			_ = offer.ToBytes()
			buf = append(buf[:0], reqs[i]...)
			copy(buf[reqAt[i]:], offer.YourIPAddr.To4())
			r, err := dhcpv4.FromBytes(buf)
			if err != nil {
				b.Fatal(err)
			}
			ack, err := s.Reply(ctx, r)
			if err != nil || ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
				b.Fatalf("request: %v %v", ack, err)
			}
			_ = ack.ToBytes()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "DORA/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-µs/DORA")
}

// cpuTime is the process's user+system CPU time in ns: on a shared machine
// wall-clock rates vary with the neighbours, CPU per operation much less.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkOffer is the DISCOVER path alone (memory only, no database).
func BenchmarkOffer(b *testing.B) {
	s := newTestServer(b, fullConfig("10.201.0.10", "10.201.255.250"), &allowGate{all: true}, openStore(b, ""), boot.Discard{}, nil)
	ctx := context.Background()
	disc, _, _ := benchPackets(b, benchClients)
	i := 0
	for b.Loop() {
		d, _ := dhcpv4.FromBytes(disc[i%benchClients])
		offer, err := s.Reply(ctx, d)
		if err != nil || offer == nil {
			b.Fatal(err)
		}
		_ = offer.ToBytes()
		i++
	}
}
