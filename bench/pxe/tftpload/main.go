// Command tftpload fetches one file from a TFTP server with N clients at
// once (start barrier, like a rack booting together) and reports how many
// fetches succeeded with the right bytes, the wall time and per-fetch
// latency percentiles. The client is pin/tftp/v3, with blksize and tsize
// options as iPXE asks for them.
//
//	tftpload -addr 10.206.0.1:69 -file undionly.kpxe -n 200 -expect /usr/lib/ipxe/undionly.kpxe
//
// One JSON line on stdout, one human line on stderr. Exit status 0 even when
// fetches failed (the failures are the measurement); 2 on usage errors.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("tftpload", flag.ContinueOnError)
	cfg := Config{}
	expect := ""
	label := ""
	fs.StringVar(&cfg.Addr, "addr", "", "TFTP server host:port")
	fs.StringVar(&cfg.File, "file", "undionly.kpxe", "file to fetch")
	fs.IntVar(&cfg.N, "n", 200, "concurrent fetches")
	fs.IntVar(&cfg.BlockSize, "blksize", 1432, "blksize option (0: none, 512-byte blocks)")
	fs.BoolVar(&cfg.TSize, "tsize", true, "request tsize")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "per round-trip timeout (0: pin/tftp default 5s)")
	fs.IntVar(&cfg.Retries, "retries", 0, "attempts per packet (0: pin/tftp default 5)")
	fs.StringVar(&expect, "expect", "", "local copy of the file: every fetch is compared with it")
	fs.StringVar(&label, "label", "", "server label written into the record")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.Addr == "" {
		fmt.Fprintln(os.Stderr, "tftpload: -addr is required")
		return 2
	}
	if expect != "" {
		b, err := os.ReadFile(expect)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tftpload:", err)
			return 2
		}
		cfg.Want = b
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tftpload:", err)
		return 2
	}
	rec := record{Label: label, File: cfg.File, BlockSize: cfg.BlockSize, Result: res,
		WallS: seconds(res.Wall), P50S: seconds(res.P50), P99S: seconds(res.P99), MaxS: seconds(res.Max)}
	if res.Wall > 0 {
		rec.MBps = float64(res.Bytes) / res.Wall.Seconds() / 1e6
	}
	if err := json.NewEncoder(os.Stdout).Encode(rec); err != nil {
		fmt.Fprintln(os.Stderr, "tftpload:", err)
		return 1
	}
	errs := ""
	if len(res.Errors) > 0 {
		errs = fmt.Sprintf(" errors=%v", res.Errors)
	}
	fmt.Fprintf(os.Stderr, "tftpload %s %s n=%d ok=%d failed=%d corrupt=%d wall=%.3fs p50=%.3fs p99=%.3fs max=%.3fs %.1f MB/s%s\n",
		label, cfg.File, res.N, res.OK, res.Failed, res.Corrupt, rec.WallS, rec.P50S, rec.P99S, rec.MaxS, rec.MBps, errs)
	return 0
}

// record is the JSON line: Result plus durations in seconds.
type record struct {
	Label     string `json:"label,omitempty"`
	File      string `json:"file"`
	BlockSize int    `json:"blksize"`
	Result
	WallS float64 `json:"wall_s"`
	P50S  float64 `json:"p50_s"`
	P99S  float64 `json:"p99_s"`
	MaxS  float64 `json:"max_s"`
	MBps  float64 `json:"mb_per_s"`
}

func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Second)
}
