package rootdevice

import (
	"errors"
	"fmt"
	"sort"

	"castiron/fault/pyrepr"
	"castiron/ramdisk/protocol"
)

// MinRootDiskSize is the smallest disk Ironic picks as the root disk when
// no hints are given (ironic-python-agent's guess_root_disk).
const MinRootDiskSize = 4 << 30

const gib = 1 << 30

// NoDiskError says no disk fits: none matches the hints, or, without hints,
// none is large enough.
type NoDiskError struct{ Msg string }

func (e *NoDiskError) Error() string { return e.Msg }

// Match returns the first disk (in the given order) that satisfies every
// hint, as Ironic's match_root_device_hints. Invalid hints give an
// *InvalidHintsError, no match a *NoDiskError.
func Match(disks []protocol.Disk, hints map[string]any) (protocol.Disk, error) {
	parsed, err := parse(hints)
	if err != nil {
		return protocol.Disk{}, err
	}
	if len(parsed) == 0 {
		return protocol.Disk{}, &InvalidHintsError{Msg: "No root device hints given"}
	}
	for _, d := range disks {
		ok, err := matches(d, parsed)
		if err != nil {
			var te *typeError
			if errors.As(err, &te) {
				return protocol.Disk{}, &InvalidHintsError{Msg: fmt.Sprintf(
					"No devices could be found using the root device hints %s because they failed to validate. Error: %s",
					pyrepr.Repr(hints), err)}
			}
			return protocol.Disk{}, err
		}
		if ok {
			return d, nil
		}
	}
	return protocol.Disk{}, &NoDiskError{Msg: fmt.Sprintf("No disk matching the root device hints %s found", pyrepr.Repr(hints))}
}

// Select picks the root disk: the disk matching the hints when there are
// any, else the smallest disk (by size, then name) of at least minSize
// bytes.
func Select(disks []protocol.Disk, hints map[string]any, minSize int64) (protocol.Disk, error) {
	if len(hints) > 0 {
		return Match(disks, hints)
	}
	sorted := append([]protocol.Disk(nil), disks...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Size != sorted[j].Size {
			return sorted[i].Size < sorted[j].Size
		}
		return sorted[i].Name < sorted[j].Name
	})
	for _, d := range sorted {
		if d.Size >= minSize {
			return d, nil
		}
	}
	return protocol.Disk{}, &NoDiskError{Msg: fmt.Sprintf(
		"No suitable device was found for deployment - root device hints were not provided and all found block devices are smaller than %dB.", minSize)}
}

// strAttr is a disk attribute as Python sees it: a missing (null) value
// is str(None), "None".
func strAttr(d protocol.Disk, name string) string {
	var p *string
	switch name {
	case "name":
		return d.Name
	case "model":
		return d.Model
	case "wwn":
		p = d.WWN
	case "serial":
		p = d.Serial
	case "vendor":
		p = d.Vendor
	case "wwn_with_extension":
		p = d.WWNWithExtension
	case "wwn_vendor_extension":
		p = d.WWNVendorExtension
	case "hctl":
		p = d.HCTL
	case "by_path":
		p = d.ByPath
	}
	if p == nil {
		return "None"
	}
	return *p
}

// matches is the body of find_devices_by_hints for one device.
func matches(d protocol.Disk, hints []parsedHint) (bool, error) {
	for _, h := range hints {
		switch h.typ {
		case hintBool:
			if d.Rotational != h.b {
				return false, nil
			}
			continue
		case hintStr:
			dv, err := normalize(strAttr(d, h.name), h.name)
			if err != nil {
				var ie *InvalidHintsError
				if errors.As(err, &ie) {
					return false, nil // empty attribute: Ironic skips the device
				}
				return false, err
			}
			ok, err := specMatch(value{s: dv}, h.spec)
			if err != nil || !ok {
				return false, err
			}
		case hintInt: // size, in GiB
			ok, err := specMatch(value{f: float64(d.Size) / gib, isFloat: true}, h.spec)
			if err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

// Matches reports whether one disk satisfies every hint (the body of
// IPA's find_devices_by_hints, which software RAID uses for the
// physical_disks of a logical disk).
func Matches(d protocol.Disk, hints map[string]any) (bool, error) {
	parsed, err := parse(hints)
	if err != nil {
		return false, err
	}
	return matches(d, parsed)
}
