package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"castiron/ramdisk/protocol"
	"castiron/ramdisk/swraid"
)

// raidStep runs the software RAID steps of Ironic's agent raid interface
// (package swraid has the layout and why it differs from IPA's).
func (r *runner) raidStep(ctx context.Context, log *slog.Logger, name string, args map[string]any, inv *protocol.Inventory, rep *reporter) (map[string]any, error) {
	switch name {
	case protocol.StepRAIDCreate, protocol.StepRAIDApply:
		return r.createRAID(ctx, log, args, inv, rep)
	case protocol.StepRAIDDelete:
		return r.deleteRAID(ctx, log, inv, rep)
	}
	return nil, fmt.Errorf("unknown step %s.%s", protocol.StepRAIDInterface, name)
}

var errNoMdadm = errors.New("this ramdisk cannot build software RAID: it has no " + swraid.MdadmPath +
	" (make ramdisk puts Debian's mdadm in; a ramdisk built otherwise needs it added)")

// physicalDisks are the inventory's disks without md arrays.
func physicalDisks(inv *protocol.Inventory) []protocol.Disk {
	if inv == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(inv.Disks), func(d protocol.Disk) bool { return strings.HasPrefix(d.Name, "/dev/md") })
}

func diskNames(disks []protocol.Disk) []string {
	out := make([]string, len(disks))
	for i, d := range disks {
		out[i] = d.Name
	}
	return out
}

// createRAID is IPA's create_configuration for software RAID: the
// configuration checked (IPA's validate_configuration), arrays already on
// the disks refused unless delete_existing (apply_configuration's default)
// says to remove them, the member disks picked, the arrays built. The
// result is the configuration built, which the conductor stores as
// raid_config.
func (r *runner) createRAID(ctx context.Context, log *slog.Logger, args map[string]any, inv *protocol.Inventory, rep *reporter) (map[string]any, error) {
	cfg, _ := args[protocol.ArgTargetRAIDConfig].(map[string]any)
	if len(cfg) == 0 {
		return nil, errors.New("no target_raid_config given")
	}
	uuid, _ := args[protocol.ArgNodeUUID].(string)
	if err := swraid.Validate(cfg, uuid); err != nil {
		return nil, err
	}
	del, err := argBool(args, protocol.ArgDeleteExisting, false)
	if err != nil {
		return nil, err
	}
	if r.md == nil {
		return nil, errNoMdadm
	}
	disks := physicalDisks(inv)
	rep.report(protocol.Progress{Message: "looking for existing software RAID"}, false)
	existing, err := r.md.Assemble(ctx)
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		var paths []string
		for _, f := range existing {
			paths = append(paths, f.Path)
		}
		if !del {
			return nil, fmt.Errorf("Existing Software RAID devices detected: %s; delete them first (raid.delete_configuration, or delete_existing: true)", strings.Join(paths, ", "))
		}
		log.Info("deleting existing software RAID", "arrays", paths)
		if _, err := r.md.Delete(ctx, diskNames(disks)); err != nil {
			return nil, err
		}
	}
	arrays, err := swraid.Plan(cfg, disks)
	if err != nil {
		return nil, err
	}
	for i, a := range arrays {
		rep.report(protocol.Progress{Done: int64(i), Total: int64(len(arrays)), Unit: "arrays",
			Message: fmt.Sprintf("creating %s (RAID-%s on %s)", a.Device(), a.Level, strings.Join(a.Members, ", "))}, false)
		log.Info("creating software RAID", "array", a.Device(), "level", a.Level, "members", a.Members, "size_kib", a.SizeKiB)
	}
	if err := r.md.Create(ctx, arrays); err != nil {
		return nil, err
	}
	found, err := r.md.Arrays(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range found {
		log.Info("software RAID running", "array", f.Path, "device", f.Kernel, "level", f.Level, "bytes", f.Size, "members", f.Members)
	}
	rep.report(protocol.Progress{Done: int64(len(arrays)), Total: int64(len(arrays)), Unit: "arrays", Message: fmt.Sprintf("created %d arrays", len(arrays))}, true)
	return swraid.Result(arrays), nil
}

// deleteRAID is IPA's delete_configuration: every array stopped, every
// member's superblock erased.
func (r *runner) deleteRAID(ctx context.Context, log *slog.Logger, inv *protocol.Inventory, rep *reporter) (map[string]any, error) {
	if r.md == nil {
		return nil, errNoMdadm
	}
	rep.report(protocol.Progress{Message: "stopping software RAID"}, false)
	removed, err := r.md.Delete(ctx, diskNames(physicalDisks(inv)))
	if err != nil {
		return nil, err
	}
	log.Info("software RAID deleted", "arrays", removed)
	return map[string]any{"deleted": nonNil(removed)}, nil
}

// rootCandidates are the disks write_image may pick: with software RAID
// on the disks, its arrays (assembled first, as a fresh ramdisk has none
// running) stand for their members, as IPA lists md devices and not their
// holders.
func (r *runner) rootCandidates(ctx context.Context, disks []protocol.Disk) ([]protocol.Disk, error) {
	if r.md == nil {
		return disks, nil
	}
	found, err := r.md.Assemble(ctx)
	if err != nil {
		return nil, fmt.Errorf("assembling software RAID: %w", err)
	}
	if len(found) == 0 {
		return disks, nil
	}
	var members []string
	var out []protocol.Disk
	for _, f := range found {
		members = append(members, f.Members...)
		out = append(out, f.Disk())
	}
	for _, d := range disks {
		if !strings.HasPrefix(d.Name, "/dev/md") && !slices.Contains(members, d.Name) {
			out = append(out, d)
		}
	}
	return out, nil
}
