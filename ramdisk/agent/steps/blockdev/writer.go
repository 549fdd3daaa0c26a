package blockdev

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Writer puts a stream of positioned writes on a device from a goroutine
// of its own, so that downloading and decompressing overlap with disk
// I/O. Contiguous writes are gathered into large buffers; written data is
// pushed to the device as it goes (sync_file_range) so that little sits in
// the page cache, which keeps cancellation quick and progress honest.
//
// WriteAt and ZeroRange are called from one goroutine; Close must be
// called, and waits for the writer goroutine to end.
type Writer struct {
	dev     *Device
	ctx     context.Context
	bufSize int

	cur    []byte // gathering buffer, not yet queued
	curOff int64

	ops  chan writeOp
	free chan []byte
	done chan struct{}

	mu  sync.Mutex
	err error

	written atomic.Int64 // bytes on their way to the device (data and zeros)
	high    int64        // end of the furthest range written or zeroed
}

type writeOp struct {
	buf  []byte // data, or nil for a zeroing
	off  int64
	zero int64
}

// WriterOptions tune a Writer.
type WriterOptions struct {
	BufferSize int // bytes gathered per write (default 8 MiB)
	Buffers    int // buffers in flight (default 3)
	// InFlight bounds the written bytes not yet known to be on the device
	// (default 64 MiB).
	InFlight int64
}

// NewWriter starts a writer on dev. Cancelling ctx stops it; pending and
// later writes then fail with ctx's error.
func NewWriter(ctx context.Context, dev *Device, o WriterOptions) *Writer {
	if o.BufferSize <= 0 {
		o.BufferSize = 8 << 20
	}
	if o.Buffers <= 0 {
		o.Buffers = 3
	}
	if o.InFlight <= 0 {
		o.InFlight = 64 << 20
	}
	w := &Writer{
		dev: dev, ctx: ctx, bufSize: o.BufferSize,
		ops:  make(chan writeOp, o.Buffers),
		free: make(chan []byte, o.Buffers),
		done: make(chan struct{}),
	}
	for range o.Buffers {
		w.free <- make([]byte, 0, o.BufferSize)
	}
	go w.loop(o.InFlight)
	return w
}

// Written is the number of bytes handed to the device so far.
func (w *Writer) Written() int64 { return w.written.Load() }

// End is the end offset of the furthest write or zeroing queued.
func (w *Writer) End() int64 { return w.high }

func (w *Writer) setErr(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// Err is the first error the writer met.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// WriteAt queues p at off; p may be reused when it returns.
func (w *Writer) WriteAt(p []byte, off int64) (int, error) {
	if err := w.Err(); err != nil {
		return 0, err
	}
	if off < 0 || off+int64(len(p)) > w.dev.size {
		err := w.dev.pastEnd(int64(len(p)), off)
		w.setErr(err)
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		if w.cur != nil && off == w.curOff+int64(len(w.cur)) && len(w.cur) < w.bufSize {
			c := min(len(p), w.bufSize-len(w.cur))
			w.cur = append(w.cur, p[:c]...)
			p, off = p[c:], off+int64(c)
			continue
		}
		if err := w.flush(); err != nil {
			return 0, err
		}
		buf, err := w.buffer()
		if err != nil {
			return 0, err
		}
		w.cur, w.curOff = buf, off
	}
	w.high = max(w.high, off)
	return n, nil
}

// ZeroRange queues zeroing of [off, off+n).
func (w *Writer) ZeroRange(off, n int64) error {
	if err := w.Err(); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > w.dev.size {
		err := w.dev.pastEnd(n, off)
		w.setErr(err)
		return err
	}
	if n == 0 {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	w.high = max(w.high, off+n)
	return w.send(writeOp{off: off, zero: n})
}

func (w *Writer) buffer() ([]byte, error) {
	select {
	case b := <-w.free:
		return b[:0], nil
	case <-w.done:
		return nil, w.stoppedErr()
	case <-w.ctx.Done():
		return nil, w.ctx.Err()
	}
}

func (w *Writer) stoppedErr() error {
	if err := w.Err(); err != nil {
		return err
	}
	return errors.New("writer stopped")
}

func (w *Writer) send(op writeOp) error {
	select {
	case w.ops <- op:
		return nil
	case <-w.done:
		return w.stoppedErr()
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

func (w *Writer) flush() error {
	if len(w.cur) == 0 {
		if w.cur != nil {
			w.free <- w.cur // never blocks: the buffer came from there
			w.cur = nil
		}
		return nil
	}
	op := writeOp{buf: w.cur, off: w.curOff}
	w.cur = nil
	return w.send(op)
}

// Close queues what is gathered, waits for every write, and syncs the
// device. It returns the first error, or the context's.
func (w *Writer) Close() error {
	ferr := w.flush()
	close(w.ops)
	<-w.done
	if err := w.Err(); err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	return w.dev.Sync()
}

// loop owns the device while the writer runs.
func (w *Writer) loop(inFlight int64) {
	defer close(w.done)
	type span struct{ off, n int64 }
	var pending []span
	var pendingBytes int64
	for op := range w.ops {
		if w.Err() != nil || w.ctx.Err() != nil {
			w.setErr(w.ctx.Err())
			w.recycle(op)
			continue
		}
		var err error
		n := op.zero
		if op.buf != nil {
			n = int64(len(op.buf))
			_, err = w.dev.WriteAt(op.buf, op.off)
		} else {
			err = w.dev.ZeroRange(w.ctx, op.off, op.zero, nil)
		}
		w.recycle(op)
		if err != nil {
			w.setErr(err)
			continue
		}
		w.written.Add(n)
		// Start writeback now; wait for the oldest ranges once too much
		// is in flight.
		_ = w.dev.syncRange(op.off, n, false)
		pending = append(pending, span{op.off, n})
		pendingBytes += n
		for pendingBytes > inFlight && len(pending) > 1 {
			s := pending[0]
			pending = pending[1:]
			pendingBytes -= s.n
			// Errors show again in Close's fsync.
			_ = w.dev.syncRange(s.off, s.n, true)
		}
	}
}

func (w *Writer) recycle(op writeOp) {
	if op.buf != nil {
		w.free <- op.buf[:0]
	}
}
