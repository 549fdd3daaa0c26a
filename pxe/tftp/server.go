// Package tftp is castiron's read-only TFTP server. It hands PXE firmware
// the iPXE binaries and nothing else: an exact allow-list of basenames,
// every other name (paths, traversal, pxelinux's config probes) answered
// "file not found" at once, writes refused.
//
// Options (RFC 2347): blksize (RFC 2348, clamped to the interface MTU) and
// tsize (RFC 2349) are negotiated by github.com/pin/tftp/v3. windowsize
// (RFC 7440, asked for by EDK2) is left out of the OACK, which the RFC
// defines as "refused": the client falls back to one block per ACK.
package tftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	pintftp "github.com/pin/tftp/v3"

	"castiron/pxe/boot"
)

// Defaults for Config.Timeout and Config.Retries. EDK2 opens a transfer
// only to learn the file size and abandons it after the OACK; each such
// transfer holds a socket and a goroutine until the server gives up, which
// these make ~4 s instead of pin/tftp's ~30 s. One second per round trip is
// still generous on a provisioning LAN.
const (
	DefaultTimeout = time.Second
	DefaultRetries = 3
)

// Config configures a Server.
type Config struct {
	// Addr is the UDP address to listen on, e.g. "10.0.0.1:69".
	Addr string
	// Dir holds the files; default DefaultDir. Ignored when FS is set.
	Dir string
	// FS, when set, is served instead of Dir (e.g. binaries embedded at
	// build time).
	FS fs.FS
	// Files is the allow-list of plain basenames; default DefaultFiles().
	Files []string
	// Extra are more files by name (a plain basename) and host path, e.g.
	// "grubnetaa64.efi" from the arm64 ramdisk's directory.
	Extra map[string]string
	// Dynamic, when set, may answer a name with generated contents (the
	// boot loader's per-node configuration): ok false falls through to
	// the files. client is the requester's address.
	Dynamic func(ctx context.Context, name string, client net.IP) (data []byte, ok bool)
	// Recorder gets tftp_served / tftp_refused events; nil keeps nothing.
	Recorder boot.Recorder
	// MACForIP names the machine behind a client address (TFTP itself
	// carries no MAC); the DHCP server knows its leases. Nil: MAC "".
	MACForIP func(net.IP) string
	// Logger; nil uses slog.Default().
	Logger *slog.Logger
	// Timeout is how long to wait for each ACK before resending; Retries
	// how many resends before giving a transfer up. See DefaultTimeout.
	Timeout time.Duration
	Retries int
	// Meter counts transfers and bytes (metrics); nil counts nothing.
	Meter boot.Meter
}

// Server serves the allow-listed files read-only.
type Server struct {
	addr     string
	files    fs.FS
	allowed  allowList
	extra    map[string]string
	dynamic  func(ctx context.Context, name string, client net.IP) ([]byte, bool)
	rec      boot.Recorder
	macForIP func(net.IP) string
	log      *slog.Logger
	timeout  time.Duration
	retries  int
	meter    boot.Meter
	// listening is true while Run holds its socket (readiness).
	listening atomic.Bool
}

// Listening reports whether Run has bound its socket and is serving.
func (s *Server) Listening() bool { return s.listening.Load() }

// New checks cfg and makes a Server; Run starts it.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		return nil, errors.New("tftp: no listen address")
	}
	allowed, err := newAllowList(cfg.Files)
	if err != nil {
		return nil, err
	}
	files := cfg.FS
	if files == nil {
		dir := cfg.Dir
		if dir == "" {
			dir = DefaultDir
		}
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("tftp: file directory: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("tftp: %s is not a directory", dir)
		}
		files = symlinkFS{dir: dir}
	}
	s := &Server{
		addr:     cfg.Addr,
		files:    files,
		allowed:  allowed,
		extra:    cfg.Extra,
		dynamic:  cfg.Dynamic,
		rec:      cfg.Recorder,
		macForIP: cfg.MACForIP,
		log:      cfg.Logger,
		timeout:  cfg.Timeout,
		retries:  cfg.Retries,
		meter:    cfg.Meter,
	}
	if s.meter == nil {
		s.meter = boot.NoMeter{}
	}
	if s.rec == nil {
		s.rec = boot.Discard{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.retries <= 0 {
		s.retries = DefaultRetries
	}
	return s, nil
}

// Addr is the UDP address the server listens on (Config.Addr).
func (s *Server) Addr() string { return s.addr }

// Run serves until ctx ends, then waits for running transfers (each ends
// within Timeout×(Retries+1)). A bind error is returned at once.
func (s *Server) Run(ctx context.Context) error {
	conn, err := net.ListenPacket("udp", s.addr)
	if err != nil {
		return fmt.Errorf("tftp: listen %s: %w", s.addr, err)
	}
	srv := pintftp.NewServer(
		func(name string, rf io.ReaderFrom) error { return s.serveRead(ctx, name, rf) },
		func(name string, wt io.WriterTo) error { return s.refuseWrite(ctx, name, wt) },
	)
	srv.SetTimeout(s.timeout)
	srv.SetRetries(s.retries)
	// The timeout already is the wait; pin's default adds up to 1 s more.
	srv.SetBackoff(func(int) time.Duration { return 0 })

	served := make(chan error, 1)
	go func() { served <- srv.Serve(conn) }()
	s.log.Info("tftp server listening", "addr", conn.LocalAddr().String(), "files", len(s.allowed))
	s.listening.Store(true)
	defer s.listening.Store(false)

	select {
	case <-ctx.Done():
		srv.Shutdown() // closes conn, waits for transfers
		<-served
		return nil
	case err := <-served:
		conn.Close()
		return fmt.Errorf("tftp: serve: %w", err)
	}
}

// serveRead is pin/tftp's read handler: one call per RRQ, on its own
// goroutine; returning an error makes pin send it as an ERROR packet.
func (s *Server) serveRead(ctx context.Context, name string, rf io.ReaderFrom) error {
	start := time.Now()
	out, _ := rf.(pintftp.OutgoingTransfer)
	var client net.IP
	if out != nil {
		addr := out.RemoteAddr()
		client = addr.IP
	}
	if s.dynamic != nil {
		if data, ok := s.dynamic(ctx, name, client); ok {
			return s.send(ctx, start, client, name, out, rf, bytes.NewReader(data), int64(len(data)))
		}
	}
	var f fs.File
	var err error
	// GRUB names files from the root: "/aarch64-vmlinuz".
	switch path, extra := s.extra[strings.TrimPrefix(name, "/")]; {
	case extra && isPlainBasename(strings.TrimPrefix(name, "/")):
		f, err = os.Open(path)
	case s.allowed[name]:
		f, err = s.files.Open(name)
	default:
		s.refused(ctx, client, name, "not allowed")
		return ErrNotFound
	}
	if err != nil {
		s.refused(ctx, client, name, "missing")
		s.log.Warn("tftp: allowed file not readable", "file", name, "err", err)
		return ErrNotFound
	}
	defer f.Close()
	size := int64(-1)
	// tsize from Stat works for any fs.FS, not only seekable files.
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	return s.send(ctx, start, client, name, out, rf, f, size)
}

// send transfers r (size bytes, -1 unknown) and records the outcome.
func (s *Server) send(ctx context.Context, start time.Time, client net.IP, name string, out pintftp.OutgoingTransfer, rf io.ReaderFrom, r io.Reader, size int64) error {
	if size >= 0 && out != nil {
		out.SetSize(size)
	}
	// castiron's own time: the lookup until here and reading the file;
	// the rest of the transfer waits for the client's ACKs.
	setup := time.Since(start)
	tr := &timedReader{r: r}
	n, err := rf.ReadFrom(tr)
	took := time.Since(start)
	ev := boot.Event{MAC: s.mac(client), Kind: boot.TFTPServed, Took: setup + tr.took}
	result := "ok"
	if err != nil {
		result = "incomplete"
	}
	s.meter.Transfer("tftp", name, n, result)
	if err != nil {
		// n == 0 after an OACK is EDK2's size query being abandoned.
		ev.Detail = fmt.Sprintf("file=%s bytes=%d duration=%s incomplete: %v", name, n, took.Round(time.Millisecond), err)
		s.log.Info("tftp transfer incomplete", "client", client.String(), "file", name, "bytes", n, "duration", took, "err", err)
	} else {
		ev.Detail = fmt.Sprintf("file=%s bytes=%d duration=%s", name, n, took.Round(time.Millisecond))
		s.log.Info("tftp served", "client", client.String(), "file", name, "bytes", n, "duration", took)
	}
	s.rec.Record(ctx, ev)
	return err
}

// refuseWrite answers every WRQ with an error (recorded, unlike pin's
// built-in refusal for a nil write handler).
func (s *Server) refuseWrite(ctx context.Context, name string, wt io.WriterTo) error {
	var client net.IP
	if in, ok := wt.(pintftp.IncomingTransfer); ok {
		addr := in.RemoteAddr()
		client = addr.IP
	}
	s.refused(ctx, client, name, "write")
	return errWriteRefused
}

var errWriteRefused = errors.New("read-only server")

func (s *Server) refused(ctx context.Context, client net.IP, name, why string) {
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	s.log.Debug("tftp refused", "client", client.String(), "file", shown, "why", why)
	// Not the name: a refused one is whatever the client asked for.
	s.meter.Transfer("tftp", "", 0, "refused")
	s.rec.Record(ctx, boot.Event{
		MAC:    s.mac(client),
		Kind:   boot.TFTPRefused,
		Detail: fmt.Sprintf("file=%q %s", shown, why),
	})
}

func (s *Server) mac(ip net.IP) string {
	if s.macForIP == nil || ip == nil {
		return ""
	}
	return s.macForIP(ip)
}

// timedReader sums the time spent in Read.
type timedReader struct {
	r    io.Reader
	took time.Duration
}

func (t *timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := t.r.Read(p)
	t.took += time.Since(start)
	return n, err
}
