package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"castiron/ramdisk/agent/steps/blockdev"
	"castiron/ramdisk/agent/steps/fetch"
	"castiron/ramdisk/agent/steps/qcow2"
	"castiron/ramdisk/protocol"
)

// Image formats: what image_disk_format may say, and what the first bytes
// show.
const (
	formatRaw   = "raw"
	formatQcow2 = "qcow2"
	formatGzip  = "gzip"
	formatZstd  = "zstd"
	formatVMDK  = "vmdk"
	formatVHDX  = "vhdx"
)

// sniff names the format the first bytes of an image show; raw when none.
func sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte(qcow2.Magic)):
		return formatQcow2
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return formatGzip
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return formatZstd
	case bytes.HasPrefix(b, []byte("KDMV")):
		return formatVMDK
	case bytes.HasPrefix(b, []byte("vhdxfile")):
		return formatVHDX
	}
	return formatRaw
}

// chooseFormat checks the declared format against the content, as Ironic
// refuses an image whose content is not what its disk_format says.
func chooseFormat(declared, found string) (string, error) {
	switch {
	case found == formatVMDK || found == formatVHDX:
		return "", fmt.Errorf("the image is %s, which castiron does not write: convert it to raw or qcow2", found)
	case declared == "" || declared == found:
		return found, nil
	}
	return "", fmt.Errorf("image_disk_format is %s but the image is %s", declared, found)
}

// progressReader reports download progress as the image is read.
type progressReader struct {
	r  io.Reader
	fn func()
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.fn()
	return n, err
}

// streamImage downloads the image and writes the raw disk image it holds
// to dev. It returns the bytes of raw image put on the disk and whether the
// disk was touched at all.
func (r *runner) streamImage(ctx context.Context, log *slog.Logger, job imageJob, dev *blockdev.Device, rep *reporter) (int64, bool, error) {
	body, err := fetch.Open(ctx, job.url, r.fetch)
	if err != nil {
		return 0, false, err
	}
	defer body.Close()
	h := newHash(job.algo)
	var src io.Reader = body
	if h != nil {
		src = io.TeeReader(body, h)
	}
	br := bufio.NewReaderSize(src, 1<<20)
	magic, _ := br.Peek(8)
	format, err := chooseFormat(job.format, sniff(magic))
	if err != nil {
		return 0, false, err
	}
	if format == formatRaw && body.Size() > dev.Size() {
		return 0, false, fmt.Errorf("%w: the image has %d bytes, %s has %d", ErrImageTooLarge, body.Size(), dev.Path(), dev.Size())
	}
	log.Info("writing image", "format", format, "size", body.Size())

	w := blockdev.NewWriter(ctx, dev, blockdev.WriterOptions{})
	progress := func() {
		rep.report(protocol.Progress{
			Done: body.Offset(), Total: body.Size(), Unit: "bytes",
			Message: fmt.Sprintf("writing %s: %s downloaded of %s, %s written", dev.Path(), humanBytes(body.Offset()), sizeText(body.Size()), humanBytes(w.Written())),
		}, false)
	}
	in := bufio.NewReaderSize(progressReader{r: br, fn: progress}, 64<<10)
	werr := r.decode(ctx, format, in, w, dev)
	if werr == nil {
		// Read what is left (a trailer, padding) so the checksum covers the
		// whole file.
		_, werr = io.Copy(io.Discard, in)
	}
	cerr := w.Close()
	touched := w.Written() > 0 || w.End() > 0
	if err := errors.Join(werr, cerr); err != nil {
		if ctx.Err() != nil {
			return 0, touched, ctx.Err()
		}
		if errors.Is(err, blockdev.ErrPastEnd) {
			return 0, touched, fmt.Errorf("%w: %s has %d bytes", ErrImageTooLarge, dev.Path(), dev.Size())
		}
		if errors.Is(err, ErrImageTooLarge) {
			return 0, touched, firstErr(werr, cerr)
		}
		return 0, touched, fmt.Errorf("writing %s to %s: %w", job.url, dev.Path(), firstErr(werr, cerr))
	}
	if h != nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != job.checksum {
			return 0, true, &ChecksumError{Algo: job.algo, Want: job.checksum, Got: got}
		}
	}
	if body.Resumes() > 0 {
		log.Info("image download was resumed", "times", body.Resumes())
	}
	rep.report(protocol.Progress{Done: body.Offset(), Total: max(body.Size(), body.Offset()), Unit: "bytes",
		Message: fmt.Sprintf("wrote %s to %s", humanBytes(w.End()), dev.Path())}, true)
	return w.End(), touched, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func sizeText(n int64) string {
	if n < 0 {
		return "?"
	}
	return humanBytes(n)
}

// decode turns the image stream into writes: raw bytes as they come, a
// qcow2 converted, gzip or zstd decompressed (the content then raw or
// qcow2).
func (r *runner) decode(ctx context.Context, format string, in *bufio.Reader, w *blockdev.Writer, dev *blockdev.Device) error {
	switch format {
	case formatRaw:
		return copyRaw(ctx, in, w)
	case formatQcow2:
		_, err := qcow2.Convert(ctx, in, w, qcow2.Options{CheckHeader: fitsOn(dev)})
		return err
	case formatGzip:
		zr, err := gzip.NewReader(in)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		return r.decodeInner(ctx, zr, w, dev)
	case formatZstd:
		zr, err := zstd.NewReader(in, zstd.WithDecoderMaxWindow(1<<30))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		return r.decodeInner(ctx, zr, w, dev)
	}
	return fmt.Errorf("unsupported image format %s", format)
}

func (r *runner) decodeInner(ctx context.Context, zr io.Reader, w *blockdev.Writer, dev *blockdev.Device) error {
	inner := bufio.NewReaderSize(zr, 1<<20)
	magic, _ := inner.Peek(8)
	switch f := sniff(magic); f {
	case formatQcow2:
		_, err := qcow2.Convert(ctx, inner, w, qcow2.Options{CheckHeader: fitsOn(dev)})
		return err
	case formatRaw:
		return copyRaw(ctx, inner, w)
	default:
		return fmt.Errorf("the compressed image holds a %s image, which castiron does not write", f)
	}
}

func fitsOn(dev *blockdev.Device) func(qcow2.Header) error {
	return func(h qcow2.Header) error {
		if int64(h.VirtualSize) > dev.Size() {
			return fmt.Errorf("%w: the image is %d bytes, %s has %d", ErrImageTooLarge, h.VirtualSize, dev.Path(), dev.Size())
		}
		return nil
	}
}

// copyRaw writes the stream from offset 0 on.
func copyRaw(ctx context.Context, r io.Reader, w *blockdev.Writer) error {
	buf := make([]byte, 4<<20)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := w.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		default:
			return err
		}
	}
}
