// Package qcow2 converts a qcow2 image read once, front to back, from a
// stream (an HTTP download) into the raw disk image it describes, writing
// each cluster at its guest offset. Nothing is held in memory but the
// tables and the few clusters that arrive before the table that maps them.
//
// Supported: versions 2 and 3, any cluster size, zlib and zstd compressed
// clusters, zero clusters, a dirty image. Refused: backing files,
// encryption, external data files, extended L2 entries, images marked
// corrupt.
package qcow2

import (
	"encoding/binary"
	"fmt"
)

// Magic is the first four bytes of a qcow2 file.
const Magic = "QFI\xfb"

// Limits from QEMU: cluster sizes of 512 B to 2 MiB and an L1 table of at
// most 32 MiB.
const (
	minClusterBits = 9
	maxClusterBits = 21
	maxL1Bytes     = 32 << 20
	maxVirtualSize = 1 << 56
)

// Incompatible feature bits.
const (
	featDirty        = 1 << 0
	featCorrupt      = 1 << 1
	featExternalData = 1 << 2
	featCompression  = 1 << 3
	featExtendedL2   = 1 << 4
)

// Compression types.
const (
	CompressionZlib = 0
	CompressionZstd = 1
)

// Header is the part of a qcow2 header the conversion needs.
type Header struct {
	Version               uint32
	BackingFileOffset     uint64
	ClusterBits           uint32
	VirtualSize           uint64
	CryptMethod           uint32
	L1Size                uint32
	L1TableOffset         uint64
	RefcountTableOffset   uint64
	RefcountTableClusters uint32
	IncompatibleFeatures  uint64
	HeaderLength          uint32
	CompressionType       uint8
}

// ClusterSize in bytes.
func (h Header) ClusterSize() int64 { return 1 << h.ClusterBits }

// l2Entries is the number of entries in an L2 table (one cluster).
func (h Header) l2Entries() int64 { return h.ClusterSize() / 8 }

// l1Needed is the number of L1 entries the virtual size uses.
func (h Header) l1Needed() int64 {
	span := h.ClusterSize() * h.l2Entries()
	return int64((h.VirtualSize + uint64(span) - 1) / uint64(span))
}

// UnsupportedError is a valid image using a feature this package does not
// implement (or refuses, like backing files).
type UnsupportedError struct{ What string }

func (e *UnsupportedError) Error() string { return "unsupported qcow2 image: " + e.What }

// CorruptError is an image that breaks the format.
type CorruptError struct{ What string }

func (e *CorruptError) Error() string { return "corrupt qcow2 image: " + e.What }

func corrupt(format string, args ...any) error {
	return &CorruptError{What: fmt.Sprintf(format, args...)}
}

func unsupported(format string, args ...any) error {
	return &UnsupportedError{What: fmt.Sprintf(format, args...)}
}

// ParseHeader decodes and checks a qcow2 header. b holds the start of the
// file: at least 72 bytes, and the whole header for version 3.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 72 {
		return Header{}, corrupt("header is %d bytes, shorter than 72", len(b))
	}
	if string(b[:4]) != Magic {
		return Header{}, corrupt("bad magic %q", b[:4])
	}
	be := binary.BigEndian
	h := Header{
		Version:               be.Uint32(b[4:]),
		BackingFileOffset:     be.Uint64(b[8:]),
		ClusterBits:           be.Uint32(b[20:]),
		VirtualSize:           be.Uint64(b[24:]),
		CryptMethod:           be.Uint32(b[32:]),
		L1Size:                be.Uint32(b[36:]),
		L1TableOffset:         be.Uint64(b[40:]),
		RefcountTableOffset:   be.Uint64(b[48:]),
		RefcountTableClusters: be.Uint32(b[56:]),
		HeaderLength:          72,
	}
	switch h.Version {
	case 2:
	case 3:
		if len(b) < 104 {
			return Header{}, corrupt("version 3 header is %d bytes, shorter than 104", len(b))
		}
		h.IncompatibleFeatures = be.Uint64(b[72:])
		h.HeaderLength = be.Uint32(b[100:])
		if h.HeaderLength < 104 || h.HeaderLength%8 != 0 {
			return Header{}, corrupt("header length %d", h.HeaderLength)
		}
		if int(h.HeaderLength) > len(b) {
			return Header{}, corrupt("header length %d runs past the %d bytes read", h.HeaderLength, len(b))
		}
		if h.HeaderLength > 104 {
			h.CompressionType = b[104]
		}
	default:
		return Header{}, unsupported("version %d", h.Version)
	}
	if h.ClusterBits < minClusterBits || h.ClusterBits > maxClusterBits {
		return Header{}, corrupt("cluster bits %d outside %d-%d", h.ClusterBits, minClusterBits, maxClusterBits)
	}
	if int64(h.HeaderLength) > h.ClusterSize() {
		return Header{}, corrupt("header length %d exceeds the cluster size", h.HeaderLength)
	}
	f := h.IncompatibleFeatures
	switch {
	case f&featCorrupt != 0:
		return Header{}, corrupt("the image is marked corrupt")
	case f&featExternalData != 0:
		return Header{}, unsupported("external data file")
	case f&featExtendedL2 != 0:
		return Header{}, unsupported("extended L2 entries (subclusters)")
	case f&^uint64(featDirty|featCorrupt|featExternalData|featCompression|featExtendedL2) != 0:
		return Header{}, unsupported("incompatible features %#x", f)
	}
	switch {
	case f&featCompression == 0 && h.CompressionType != CompressionZlib:
		return Header{}, corrupt("compression type %d without its feature bit", h.CompressionType)
	case h.CompressionType != CompressionZlib && h.CompressionType != CompressionZstd:
		return Header{}, unsupported("compression type %d", h.CompressionType)
	}
	if h.CryptMethod != 0 {
		return Header{}, unsupported("encryption")
	}
	if h.BackingFileOffset != 0 {
		return Header{}, unsupported("backing file")
	}
	if h.VirtualSize >= maxVirtualSize {
		return Header{}, corrupt("virtual size %d", h.VirtualSize)
	}
	if int64(h.L1Size)*8 > maxL1Bytes {
		return Header{}, corrupt("L1 table of %d entries is larger than 32 MiB", h.L1Size)
	}
	if int64(h.L1Size) < h.l1Needed() {
		return Header{}, corrupt("L1 table of %d entries is too small for %d bytes", h.L1Size, h.VirtualSize)
	}
	if h.l1Needed() > 0 && (h.L1TableOffset == 0 || h.L1TableOffset%uint64(h.ClusterSize()) != 0 || h.L1TableOffset >= maxVirtualSize) {
		return Header{}, corrupt("L1 table offset %#x", h.L1TableOffset)
	}
	if h.RefcountTableOffset%uint64(h.ClusterSize()) != 0 || h.RefcountTableOffset >= maxVirtualSize || int64(h.RefcountTableClusters) > 1<<24 {
		return Header{}, corrupt("refcount table at %#x (%d clusters)", h.RefcountTableOffset, h.RefcountTableClusters)
	}
	return h, nil
}
