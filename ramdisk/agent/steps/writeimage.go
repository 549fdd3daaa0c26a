package steps

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strings"
	"time"

	"castiron/ramdisk/agent/steps/blockdev"
	"castiron/ramdisk/agent/steps/fetch"
	"castiron/ramdisk/agent/steps/partitions"
	"castiron/ramdisk/configdrive"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/rootdevice"
)

// ErrImageTooLarge: the image does not fit on the target disk.
var ErrImageTooLarge = errors.New("image larger than the disk")

// ChecksumError: the downloaded image is not the one the checksum names.
type ChecksumError struct {
	Algo, Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("image checksum mismatch: %s is %s, expected %s", e.Algo, e.Got, e.Want)
}

// imageJob is one write_image run.
type imageJob struct {
	url      string
	algo     string // sha256, sha384, sha512 or "" (not checked)
	checksum string
	format   string // as declared, "" to detect
	hints    map[string]any
	cd       string // config drive argument
}

func parseImageArgs(args map[string]any) (imageJob, error) {
	var j imageJob
	var err error
	if j.url, err = argString(args, protocol.ArgImageURL); err != nil {
		return j, err
	}
	if j.url == "" {
		return j, fmt.Errorf("argument %s is required", protocol.ArgImageURL)
	}
	if j.checksum, err = argString(args, protocol.ArgImageChecksum); err != nil {
		return j, err
	}
	if j.algo, err = argString(args, protocol.ArgImageHashAlgo); err != nil {
		return j, err
	}
	if j.format, err = argString(args, protocol.ArgImageFormat); err != nil {
		return j, err
	}
	if j.cd, err = argString(args, protocol.ArgConfigDrive); err != nil {
		return j, err
	}
	switch h := args[protocol.ArgRootDevice].(type) {
	case nil:
	case map[string]any:
		j.hints = h
	default:
		return j, fmt.Errorf("argument %s must be an object of root device hints, not %T", protocol.ArgRootDevice, h)
	}
	j.format = strings.ToLower(strings.TrimSpace(j.format))
	switch j.format {
	case "", formatRaw, formatQcow2, formatGzip, formatZstd:
	default:
		return j, fmt.Errorf("unsupported image_disk_format %q: castiron writes raw, qcow2, gzip and zstd images", j.format)
	}
	j.checksum = strings.ToLower(strings.TrimSpace(j.checksum))
	j.algo = strings.ToLower(strings.TrimSpace(j.algo))
	if j.checksum == "" {
		if j.algo != "" {
			return j, fmt.Errorf("%s is %s but no %s is given", protocol.ArgImageHashAlgo, j.algo, protocol.ArgImageChecksum)
		}
		return j, nil
	}
	if _, err := hex.DecodeString(j.checksum); err != nil {
		return j, fmt.Errorf("image checksum %q is not hexadecimal", j.checksum)
	}
	if j.algo == "" {
		j.algo = map[int]string{32: "md5", 64: "sha256", 96: "sha384", 128: "sha512"}[len(j.checksum)]
	}
	switch j.algo {
	case "md5":
		return j, errors.New("MD5 image checksums are refused (Ironic disables them by default): give a sha256 or sha512 checksum")
	case "sha256", "sha384", "sha512":
		if len(j.checksum) != newHash(j.algo).Size()*2 {
			return j, fmt.Errorf("image checksum %q is not a %s checksum", j.checksum, j.algo)
		}
	default:
		return j, fmt.Errorf("unsupported image_os_hash_algo %q: use sha256 or sha512", j.algo)
	}
	return j, nil
}

func newHash(algo string) hash.Hash {
	switch algo {
	case "sha256":
		return sha256.New()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return nil
}

func (r *runner) writeImage(ctx context.Context, log *slog.Logger, args map[string]any, inv *protocol.Inventory, rep *reporter) (map[string]any, error) {
	job, err := parseImageArgs(args)
	if err != nil {
		return nil, err
	}
	if inv == nil {
		return nil, errors.New("no inventory: the root disk is unknown")
	}
	candidates, err := r.rootCandidates(ctx, inv.Disks)
	if err != nil {
		return nil, err
	}
	disk, err := rootdevice.Select(candidates, job.hints, rootdevice.MinRootDiskSize)
	if err != nil {
		return nil, err
	}
	log = log.With("target_disk", disk.Name, "image_url", job.url)
	if job.checksum == "" {
		log.Warn("no image checksum given: the image is written unverified")
	}
	// A bad config drive fails the step before the disk is touched.
	var iso []byte
	if job.cd != "" {
		if iso, err = r.configDrive(ctx, job.cd); err != nil {
			return nil, err
		}
	}
	dev, err := blockdev.Open(disk.Name)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	if dev.ReadOnly() {
		return nil, fmt.Errorf("%s is read-only", disk.Name)
	}
	start := time.Now()
	written, touched, err := r.streamImage(ctx, log, job, dev, rep)
	if err != nil {
		if touched {
			spoil(log, dev)
		}
		return nil, err
	}
	log.Info("image written", "bytes", written, "elapsed", time.Since(start),
		"mb_per_s", float64(written)/(1<<20)/max(time.Since(start).Seconds(), 1e-9))
	if iso != nil {
		if err := r.writeConfigDrive(ctx, log, dev, iso); err != nil {
			return nil, err
		}
	}
	if err := dev.RereadPartitions(); err != nil {
		log.Debug("partition table re-read failed", "error", err)
	}
	return map[string]any{protocol.ResultTargetDisk: disk.Name, protocol.ResultBytesOnDisk: written}, nil
}

// spoil zeroes the first MiB of a disk whose image write failed half way,
// so that the machine cannot boot a partial image. BLKZEROOUT drops dirty
// cached pages of the range, so no later writeback undoes it.
func spoil(log *slog.Logger, dev *blockdev.Device) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := dev.ZeroRange(ctx, 0, min(dev.Size(), mib), nil); err != nil {
		log.Warn("could not clear the start of the half-written disk", "error", err)
	}
}

// configDrive decodes the config drive argument, downloading it first when
// it is a URL.
func (r *runner) configDrive(ctx context.Context, arg string) ([]byte, error) {
	data := []byte(arg)
	if configdrive.IsURL(arg) {
		var err error
		// Base64 text is a third larger than the image it holds.
		if data, err = fetch.Get(ctx, arg, 2*configdrive.MaxSize, r.fetch); err != nil {
			return nil, fmt.Errorf("config drive: %w", err)
		}
	}
	iso, err := configdrive.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("config drive: %w", err)
	}
	return iso, nil
}

// writeConfigDrive puts the image in the config drive partition, making
// one at the end of the disk when the image has none.
func (r *runner) writeConfigDrive(ctx context.Context, log *slog.Logger, dev *blockdev.Device, iso []byte) error {
	p, created, err := partitions.ConfigDrive(dev, int64(len(iso)))
	if err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	if _, err := dev.WriteAt(iso, p.Start); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	// Clear the rest so that no older signature is found in it.
	ss := int64(dev.SectorSize())
	rest := (p.Start + int64(len(iso)) + ss - 1) / ss * ss
	if end := p.Start + p.Size; rest < end {
		if err := dev.ZeroRange(ctx, rest, end-rest, nil); err != nil {
			return fmt.Errorf("config drive: %w", err)
		}
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	log.Info("config drive written", "partition", p.Number, "created", created, "offset", p.Start, "bytes", len(iso))
	return nil
}
