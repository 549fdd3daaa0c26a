package agentsim

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"time"

	"castiron/ramdisk/agent/steps"
	"castiron/ramdisk/agent/steps/fetch"
	"castiron/ramdisk/configdrive"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/rootdevice"
)

// stepper runs castiron's agent steps on the virtual disks, with the real
// agent's arguments, results and error messages.
type stepper struct {
	cfg Config
	log *slog.Logger
}

// progressEvery bounds progress reports, as the real agent's reporter.
const progressEvery = 500 * time.Millisecond

func (s *stepper) run(ctx context.Context, step protocol.Step, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
	args := step.Args
	if args == nil {
		args = map[string]any{}
	}
	switch step.Name {
	case protocol.StepEraseDevicesMetadata:
		return s.erase(ctx, args, inv, false, progress)
	case protocol.StepEraseDevices:
		full := true
		if v, ok := args[protocol.ArgEraseFullPass].(bool); ok {
			full = v
		}
		return s.erase(ctx, args, inv, full, progress)
	case protocol.StepWriteImage:
		return s.writeImage(ctx, args, inv, progress)
	case protocol.StepBMCUser:
		return s.bmcUser(ctx, args)
	}
	return nil, fmt.Errorf("unknown step %s.%s", step.Interface, step.Name)
}

// devices is the "devices" argument, else every disk of the inventory.
func devices(args map[string]any, inv *protocol.Inventory) ([]string, error) {
	switch v := args["devices"].(type) {
	case nil:
	case []any:
		var out []string
		for _, d := range v {
			s, ok := d.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("argument devices must list device paths, got %v", d)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("argument devices must be a list of device paths, not %T", v)
	}
	var out []string
	for _, d := range inv.Disks {
		out = append(out, d.Name)
	}
	return out, nil
}

// erase marks the disks erased: metadata only (quick) or every byte, which
// takes size/EraseRate of simulated time, reported as bytes zeroed.
func (s *stepper) erase(ctx context.Context, args map[string]any, inv *protocol.Inventory, full bool, progress func(protocol.Progress)) (map[string]any, error) {
	devs, err := devices(args, inv)
	if err != nil {
		return nil, err
	}
	rate := s.cfg.EraseRate
	if rate <= 0 {
		rate = 100 << 30
	}
	sizes := map[string]int64{}
	var total int64
	for _, d := range inv.Disks {
		sizes[d.Name] = d.Size
	}
	for _, d := range devs {
		total += sizes[d]
	}
	var done int64
	for i, d := range devs {
		if !full {
			progress(protocol.Progress{Done: int64(i), Total: int64(len(devs)), Unit: "disks", Message: "erasing metadata on " + d})
			if err := s.cfg.Disks.update(d, func(st *DiskState) { st.MetadataErased = true }); err != nil {
				return nil, err
			}
			s.log.Info("erased disk metadata", "device", d)
			continue
		}
		size := sizes[d]
		end := time.Now().Add(time.Duration(float64(size) / float64(rate) * float64(time.Second)))
		for start := time.Now(); ; {
			left := time.Until(end)
			n := min(size, int64(time.Since(start).Seconds()*float64(rate)))
			progress(protocol.Progress{Done: done + n, Total: total, Unit: "bytes", Percent: pct(done+n, total),
				Message: fmt.Sprintf("zeroing %s: %d of %d MiB", d, n>>20, size>>20)})
			if left <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(min(left, progressEvery)):
			}
		}
		if err := s.cfg.Disks.update(d, func(st *DiskState) { *st = DiskState{Erased: true, MetadataErased: true} }); err != nil {
			return nil, err
		}
		done += size
		s.log.Info("erased device", "device", d, "bytes", size)
	}
	if !full {
		progress(protocol.Progress{Done: int64(len(devs)), Total: int64(len(devs)), Unit: "disks", Percent: 100, Message: fmt.Sprintf("erased metadata on %d disks", len(devs))})
		return map[string]any{"erased": orEmpty(devs), "skipped": []string{}}, nil
	}
	progress(protocol.Progress{Done: done, Total: total, Unit: "bytes", Percent: 100, Message: fmt.Sprintf("zeroed %d disks", len(devs))})
	return map[string]any{"erased": orEmpty(devs), "skipped": []string{}, "full": true, "bytes_erased": done}, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func pct(done, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return min(100, float64(done*1000/total)/10)
}

func argString(args map[string]any, key string) (string, error) {
	switch v := args[key].(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(v), nil
	}
	return "", fmt.Errorf("argument %s must be a string, not %T", key, args[key])
}

// writeImage downloads the image over HTTP with the real agent's fetch
// (retries, resumes), hashes it and throws the bytes away; the root disk
// (chosen by the real root device hints code) then holds it.
func (s *stepper) writeImage(ctx context.Context, args map[string]any, inv *protocol.Inventory, progress func(protocol.Progress)) (map[string]any, error) {
	url, err := argString(args, protocol.ArgImageURL)
	if err != nil {
		return nil, err
	}
	if url == "" {
		return nil, fmt.Errorf("argument %s is required", protocol.ArgImageURL)
	}
	sum, err := argString(args, protocol.ArgImageChecksum)
	if err != nil {
		return nil, err
	}
	algo, err := argString(args, protocol.ArgImageHashAlgo)
	if err != nil {
		return nil, err
	}
	sum, algo = strings.ToLower(sum), strings.ToLower(algo)
	if sum != "" && algo == "" {
		algo = map[int]string{32: "md5", 64: "sha256", 96: "sha384", 128: "sha512"}[len(sum)]
	}
	var h hash.Hash
	switch algo {
	case "":
	case "md5":
		return nil, errors.New("MD5 image checksums are refused (Ironic disables them by default): give a sha256 or sha512 checksum")
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("unsupported image_os_hash_algo %q: use sha256 or sha512", algo)
	}
	var hints map[string]any
	switch v := args[protocol.ArgRootDevice].(type) {
	case nil:
	case map[string]any:
		hints = v
	default:
		return nil, fmt.Errorf("argument %s must be an object of root device hints, not %T", protocol.ArgRootDevice, v)
	}
	disk, err := rootdevice.Select(inv.Disks, hints, rootdevice.MinRootDiskSize)
	if err != nil {
		return nil, err
	}
	cdBytes := 0
	if cd, _ := argString(args, protocol.ArgConfigDrive); cd != "" {
		data := []byte(cd)
		if configdrive.IsURL(cd) {
			if data, err = fetch.Get(ctx, cd, 2*configdrive.MaxSize, s.fetchOptions()); err != nil {
				return nil, fmt.Errorf("config drive: %w", err)
			}
		}
		iso, err := configdrive.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("config drive: %w", err)
		}
		cdBytes = len(iso)
	}
	body, err := fetch.Open(ctx, url, s.fetchOptions())
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var w io.Writer = io.Discard
	if h != nil {
		w = h
	}
	buf := make([]byte, 256<<10)
	last := time.Time{}
	for {
		n, rerr := body.Read(buf)
		w.Write(buf[:n])
		if time.Since(last) >= progressEvery {
			last = time.Now()
			progress(protocol.Progress{Done: body.Offset(), Total: body.Size(), Unit: "bytes", Percent: pct(body.Offset(), body.Size()),
				Message: fmt.Sprintf("writing %s: %d MiB downloaded", disk.Name, body.Offset()>>20)})
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.spoil(disk.Name)
			return nil, fmt.Errorf("writing %s to %s: %w", url, disk.Name, rerr)
		}
	}
	got := ""
	if h != nil {
		got = hex.EncodeToString(h.Sum(nil))
		if got != sum {
			s.spoil(disk.Name)
			return nil, &steps.ChecksumError{Algo: algo, Want: sum, Got: got}
		}
	}
	written := body.Offset()
	if err := s.cfg.Disks.update(disk.Name, func(st *DiskState) {
		*st = DiskState{Image: url, ImageBytes: written, ImageChecksum: got, ConfigDrive: cdBytes}
	}); err != nil {
		return nil, err
	}
	progress(protocol.Progress{Done: written, Total: max(body.Size(), written), Unit: "bytes", Percent: 100,
		Message: fmt.Sprintf("wrote %d MiB to %s", written>>20, disk.Name)})
	s.log.Info("image written", "target_disk", disk.Name, "bytes", written, "checksum", got != "")
	return map[string]any{protocol.ResultTargetDisk: disk.Name, protocol.ResultBytesOnDisk: written}, nil
}

// spoil: a half-written disk does not boot (the real agent zeroes its
// first MiB).
func (s *stepper) spoil(name string) {
	_ = s.cfg.Disks.update(name, func(st *DiskState) { *st = DiskState{MetadataErased: true} })
}

func (s *stepper) fetchOptions() fetch.Options {
	o := fetch.Options{Log: s.log, RetryDelay: 200 * time.Millisecond}
	if s.cfg.HTTP != nil {
		o.Client = s.cfg.HTTP
	}
	return o
}

// bmcUser is castiron_bmc_user: the password goes into the result only.
func (s *stepper) bmcUser(ctx context.Context, args map[string]any) (map[string]any, error) {
	name, _ := args[protocol.ArgUsername].(string)
	if s.cfg.BMCUser == nil {
		return nil, errors.New("IPMI system interface: no IPMI device")
	}
	c, err := s.cfg.BMCUser(ctx, name)
	if err != nil {
		return nil, err
	}
	s.log.Info("BMC user set up", "user", c.Username, "user_id", c.UserID, "channel", c.Channel)
	return map[string]any{
		protocol.ArgUsername:    c.Username,
		protocol.ResultPassword: c.Password,
		protocol.ResultUserID:   c.UserID,
		protocol.ResultChannel:  c.Channel,
	}, nil
}
