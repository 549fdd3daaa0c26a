package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// latencies collects request durations from many workers.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) addAll(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted d by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarize puts count, mean and p50/p90/p99/max (ms) of d into figs.
func summarize(d []time.Duration, figs map[string]float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	figs["latency_samples"] = float64(len(s))
	if len(s) == 0 {
		return
	}
	figs["mean_ms"] = round3(ms(sum / time.Duration(len(s))))
	figs["p50_ms"] = round3(ms(percentile(s, 50)))
	figs["p90_ms"] = round3(ms(percentile(s, 90)))
	figs["p99_ms"] = round3(ms(percentile(s, 99)))
	figs["max_ms"] = round3(ms(s[len(s)-1]))
}

func round3(f float64) float64 {
	if f >= 0 {
		return float64(int64(f*1000+0.5)) / 1000
	}
	return -float64(int64(-f*1000+0.5)) / 1000
}

// forDuration runs fn in workers goroutines until d has passed (or ctx ends)
// and returns the latencies of the calls that succeeded, how many calls were
// made and the wall time. Each worker only starts a call before the deadline.
func forDuration(ctx context.Context, workers int, d time.Duration, fn func(ctx context.Context, w int) (time.Duration, error)) (lat []time.Duration, calls, ok int, wall time.Duration) {
	var (
		all latencies
		mu  sync.Mutex
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			var mine []time.Duration
			n, good := 0, 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				dur, err := fn(ctx, w)
				n++
				if err == nil {
					good++
					mine = append(mine, dur)
				}
			}
			all.addAll(mine)
			mu.Lock()
			calls += n
			ok += good
			mu.Unlock()
		})
	}
	wg.Wait()
	return all.d, calls, ok, time.Since(start)
}

// forEach runs fn once for every i in [0, n) on workers goroutines.
func forEach(ctx context.Context, workers, n int, fn func(ctx context.Context, i int)) time.Duration {
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range jobs {
				fn(ctx, i)
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return time.Since(start)
}
