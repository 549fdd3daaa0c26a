// Package isofix corrects what go-diskfs v1.9.4 writes into ISO 9660
// images (castiron's config drives and virtual media ISOs). It has no
// dependencies, so the ramdisk agent may use it too.
package isofix

import (
	"encoding/binary"
	"fmt"
)

// Two fixes to the image go-diskfs v1.9.4 writes.
//
// go-diskfs v1.9.4 writes the Joliet directory records of subdirectories
// with the extent of the primary (8.3-named) directory instead of their
// Joliet one, so a reader that uses Joliet (Windows) sees mangled names
// below the root. Its Joliet path table is right; FixJolietDirs points each
// subdirectory record at the extent the path table gives. It changes
// nothing in an image whose records are already right.

// Sector is the ISO 9660 logical sector size.
const Sector = 2048

type ptEntry struct {
	lba    uint32
	parent uint16
	name   string
}

// FixJolietDirs: see above.
func FixJolietDirs(iso []byte) error {
	svd := findJolietSVD(iso)
	if svd == nil {
		return nil
	}
	ptSize := binary.LittleEndian.Uint32(svd[132:136])
	ptLoc := int64(binary.LittleEndian.Uint32(svd[140:144])) * Sector
	if ptLoc+int64(ptSize) > int64(len(iso)) {
		return fmt.Errorf("joliet path table beyond the image")
	}
	var table []ptEntry // index 0 is directory number 1, the root
	pt := iso[ptLoc : ptLoc+int64(ptSize)]
	for i := 0; i+8 <= len(pt); {
		n := int(pt[i])
		if n == 0 || i+8+n > len(pt) {
			break
		}
		table = append(table, ptEntry{
			lba:    binary.LittleEndian.Uint32(pt[i+2 : i+6]),
			parent: binary.LittleEndian.Uint16(pt[i+6 : i+8]),
			name:   string(pt[i+8 : i+8+n]),
		})
		i += 8 + n + n%2
	}
	for num, dir := range table {
		size, err := selfSize(iso, dir.lba)
		if err != nil {
			return err
		}
		err = eachRecord(iso, dir.lba, size, func(rec []byte) {
			if rec[25]&2 == 0 || (rec[32] == 1 && (rec[33] == 0 || rec[33] == 1)) {
				return // a file, "." or ".."
			}
			name := string(rec[33 : 33+int(rec[32])])
			for _, child := range table {
				if int(child.parent) == num+1 && child.name == name {
					childSize, err := selfSize(iso, child.lba)
					if err != nil {
						return
					}
					putBoth32(rec[2:10], child.lba)
					putBoth32(rec[10:18], childSize)
					return
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// findJolietSVD returns the supplementary volume descriptor with a UCS-2
// escape sequence, if any.
func findJolietSVD(iso []byte) []byte {
	for s := 16; (s+1)*Sector <= len(iso); s++ {
		vd := iso[s*Sector : (s+1)*Sector]
		if string(vd[1:6]) != "CD001" || vd[0] == 255 {
			return nil
		}
		if vd[0] == 2 && vd[88] == '%' && vd[89] == '/' && (vd[90] == '@' || vd[90] == 'C' || vd[90] == 'E') {
			return vd
		}
	}
	return nil
}

// selfSize is the data length in a directory's "." record.
func selfSize(iso []byte, lba uint32) (uint32, error) {
	off := int64(lba) * Sector
	if off+34 > int64(len(iso)) || iso[off] < 34 {
		return 0, fmt.Errorf("joliet directory at sector %d is not in the image", lba)
	}
	return binary.LittleEndian.Uint32(iso[off+10 : off+14]), nil
}

// eachRecord visits a directory's records; they never cross a sector.
func eachRecord(iso []byte, lba, size uint32, fn func(rec []byte)) error {
	start := int64(lba) * Sector
	end := start + int64(size)
	if end > int64(len(iso)) {
		return fmt.Errorf("joliet directory at sector %d runs past the image", lba)
	}
	for off := start; off < end; {
		n := int64(iso[off])
		if n == 0 { // padding up to the next sector
			off = (off/Sector + 1) * Sector
			continue
		}
		if n < 34 || off+n > end || 33+int64(iso[off+32]) > n {
			return fmt.Errorf("bad joliet directory record at byte %d", off)
		}
		fn(iso[off : off+n])
		off += n
	}
	return nil
}

// putBoth32 writes ISO 9660's both-endian 32-bit field.
func putBoth32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b[0:4], v)
	binary.BigEndian.PutUint32(b[4:8], v)
}

// Text fields of a volume descriptor (offset, length): system, volume,
// volume set, publisher, preparer and application identifiers, and the
// copyright, abstract and bibliographic file names.
var vdTextFields = [][2]int{{8, 32}, {40, 32}, {190, 128}, {318, 128}, {446, 128}, {574, 128}, {702, 37}, {739, 37}, {776, 37}}

// PadIdentifiers pads the descriptors' text fields with spaces (UCS-2
// spaces in Joliet's) as ISO 9660 and mkisofs do; go-diskfs leaves NULs,
// which some readers keep in the volume label. iso starts at the image's
// first byte; the descriptors from sector 16 up to the terminator are
// enough.
func PadIdentifiers(iso []byte) {
	for s := 16; (s+1)*Sector <= len(iso); s++ {
		vd := iso[s*Sector : (s+1)*Sector]
		if string(vd[1:6]) != "CD001" || vd[0] == 255 {
			return
		}
		if vd[0] != 1 && vd[0] != 2 {
			continue
		}
		ucs2 := vd[0] == 2 && vd[88] == '%' && vd[89] == '/'
		for _, f := range vdTextFields {
			field := vd[f[0] : f[0]+f[1]]
			if !ucs2 {
				for i := len(field) - 1; i >= 0 && field[i] == 0; i-- {
					field[i] = ' '
				}
				continue
			}
			// UCS-2 big-endian: pad in whole characters.
			n := len(field) / 2 * 2
			for i := n - 2; i >= 0 && field[i] == 0 && field[i+1] == 0; i -= 2 {
				field[i+1] = ' '
			}
		}
	}
}
