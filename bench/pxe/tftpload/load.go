package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/pin/tftp/v3"
)

// Config describes one fan-out: N clients fetch File from Addr at once.
type Config struct {
	Addr      string        // server host:port
	File      string        // file name in the RRQ
	N         int           // concurrent fetches
	BlockSize int           // blksize option (0: 512-byte blocks, no option)
	TSize     bool          // ask for tsize, as iPXE does
	Timeout   time.Duration // per round-trip (pin/tftp default 5 s)
	Retries   int           // attempts per packet (pin/tftp default 5)
	Want      []byte        // expected content; nil skips the integrity check
}

// Result is what one fan-out measured. Times are from the common start
// (barrier release) to the end of each fetch.
type Result struct {
	N       int            `json:"n"`
	OK      int            `json:"ok"`
	Failed  int            `json:"failed"`
	Corrupt int            `json:"corrupt"`
	Bytes   int64          `json:"bytes"`
	Wall    time.Duration  `json:"-"`
	P50     time.Duration  `json:"-"`
	P99     time.Duration  `json:"-"`
	Max     time.Duration  `json:"-"`
	Errors  map[string]int `json:"errors,omitempty"`
}

// errCorrupt marks a fetch that finished but returned other bytes than Want.
var errCorrupt = errors.New("content differs from the expected file")

type fetch struct {
	took  time.Duration
	bytes int64
	err   error
}

// Run starts cfg.N fetches behind a start barrier so their RRQs leave
// together (a boot storm), waits for all of them and summarizes. Every
// goroutine it starts has returned when Run returns. pin/tftp's client has
// no context: a cancelled ctx stops fetches from starting, running ones end
// by their own timeout/retry budget.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.N < 1 {
		return Result{}, fmt.Errorf("n must be >= 1, got %d", cfg.N)
	}
	clients := make([]*tftp.Client, cfg.N)
	for i := range clients {
		c, err := newClient(cfg)
		if err != nil {
			return Result{}, err
		}
		clients[i] = c
	}
	results := make([]fetch, cfg.N)
	start := make(chan struct{})
	var t0 time.Time
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-start:
			case <-ctx.Done():
				results[i] = fetch{err: ctx.Err()}
				return
			}
			n, err := get(c, cfg)
			results[i] = fetch{took: time.Since(t0), bytes: n, err: err}
		}()
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	return summarize(results, time.Since(t0)), nil
}

func newClient(cfg Config) (*tftp.Client, error) {
	c, err := tftp.NewClient(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.BlockSize > 0 {
		c.SetBlockSize(cfg.BlockSize)
	}
	c.RequestTSize(cfg.TSize)
	if cfg.Timeout > 0 {
		c.SetTimeout(cfg.Timeout)
	}
	if cfg.Retries > 0 {
		c.SetRetries(cfg.Retries)
	}
	return c, nil
}

// get fetches one copy into memory and checks it against cfg.Want.
func get(c *tftp.Client, cfg Config) (int64, error) {
	wt, err := c.Receive(cfg.File, "octet")
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	if len(cfg.Want) > 0 {
		buf.Grow(len(cfg.Want))
	}
	n, err := wt.WriteTo(&buf)
	if err != nil {
		return n, err
	}
	if cfg.Want != nil && !bytes.Equal(buf.Bytes(), cfg.Want) {
		return n, errCorrupt
	}
	return n, nil
}

func summarize(fs []fetch, wall time.Duration) Result {
	r := Result{N: len(fs), Wall: wall, Errors: map[string]int{}}
	var took []time.Duration
	for _, f := range fs {
		switch {
		case f.err == nil:
			r.OK++
			r.Bytes += f.bytes
		case errors.Is(f.err, errCorrupt):
			r.Corrupt++
			r.Errors[f.err.Error()]++
		default:
			r.Failed++
			r.Errors[f.err.Error()]++
		}
		if f.err == nil || errors.Is(f.err, errCorrupt) {
			took = append(took, f.took)
		}
	}
	if len(r.Errors) == 0 {
		r.Errors = nil
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	r.P50 = percentile(took, 0.50)
	r.P99 = percentile(took, 0.99)
	if len(took) > 0 {
		r.Max = took[len(took)-1]
	}
	return r
}

// percentile of an ascending slice, nearest-rank; 0 when empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}
