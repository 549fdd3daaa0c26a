package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAddBootEvents is a DHCP storm's timeline: batches of 1024
// events (four per exchange) of random unknown MACs, as the boot timeline
// recorder writes them. Reports CPU per event.
func BenchmarkAddBootEvents(b *testing.B) {
	s := openAt(b, filepath.Join(b.TempDir(), "castiron.db")) // SQLite, the embedded store
	ctx := context.Background()
	kinds := []string{"dhcp_discover", "dhcp_offer", "dhcp_request", "dhcp_ack"}
	evs := make([]BootEvent, 1024)
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func() {
		now := time.Now()
		for i := range evs {
			if i%4 == 0 {
				m := rng.Uint32()
				evs[i].MAC = fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
			} else {
				evs[i].MAC = evs[i-1].MAC
			}
			evs[i].At, evs[i].Kind = now, kinds[i%4]
			evs[i].Detail = "ip=10.206.3.4 arch=0 ipxe=false file=undionly.kpxe took=0.000123s"
		}
	}
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		c0 := cpuTime()
		if err := s.AddBootEvents(ctx, evs); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*len(evs)), "cpu-µs/event")
}

// cpuTime is the process's user+system CPU time: on a shared machine wall
// time per operation varies with the neighbours, CPU time much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLatestBootEvents is the fleet list's poll of each node's newest
// boot event (GET /v1/boot_timeline/latest) over a timeline of 200,000
// events of 5,000 nodes spread over an hour: "since" one hour (the UI's
// first call) and the last 2 s (each poll after).
func BenchmarkLatestBootEvents(b *testing.B) {
	s := openAt(b, filepath.Join(b.TempDir(), "castiron.db"))
	ctx := context.Background()
	const nodes, events = 5000, 200000
	t0 := time.Now().Add(-time.Hour)
	evs := make([]BootEvent, 0, 1024)
	for i := range events {
		n := i % nodes
		evs = append(evs, BootEvent{At: t0.Add(time.Duration(i) * time.Hour / events), MAC: fmt.Sprintf("52:54:00:00:%02x:%02x", byte(n>>8), byte(n)),
			NodeUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Kind: "dhcp_ack", Detail: "ip=10.206.3.4 arch=0 ipxe=true file=x took=0.000123s"})
		if len(evs) == cap(evs) {
			if err := s.AddBootEvents(ctx, evs); err != nil {
				b.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	if err := s.AddBootEvents(ctx, evs); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		since time.Duration
		want  int
	}{{"hour", time.Hour + time.Minute, nodes}, {"2s", 2 * time.Second, -1}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := s.LatestBootEvents(ctx, time.Now().Add(-bc.since))
				if err != nil || (bc.want >= 0 && len(got) != bc.want) {
					b.Fatalf("%d events, %v", len(got), err)
				}
			}
		})
	}
}
