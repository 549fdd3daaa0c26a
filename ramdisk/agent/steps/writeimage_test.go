package steps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"castiron/ramdisk/configdrive"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/rootdevice"
)

func sha256File(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fillDev(t testing.TB, dev string, fill byte) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Seek(0, 2)
	if _, err := f.WriteAt(bytes.Repeat([]byte{fill}, int(size)), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// makeVariants writes the raw image in every format write_image reads.
func makeVariants(t testing.TB, dir, raw string) {
	t.Helper()
	need(t, false, "qemu-img", "gzip", "zstd")
	sh(t, "sh", "-c", fmt.Sprintf("gzip -c %s > %s.gz && zstd -q -c %s > %s.zst", raw, raw, raw, raw))
	sh(t, "qemu-img", "convert", "-O", "qcow2", raw, filepath.Join(dir, "image.qcow2"))
	sh(t, "qemu-img", "convert", "-c", "-O", "qcow2", raw, filepath.Join(dir, "image-zlib.qcow2"))
	sh(t, "qemu-img", "convert", "-c", "-O", "qcow2", "-o", "compression_type=zstd", raw, filepath.Join(dir, "image-zstd.qcow2"))
	sh(t, "sh", "-c", fmt.Sprintf("gzip -c %s > %s.gz", filepath.Join(dir, "image.qcow2"), filepath.Join(dir, "image.qcow2")))
}

func TestWriteImageFormats(t *testing.T) {
	need(t, true, "losetup")
	dir := t.TempDir()
	const imgSize = 16 << 20
	raw, want := testImage(t, dir, imgSize, "gpt")
	makeVariants(t, dir, raw)
	srv := imageServer(t, dir)
	dev := loopDevice(t, imgSize+4<<20, 0xaa)
	inv := inventoryOf(dev)
	tests := []struct{ file, format string }{
		{"image.raw", ""},
		{"image.raw", "raw"},
		{"image.raw.gz", ""},
		{"image.raw.gz", "gzip"},
		{"image.raw.zst", "zstd"},
		{"image.qcow2", "qcow2"},
		{"image.qcow2", ""},
		{"image-zlib.qcow2", "qcow2"},
		{"image-zstd.qcow2", ""},
		{"image.qcow2.gz", "gzip"},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.format, func(t *testing.T) {
			fillDev(t, dev, 0xaa)
			var p progressLog
			res, err := runStep(t, context.Background(), testRunner(), protocol.StepWriteImage, map[string]any{
				protocol.ArgImageURL:      srv.URL + "/" + tc.file,
				protocol.ArgImageChecksum: sha256File(t, filepath.Join(dir, tc.file)),
				protocol.ArgImageHashAlgo: "sha256",
				protocol.ArgImageFormat:   tc.format,
				protocol.ArgRootDevice:    map[string]any{"name": dev},
			}, inv, &p)
			if err != nil {
				t.Fatal(err)
			}
			if res[protocol.ResultTargetDisk] != dev || res[protocol.ResultBytesOnDisk] != int64(imgSize) {
				t.Fatalf("result %v", res)
			}
			if got := readDev(t, dev, 0, imgSize); !bytes.Equal(got, want) {
				t.Fatal("the disk does not hold the image")
			}
			if tail := readDev(t, dev, imgSize, 1<<20); !bytes.Equal(tail, bytes.Repeat([]byte{0xaa}, 1<<20)) {
				t.Fatal("bytes past the image were changed")
			}
			if last := p.last(); last.Percent != 100 || last.Unit != "bytes" {
				t.Fatalf("last progress %+v", last)
			}
			p.checkRate(t)
		})
	}
}

func TestWriteImageFailures(t *testing.T) {
	need(t, true, "losetup")
	dir := t.TempDir()
	raw, _ := testImage(t, dir, 16<<20, "gpt")
	makeVariants(t, dir, raw)
	os.WriteFile(filepath.Join(dir, "disk.vmdk"), append([]byte("KDMV"), make([]byte, 4096)...), 0o644)
	srv := imageServer(t, dir)
	dev := loopDevice(t, 20<<20, 0xaa)
	small := loopDevice(t, 8<<20, 0xaa)
	inv := inventoryOf(dev, small)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String() + "/image.raw"
	closed.Close()

	var checksumErr *ChecksumError
	var noDisk *rootdevice.NoDiskError
	var badHints *rootdevice.InvalidHintsError
	tests := []struct {
		name      string
		args      map[string]any
		target    string
		wantErr   any    // an error to errors.Is, or a pointer for errors.As
		wantText  string // in the message
		untouched bool   // the disk keeps its content
		spoiled   bool   // the disk's first MiB is zeroed
	}{
		{name: "wrong checksum", args: map[string]any{protocol.ArgImageURL: "/image.raw", protocol.ArgImageChecksum: strings.Repeat("ab", 32), protocol.ArgImageHashAlgo: "sha256"}, wantErr: &checksumErr, spoiled: true},
		{name: "wrong sha512", args: map[string]any{protocol.ArgImageURL: "/image.qcow2", protocol.ArgImageChecksum: strings.Repeat("cd", 64)}, wantErr: &checksumErr, spoiled: true},
		{name: "md5 refused", args: map[string]any{protocol.ArgImageURL: "/image.raw", protocol.ArgImageChecksum: strings.Repeat("ab", 16), protocol.ArgImageHashAlgo: "md5"}, wantText: "MD5", untouched: true},
		{name: "unknown declared format", args: map[string]any{protocol.ArgImageURL: "/image.raw", protocol.ArgImageFormat: "vmdk"}, wantText: "unsupported image_disk_format", untouched: true},
		{name: "vmdk content", args: map[string]any{protocol.ArgImageURL: "/disk.vmdk"}, wantText: "vmdk", untouched: true},
		{name: "declared raw, is qcow2", args: map[string]any{protocol.ArgImageURL: "/image.qcow2", protocol.ArgImageFormat: "raw"}, wantText: "image_disk_format is raw but the image is qcow2", untouched: true},
		{name: "raw larger than the disk", target: small, args: map[string]any{protocol.ArgImageURL: "/image.raw"}, wantErr: ErrImageTooLarge, untouched: true},
		{name: "qcow2 larger than the disk", target: small, args: map[string]any{protocol.ArgImageURL: "/image.qcow2"}, wantErr: ErrImageTooLarge, untouched: true},
		{name: "gzip larger than the disk", target: small, args: map[string]any{protocol.ArgImageURL: "/image.raw.gz"}, wantErr: ErrImageTooLarge, spoiled: true},
		{name: "unreachable", args: map[string]any{protocol.ArgImageURL: closedURL}, wantText: "connection refused", untouched: true},
		{name: "not found", args: map[string]any{protocol.ArgImageURL: "/missing.raw"}, wantText: "HTTP 404", untouched: true},
		{name: "no scheme", args: map[string]any{protocol.ArgImageURL: "ftp://x/y"}, wantText: "only http and https", untouched: true},
		{name: "hints match nothing", args: map[string]any{protocol.ArgImageURL: "/image.raw", protocol.ArgRootDevice: map[string]any{"serial": "nope"}}, wantErr: &noDisk, untouched: true},
		{name: "bad hints", args: map[string]any{protocol.ArgImageURL: "/image.raw", protocol.ArgRootDevice: map[string]any{"colour": "red"}}, wantErr: &badHints, untouched: true},
		{name: "no image_url", args: map[string]any{}, wantText: "image_url is required", untouched: true},
		{name: "bad config drive", args: map[string]any{protocol.ArgImageURL: "/image.raw", protocol.ArgConfigDrive: "!!!"}, wantText: "config drive", untouched: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target := dev
			if tc.target != "" {
				target = tc.target
			}
			fillDev(t, target, 0xaa)
			args := map[string]any{}
			for k, v := range tc.args {
				args[k] = v
			}
			if u, _ := args[protocol.ArgImageURL].(string); strings.HasPrefix(u, "/") {
				args[protocol.ArgImageURL] = srv.URL + u
			}
			if _, ok := args[protocol.ArgRootDevice]; !ok {
				args[protocol.ArgRootDevice] = map[string]any{"name": target}
			}
			res, err := runStep(t, context.Background(), testRunner(), protocol.StepWriteImage, args, inv, nil)
			if err == nil {
				t.Fatalf("succeeded: %v", res)
			}
			if res != nil {
				t.Fatalf("a failed step returned a result: %v", res)
			}
			switch w := tc.wantErr.(type) {
			case nil:
			case error:
				if !errors.Is(err, w) {
					t.Fatalf("got %v, want %v", err, w)
				}
			default:
				if !errors.As(err, w) {
					t.Fatalf("got %v (%T), want %T", err, err, w)
				}
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("got %q, want it to say %q", err, tc.wantText)
			}
			head := readDev(t, target, 0, 1<<20)
			switch {
			case tc.untouched && !bytes.Equal(head, bytes.Repeat([]byte{0xaa}, 1<<20)):
				t.Fatal("the disk was written")
			case tc.spoiled && !bytes.Equal(head, make([]byte, 1<<20)):
				t.Fatal("the start of the half-written disk was not cleared")
			}
			t.Logf("error: %v", err)
		})
	}
}

// TestWriteImageAbort: cancelling a write in progress returns within a
// second.
func TestWriteImageAbort(t *testing.T) {
	dev := loopDevice(t, 96<<20, 0xaa)
	const size = 64 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		chunk := make([]byte, 1<<20)
		for i := range size / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if i >= 8 { // then trickle
				select {
				case <-r.Context().Done():
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var p progressLog
	done := make(chan error, 1)
	go func() {
		_, err := runStep(t, ctx, testRunner(), protocol.StepWriteImage, map[string]any{
			protocol.ArgImageURL: srv.URL + "/img", protocol.ArgRootDevice: map[string]any{"name": dev},
		}, inventoryOf(dev), &p)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for p.last().Done < 8<<20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		if took := time.Since(cancelled); took > time.Second {
			t.Fatalf("returned %v after the cancel", took)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		t.Logf("returned %v after the cancel, %d bytes downloaded", time.Since(cancelled), p.last().Done)
	case <-time.After(5 * time.Second):
		t.Fatal("the step did not return after the cancel")
	}
}

// TestWriteImageResume: a connection dropped half way is resumed with a
// Range request; the disk gets the image and the checksum matches.
func TestWriteImageResume(t *testing.T) {
	dev := loopDevice(t, 32<<20, 0xaa)
	dir := t.TempDir()
	raw, want := testImage(t, dir, 16<<20, "gpt")
	data, _ := os.ReadFile(raw)
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.Header.Get("Range"))
		if len(requests) == 1 { // send half, then drop the connection
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Header().Set("Accept-Ranges", "bytes")
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	sum := sha512.Sum512(data)
	_, err := runStep(t, context.Background(), testRunner(), protocol.StepWriteImage, map[string]any{
		protocol.ArgImageURL: srv.URL + "/image.raw", protocol.ArgImageChecksum: hex.EncodeToString(sum[:]), protocol.ArgImageHashAlgo: "sha512",
		protocol.ArgRootDevice: map[string]any{"name": dev},
	}, inventoryOf(dev), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) != 2 || !strings.HasPrefix(requests[1], "bytes=") {
		t.Fatalf("requests: %q", requests)
	}
	if !bytes.Equal(readDev(t, dev, 0, int64(len(want))), want) {
		t.Fatal("the disk does not hold the image")
	}
}

// blkidAt probes a file system at an offset of a device, as blkid would on
// the partition (this kernel may not create partition devices).
func blkidAt(t testing.TB, dev string, off int64) string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-O", strconv.FormatInt(off, 10), "-o", "export", dev).CombinedOutput()
	return string(out)
}

func TestWriteImageConfigDrive(t *testing.T) {
	need(t, true, "losetup", "blkid", "sgdisk", "sfdisk")
	iso, err := configdrive.Build(map[string]any{"uuid": "u-1"}, "#cloud-config\n", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := configdrive.Encode(iso)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cd.b64"), []byte(enc), 0o644)
	gptRaw, _ := testImage(t, dir, 16<<20, "gpt")
	os.Rename(gptRaw, filepath.Join(dir, "gpt.raw"))
	mbrRaw, _ := testImage(t, dir, 16<<20, "mbr")
	os.Rename(mbrRaw, filepath.Join(dir, "mbr.raw"))
	noTable, _ := testImage(t, dir, 16<<20, "none")
	os.Rename(noTable, filepath.Join(dir, "none.raw"))
	srv := imageServer(t, dir)
	const diskSize = 96 << 20
	dev := loopDevice(t, diskSize, 0xaa)
	inv := inventoryOf(dev)

	write := func(t *testing.T, image, cd string) error {
		fillDev(t, dev, 0xaa)
		_, err := runStep(t, context.Background(), testRunner(), protocol.StepWriteImage, map[string]any{
			protocol.ArgImageURL: srv.URL + "/" + image, protocol.ArgConfigDrive: cd,
			protocol.ArgRootDevice: map[string]any{"name": dev},
		}, inv, nil)
		return err
	}
	t.Run("gpt", func(t *testing.T) {
		if err := write(t, "gpt.raw", enc); err != nil {
			t.Fatal(err)
		}
		if out := sh(t, "sgdisk", "-v", dev); !strings.Contains(out, "No problems found") {
			t.Fatalf("sgdisk -v:\n%s", out)
		}
		info := sh(t, "sgdisk", "-i", "3", dev)
		if !strings.Contains(info, "Partition name: 'config-2'") {
			t.Fatalf("partition 3:\n%s", info)
		}
		var first, last int64
		for _, l := range strings.Split(info, "\n") {
			fmt.Sscanf(l, "First sector: %d", &first)
			fmt.Sscanf(l, "Last sector: %d", &last)
		}
		if (last+1)*512 != diskSize-33*512 || (last-first+1)*512 > 64<<20 || (last-first+1)*512 < 63<<20 || first%2048 != 0 {
			t.Fatalf("config drive partition at sectors %d-%d", first, last)
		}
		if got := blkidAt(t, dev, first*512); !strings.Contains(got, "LABEL=config-2") || !strings.Contains(got, "TYPE=iso9660") {
			t.Fatalf("blkid of the new partition:\n%s", got)
		}
		if !bytes.Equal(readDev(t, dev, first*512, int64(len(iso))), iso) {
			t.Fatal("the partition does not hold the config drive")
		}
	})
	t.Run("gpt again reuses the partition", func(t *testing.T) {
		// The image already written has a config-2 partition now: writing
		// only the config drive again must not add another.
		_, err := partitionsAfterRewrite(t, dev, iso)
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mbr from a URL", func(t *testing.T) {
		if err := write(t, "mbr.raw", srv.URL+"/cd.b64"); err != nil {
			t.Fatal(err)
		}
		out := sh(t, "sfdisk", "--dump", dev)
		if !strings.Contains(out, dev+"p3 : start=       65536, size=      131072, type=c") {
			t.Fatalf("sfdisk --dump:\n%s", out)
		}
		if got := blkidAt(t, dev, 65536*512); !strings.Contains(got, "LABEL=config-2") {
			t.Fatalf("blkid of the new partition:\n%s", got)
		}
	})
	t.Run("no partition table", func(t *testing.T) {
		err := write(t, "none.raw", enc)
		if err == nil || !strings.Contains(err.Error(), "no partition table") {
			t.Fatalf("got %v", err)
		}
	})
}

// partitionsAfterRewrite puts the config drive on the disk again and
// checks that the table did not change.
func partitionsAfterRewrite(t *testing.T, dev string, iso []byte) (string, error) {
	before := sh(t, "sgdisk", "-p", dev)
	r := testRunner()
	d, err := openForTest(dev)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if err := r.writeConfigDrive(context.Background(), r.log, d, iso); err != nil {
		return "", err
	}
	after := sh(t, "sgdisk", "-p", dev)
	if before != after {
		t.Fatalf("table changed:\n%s\n%s", before, after)
	}
	return after, nil
}
