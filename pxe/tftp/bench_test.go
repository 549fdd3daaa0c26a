package tftp

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkConcurrentFetch: 200 clients fetch undionly.kpxe at once over
// loopback (a rack powering on together). Every fetch must succeed; one
// iteration = one wave of 200. Reports ms per wave and aggregate MB/s.
func BenchmarkConcurrentFetch(b *testing.B) {
	const clients = 200
	dir, files := testFiles(b)
	want := files["undionly.kpxe"]
	addr, _ := startServer(b, Config{Dir: dir})
	for _, blksize := range []int{0, 1468} {
		b.Run(fmt.Sprintf("blksize=%d", max(blksize, 512)), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for range clients {
					wg.Go(func() {
						c := client(b, addr)
						if blksize > 0 {
							c.SetBlockSize(blksize)
						}
						c.RequestTSize(true)
						got, _, err := fetch(c, "undionly.kpxe")
						if err == nil && !bytes.Equal(got, want) {
							err = fmt.Errorf("got %d bytes, want %d", len(got), len(want))
						}
						if err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				total += time.Since(start)
				close(errs)
				for err := range errs {
					b.Fatalf("fetch failed: %v", err)
				}
			}
			wave := total / time.Duration(b.N)
			b.ReportMetric(float64(wave.Microseconds())/1000, "ms/200-fetches")
			b.ReportMetric(float64(clients*len(want))/wave.Seconds()/1e6, "MB/s")
		})
	}
}
