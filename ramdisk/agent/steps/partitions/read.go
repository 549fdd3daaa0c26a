// Package partitions reads a disk's partition table (GPT, MBR with logical
// partitions) well enough to find every partition to wipe, even from a
// damaged table, and adds the config drive partition Ironic's agent adds
// after writing a whole-disk image.
package partitions

import (
	"encoding/binary"
	"io"
	"unicode/utf16"
)

// Partition is one entry of a table. Start and Size are in bytes.
type Partition struct {
	Number int
	Start  int64
	Size   int64
	Type   string // GPT type GUID or MBR type as "0x83"
	Name   string // GPT partition name
}

// Table is what Read found.
type Table struct {
	Kind       string // "gpt", "mbr", or "" when there is none
	Partitions []Partition
}

// Read reads the partition table of a disk of size bytes with the given
// logical sector size. It is lenient: a GPT whose primary copy is gone is
// read from its backup, checksums are not checked, and entries outside the
// disk are left out.
func Read(r io.ReaderAt, size int64, sectorSize int) Table {
	ss := int64(sectorSize)
	if ss < 512 {
		ss = 512
	}
	if t, ok := readGPT(r, size, ss, ss); ok {
		return t
	}
	if t, ok := readGPT(r, size, ss, size/ss*ss-ss); ok {
		return t
	}
	return readMBR(r, size, ss)
}

func readGPT(r io.ReaderAt, size, ss, headerOff int64) (Table, bool) {
	if headerOff < ss || headerOff+ss > size {
		return Table{}, false
	}
	hdr := make([]byte, 92)
	if _, err := r.ReadAt(hdr, headerOff); err != nil || string(hdr[:8]) != "EFI PART" {
		return Table{}, false
	}
	le := binary.LittleEndian
	entriesLBA := int64(le.Uint64(hdr[72:]))
	count := int64(le.Uint32(hdr[80:]))
	entrySize := int64(le.Uint32(hdr[84:]))
	if entrySize < 128 || entrySize > 4096 || count > 4096 || entriesLBA <= 0 || entriesLBA > size/ss {
		return Table{}, false
	}
	buf := make([]byte, count*entrySize)
	n, _ := r.ReadAt(buf, entriesLBA*ss)
	buf = buf[:n]
	t := Table{Kind: "gpt"}
	for i := int64(0); (i+1)*entrySize <= int64(len(buf)); i++ {
		e := buf[i*entrySize : (i+1)*entrySize]
		if allZero(e[:16]) {
			continue
		}
		first, last := int64(le.Uint64(e[32:])), int64(le.Uint64(e[40:]))
		if first <= 0 || last < first || last >= size/ss {
			continue
		}
		t.Partitions = append(t.Partitions, Partition{
			Number: int(i + 1),
			Start:  first * ss,
			Size:   (last - first + 1) * ss,
			Type:   guidString(e[:16]),
			Name:   utf16Name(e[56:128]),
		})
	}
	return t, true
}

func readMBR(r io.ReaderAt, size, ss int64) Table {
	mbr := make([]byte, 512)
	if _, err := r.ReadAt(mbr, 0); err != nil || mbr[510] != 0x55 || mbr[511] != 0xaa {
		return Table{}
	}
	t := Table{Kind: "mbr"}
	le := binary.LittleEndian
	var extended int64 = -1
	for i := 0; i < 4; i++ {
		e := mbr[446+16*i : 446+16*(i+1)]
		if e[0] != 0 && e[0] != 0x80 { // not a partition table (a boot sector)
			return Table{}
		}
		typ := e[4]
		start, sectors := int64(le.Uint32(e[8:])), int64(le.Uint32(e[12:]))
		if typ == 0 || sectors == 0 || start*ss >= size {
			continue
		}
		if typ == 0xee { // protective MBR of a GPT whose headers are gone
			continue
		}
		p := Partition{Number: i + 1, Start: start * ss, Size: min(sectors*ss, size-start*ss), Type: hexType(typ)}
		t.Partitions = append(t.Partitions, p)
		if isExtended(typ) && extended < 0 {
			extended = start
		}
	}
	if extended >= 0 {
		t.Partitions = append(t.Partitions, readLogical(r, size, ss, extended)...)
	}
	return t
}

func isExtended(t byte) bool { return t == 0x05 || t == 0x0f || t == 0x85 }

// readLogical follows the chain of extended boot records, numbering the
// logical partitions from 5 as Linux does.
func readLogical(r io.ReaderAt, size, ss, base int64) []Partition {
	var out []Partition
	le := binary.LittleEndian
	ebr := make([]byte, 512)
	seen := map[int64]bool{}
	for cur, num := base, 5; num < 5+128 && !seen[cur] && cur*ss < size; num++ {
		seen[cur] = true
		if _, err := r.ReadAt(ebr, cur*ss); err != nil || ebr[510] != 0x55 || ebr[511] != 0xaa {
			break
		}
		e1, e2 := ebr[446:462], ebr[462:478]
		if start, sectors := int64(le.Uint32(e1[8:])), int64(le.Uint32(e1[12:])); e1[4] != 0 && sectors > 0 && (cur+start)*ss < size {
			out = append(out, Partition{Number: num, Start: (cur + start) * ss, Size: min(sectors*ss, size-(cur+start)*ss), Type: hexType(e1[4])})
		}
		next := int64(le.Uint32(e2[8:]))
		if e2[4] == 0 || next == 0 {
			break
		}
		cur = base + next
	}
	return out
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func hexType(t byte) string {
	const digits = "0123456789abcdef"
	return "0x" + string([]byte{digits[t>>4], digits[t&15]})
}

// guidString renders a GPT GUID (mixed endian) in its usual text form.
func guidString(b []byte) string {
	le := binary.LittleEndian
	const digits = "0123456789ABCDEF"
	hex := func(v uint64, n int) []byte {
		out := make([]byte, n)
		for i := n - 1; i >= 0; i-- {
			out[i] = digits[v&15]
			v >>= 4
		}
		return out
	}
	var s []byte
	s = append(s, hex(uint64(le.Uint32(b[0:])), 8)...)
	s = append(s, '-')
	s = append(s, hex(uint64(le.Uint16(b[4:])), 4)...)
	s = append(s, '-')
	s = append(s, hex(uint64(le.Uint16(b[6:])), 4)...)
	s = append(s, '-')
	s = append(s, hex(uint64(binary.BigEndian.Uint16(b[8:])), 4)...)
	s = append(s, '-')
	for _, c := range b[10:16] {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

func utf16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
