package qcow2

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
)

// Target receives the raw image: data at guest offsets, and the ranges
// that read as zeros (unallocated or zero clusters), which must be zeroed
// because the target may hold older data.
type Target interface {
	WriteAt(p []byte, off int64) (int, error)
	ZeroRange(off, n int64) error
}

// Options tune Convert.
type Options struct {
	// MaxBuffered bounds the memory held for clusters that arrive before
	// the table mapping them is known (0: 256 MiB). An image laid out with
	// its tables at the end needs about its whole size; Convert then fails
	// with an *UnsupportedError instead of exhausting memory.
	MaxBuffered int64
	// CheckHeader, when set, may refuse the image once the header is read,
	// before anything is written (an image larger than the disk).
	CheckHeader func(Header) error
}

const defaultMaxBuffered = 256 << 20

// Stats describes a finished conversion.
type Stats struct {
	Header      Header
	DataBytes   int64 // written from data clusters
	ZeroBytes   int64 // zeroed
	MaxBuffered int64 // most bytes held at once for not yet mapped clusters
}

// L1 and L2 entry fields.
const (
	offsetMask     = 0x00fffffffffffe00
	flagCompressed = 1 << 62
	flagZero       = 1 << 0
)

// cneed is a compressed cluster waiting for its bytes [start, end) of the
// file; the range is what the L2 entry declares and may run past the data.
type cneed struct {
	guest      int64
	start, end int64
	data       []byte
	got        int64 // bytes filled, from start
}

type recentCluster struct {
	idx  int64
	data []byte
}

// recentClusters is how many clusters with compressed data are kept.
const recentClusters = 8

type converter struct {
	ctx  context.Context
	dst  Target
	opts Options

	h    Header
	cs   int64 // cluster size
	l2n  int64 // entries per L2 table
	virt int64

	l1         []byte // the L1 entries the virtual size uses
	l1Start    int64
	l1Got      int64
	l1Done     bool
	metaRanges [][2]int64 // header, L1 and refcount table: never data

	next      int64 // index of the next host cluster to read
	l2At      map[int64][]int64
	pendingL2 int
	dataAt    map[int64][]int64
	compAt    map[int64][]*cneed
	buffered  map[int64][]byte
	bufBytes  int64
	complete  bool
	// recent holds the last clusters that had compressed data.
	recent     []recentCluster
	recentNext int

	out   []byte
	flate io.ReadCloser
	zstd  *zstd.Decoder
	stats Stats
}

// Convert reads a qcow2 image from r once, front to back, and writes the
// raw image it describes to dst. It reads r to the end, so a checksum of
// everything read covers the whole file.
func Convert(ctx context.Context, r io.Reader, dst Target, opts Options) (Stats, error) {
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = defaultMaxBuffered
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<20)
	}
	c := &converter{ctx: ctx, dst: dst, opts: opts,
		l2At: map[int64][]int64{}, dataAt: map[int64][]int64{}, compAt: map[int64][]*cneed{}, buffered: map[int64][]byte{}}
	defer c.close()
	if err := c.run(br); err != nil {
		return c.stats, err
	}
	return c.stats, nil
}

func (c *converter) close() {
	if c.zstd != nil {
		c.zstd.Close()
	}
}

func (c *converter) run(r *bufio.Reader) error {
	first := make([]byte, 72)
	if _, err := io.ReadFull(r, first); err != nil {
		return corrupt("header: %v", err)
	}
	bits := binary.BigEndian.Uint32(first[20:])
	if string(first[:4]) != Magic || bits < minClusterBits || bits > maxClusterBits {
		_, err := ParseHeader(first)
		return err
	}
	cluster := make([]byte, 1<<bits)
	copy(cluster, first)
	n, err := io.ReadFull(r, cluster[72:])
	n += 72
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return err
	}
	h, err := ParseHeader(cluster[:n])
	if err != nil {
		return err
	}
	if c.opts.CheckHeader != nil {
		if err := c.opts.CheckHeader(h); err != nil {
			return err
		}
	}
	c.setup(h)
	c.next = 1
	if n < len(cluster) { // the file ends inside its header cluster
		return c.finish(int64(n))
	}
	for {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, cluster)
		if n > 0 {
			if perr := c.process(c.next, cluster[:n]); perr != nil {
				return perr
			}
			c.next++
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return c.finish((c.next-1)*c.cs + int64(n))
		default:
			return err
		}
	}
}

func (c *converter) setup(h Header) {
	c.h = h
	c.stats.Header = h
	c.cs = h.ClusterSize()
	c.l2n = h.l2Entries()
	c.virt = int64(h.VirtualSize)
	c.out = make([]byte, c.cs)
	c.l1 = make([]byte, h.l1Needed()*8)
	c.l1Start = int64(h.L1TableOffset)
	c.metaRanges = [][2]int64{
		{0, c.cs},
		{c.l1Start, c.l1Start + int64(h.L1Size)*8},
		{int64(h.RefcountTableOffset), int64(h.RefcountTableOffset) + int64(h.RefcountTableClusters)*c.cs},
	}
	c.recent = make([]recentCluster, recentClusters)
	if len(c.l1) == 0 {
		c.l1Done = true
		c.complete = true
		c.recent = nil
	}
}

// process handles host cluster idx, whose bytes are data (the last one of
// the file may be short).
func (c *converter) process(idx int64, data []byte) error {
	start := idx * c.cs
	end := start + int64(len(data))
	claimed := false // every byte of it is accounted for
	for _, m := range c.metaRanges {
		if start < m[1] && end > m[0] && m[1] > m[0] {
			claimed = true
		}
	}
	// L1 table entries in this cluster.
	if !c.l1Done {
		l1End := c.l1Start + int64(len(c.l1))
		if s, e := max(start, c.l1Start), min(end, l1End); s < e {
			copy(c.l1[s-c.l1Start:], data[s-start:e-start])
			c.l1Got += e - s
			if c.l1Got == int64(len(c.l1)) {
				if err := c.onL1(); err != nil {
					return err
				}
			}
		}
	}
	if l1s, ok := c.l2At[idx]; ok {
		delete(c.l2At, idx)
		if int64(len(data)) != c.cs {
			return corrupt("L2 table at %#x is cut short", start)
		}
		claimed = true
		for _, l1i := range l1s {
			if err := c.onL2(l1i, data, idx); err != nil {
				return err
			}
		}
	}
	if guests, ok := c.dataAt[idx]; ok {
		delete(c.dataAt, idx)
		claimed = true
		for _, g := range guests {
			if err := c.writeCluster(g, data); err != nil {
				return err
			}
		}
	}
	var spans int
	if needs, ok := c.compAt[idx]; ok {
		delete(c.compAt, idx)
		for _, n := range needs {
			spans++
			if err := c.feed(n, idx, data); err != nil {
				return err
			}
		}
	}
	if spans > 0 && !c.complete {
		c.keepRecent(idx, data)
		claimed = true
	}
	if !claimed && !c.complete {
		// Its table may still come: keep a copy until the map is complete.
		if c.bufBytes+int64(len(data)) > c.opts.MaxBuffered {
			return unsupported("more than %d MiB arrive before the tables that map them; convert the image with qemu-img convert", c.opts.MaxBuffered>>20)
		}
		c.buffered[idx] = append([]byte(nil), data...)
		c.bufBytes += int64(len(data))
		c.stats.MaxBuffered = max(c.stats.MaxBuffered, c.bufBytes)
	}
	return nil
}

// past reports whether host cluster idx has been read already.
func (c *converter) past(idx int64) bool { return idx < c.next }

func (c *converter) onL1() error {
	c.l1Done = true
	// Register every table first, so that the map is not taken for
	// complete while buffered tables are still being read.
	type l2ref struct{ l1i, idx int64 }
	var buffered []l2ref
	for i := int64(0); i < int64(len(c.l1))/8; i++ {
		off := int64(binary.BigEndian.Uint64(c.l1[i*8:]) & offsetMask)
		if off == 0 {
			if err := c.zero(i*c.l2n*c.cs, c.l2n*c.cs); err != nil {
				return err
			}
			continue
		}
		if off%c.cs != 0 {
			return corrupt("L1 entry %d points at unaligned offset %#x", i, off)
		}
		c.pendingL2++
		if idx := off / c.cs; c.past(idx) {
			buffered = append(buffered, l2ref{i, idx})
		} else {
			c.l2At[idx] = append(c.l2At[idx], i)
		}
	}
	for _, r := range buffered {
		b, ok := c.pastCluster(r.idx)
		if !ok || int64(len(b)) != c.cs {
			return corrupt("L2 table at %#x is in a cluster used for something else", r.idx*c.cs)
		}
		if err := c.onL2(r.l1i, b, r.idx); err != nil {
			return err
		}
	}
	c.checkComplete()
	return nil
}

// pastCluster returns a cluster already read, if it was kept.
func (c *converter) pastCluster(idx int64) ([]byte, bool) {
	if b, ok := c.buffered[idx]; ok {
		return b, true
	}
	for _, r := range c.recent {
		if r.idx == idx && r.data != nil {
			return r.data, true
		}
	}
	return nil, false
}

// keepRecent keeps a copy of a cluster holding compressed data. QEMU packs
// compressed clusters byte by byte, so the tail of one may hold the start
// of a cluster whose L2 table comes just after it.
func (c *converter) keepRecent(idx int64, data []byte) {
	r := &c.recent[c.recentNext%len(c.recent)]
	c.recentNext++
	r.idx = idx
	r.data = append(r.data[:0], data...)
}

func (c *converter) checkComplete() {
	if c.l1Done && c.pendingL2 == 0 && !c.complete {
		c.complete = true
		c.buffered = nil
		c.bufBytes = 0
		c.recent = nil
	}
}

// onL2 maps the guest clusters of L2 table number l1i.
func (c *converter) onL2(l1i int64, table []byte, tableIdx int64) error {
	c.pendingL2--
	csizeShift := 62 - (c.h.ClusterBits - 8)
	csizeMask := int64(1)<<(c.h.ClusterBits-8) - 1
	coffMask := int64(1)<<csizeShift - 1
	var zeroStart, zeroLen int64
	flush := func() error {
		if zeroLen > 0 {
			err := c.zero(zeroStart, zeroLen)
			zeroLen = 0
			return err
		}
		return nil
	}
	for j := int64(0); j < c.l2n; j++ {
		guest := (l1i*c.l2n + j) * c.cs
		if guest >= c.virt {
			break
		}
		e := binary.BigEndian.Uint64(table[j*8:])
		if e&flagCompressed != 0 {
			if err := flush(); err != nil {
				return err
			}
			coff := int64(e) & coffMask
			nsec := (int64(e)>>csizeShift)&csizeMask + 1
			n := &cneed{guest: guest, start: coff, end: coff + nsec*512 - coff&511}
			if err := c.addCompressed(n, tableIdx); err != nil {
				return err
			}
			continue
		}
		off := int64(e & offsetMask)
		if e&flagZero != 0 || off == 0 {
			if zeroLen > 0 && zeroStart+zeroLen == guest {
				zeroLen += c.cs
			} else {
				if err := flush(); err != nil {
					return err
				}
				zeroStart, zeroLen = guest, c.cs
			}
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if off%c.cs != 0 {
			return corrupt("L2 entry for guest offset %#x points at unaligned offset %#x", guest, off)
		}
		idx := off / c.cs
		if c.past(idx) || idx == tableIdx {
			b, ok := c.pastCluster(idx)
			if !ok || idx == tableIdx {
				return corrupt("data for guest offset %#x is in a cluster used for something else", guest)
			}
			if err := c.writeCluster(guest, b); err != nil {
				return err
			}
			continue
		}
		c.dataAt[idx] = append(c.dataAt[idx], guest)
	}
	if err := flush(); err != nil {
		return err
	}
	c.checkComplete()
	return nil
}

func (c *converter) addCompressed(n *cneed, tableIdx int64) error {
	if n.start < c.cs || n.end <= n.start {
		return corrupt("compressed cluster for guest offset %#x at %#x", n.guest, n.start)
	}
	for idx := n.start / c.cs; idx <= (n.end-1)/c.cs; idx++ {
		if c.past(idx) || idx == tableIdx {
			b, ok := c.pastCluster(idx)
			if !ok || idx == tableIdx {
				return corrupt("compressed data for guest offset %#x is in a cluster used for something else", n.guest)
			}
			if err := c.feed(n, idx, b); err != nil {
				return err
			}
			continue
		}
		c.compAt[idx] = append(c.compAt[idx], n)
	}
	return nil
}

// feed gives a compressed cluster the bytes it needs from host cluster idx
// and decompresses it once it has them all.
func (c *converter) feed(n *cneed, idx int64, data []byte) error {
	start := idx * c.cs
	s, e := max(n.start, start), min(n.end, start+int64(len(data)))
	if s >= e {
		return nil
	}
	if s-n.start != n.got {
		return corrupt("compressed data for guest offset %#x is out of order", n.guest)
	}
	if n.data == nil { // only once its bytes come: an L2 table maps thousands
		n.data = make([]byte, n.end-n.start)
	}
	copy(n.data[s-n.start:], data[s-start:e-start])
	n.got += e - s
	if n.got == n.end-n.start {
		return c.inflate(n)
	}
	return nil
}

func (c *converter) inflate(n *cneed) error {
	src := bytes.NewReader(n.data[:n.got])
	var r io.Reader
	switch c.h.CompressionType {
	case CompressionZlib:
		if c.flate == nil {
			c.flate = flate.NewReader(src)
		} else if err := c.flate.(flate.Resetter).Reset(src, nil); err != nil {
			return err
		}
		r = c.flate
	case CompressionZstd:
		if c.zstd == nil {
			d, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(4*c.cs)))
			if err != nil {
				return err
			}
			c.zstd = d
		} else if err := c.zstd.Reset(src); err != nil {
			return err
		}
		r = c.zstd
	}
	if _, err := io.ReadFull(r, c.out); err != nil {
		return corrupt("compressed cluster for guest offset %#x at %#x: %v", n.guest, n.start, err)
	}
	n.data = nil
	return c.writeCluster(n.guest, c.out)
}

func (c *converter) writeCluster(guest int64, data []byte) error {
	n := min(c.cs, c.virt-guest)
	if int64(len(data)) < n {
		return corrupt("data cluster for guest offset %#x is cut short", guest)
	}
	if _, err := c.dst.WriteAt(data[:n], guest); err != nil {
		return err
	}
	c.stats.DataBytes += n
	return nil
}

func (c *converter) zero(guest, n int64) error {
	n = min(n, c.virt-guest)
	if n <= 0 {
		return nil
	}
	c.stats.ZeroBytes += n
	return c.dst.ZeroRange(guest, n)
}

// finish runs at the end of the file, size bytes long.
func (c *converter) finish(size int64) error {
	if !c.l1Done {
		return corrupt("the file ends (%d bytes) before its L1 table", size)
	}
	if c.pendingL2 > 0 {
		return corrupt("the file ends (%d bytes) before %d of its L2 tables", size, c.pendingL2)
	}
	if len(c.dataAt) > 0 {
		return corrupt("the file ends (%d bytes) before %d of its data clusters", size, len(c.dataAt))
	}
	// Compressed ranges may be declared past the end of the file: use what
	// there is, once.
	done := map[*cneed]bool{}
	for _, needs := range c.compAt {
		for _, n := range needs {
			if done[n] {
				continue
			}
			done[n] = true
			if n.start >= size || n.got != min(n.end, size)-n.start {
				return corrupt("the file ends (%d bytes) before compressed data at %#x", size, n.start)
			}
			if err := c.inflate(n); err != nil {
				return err
			}
		}
	}
	c.compAt = nil
	if c.stats.DataBytes+c.stats.ZeroBytes != c.virt {
		return fmt.Errorf("qcow2: %d of %d bytes converted", c.stats.DataBytes+c.stats.ZeroBytes, c.virt)
	}
	return nil
}
