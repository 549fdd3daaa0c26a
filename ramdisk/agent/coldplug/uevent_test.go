package coldplug

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func uevent(fields ...string) []byte { return []byte(strings.Join(fields, "\x00") + "\x00") }

func TestDeviceAdded(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
		want bool
	}{
		{"pci device", uevent("add@/devices/pci0000:00/0000:00:03.0", "ACTION=add", "DEVPATH=/devices/pci0000:00/0000:00:03.0",
			"SUBSYSTEM=pci", "MODALIAS=pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00", "SEQNUM=1"), true},
		{"scsi disk", uevent("add@/devices/.../0:0:0:0", "ACTION=add", "SUBSYSTEM=scsi", "DEVTYPE=scsi_device", "MODALIAS=scsi:t-0x00"), true},
		{"module load", uevent("add@/module/virtio_net", "ACTION=add", "DEVPATH=/module/virtio_net", "SUBSYSTEM=module", "SEQNUM=2"), false},
		{"block device", uevent("add@/devices/virtual/block/loop0", "ACTION=add", "SUBSYSTEM=block", "DEVNAME=loop0"), false},
		{"driver bound", uevent("bind@/devices/pci0000:00/0000:00:03.0", "ACTION=bind", "MODALIAS=pci:v00001AF4d00001000sv*"), false},
		{"udev's own messages", []byte("libudev\x00\xfe\xed\xca\xfe"), false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		if got := deviceAdded(tt.msg); got != tt.want {
			t.Errorf("%s: deviceAdded = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Uevents over a socket pair the test writes kernel-format messages into.
func TestUeventsWaitAndDrain(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	u := newUevents(fds[0])
	defer u.Close()
	kernel := os.NewFile(uintptr(fds[1]), "kernel")
	defer kernel.Close()
	send := func(msg []byte) {
		t.Helper()
		if _, err := kernel.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	pciAdd := uevent("add@/devices/pci0000:00/0000:00:04.0", "ACTION=add", "MODALIAS=pci:v00008086d0000100Esv*")
	moduleAdd := uevent("add@/module/e1000", "ACTION=add", "SUBSYSTEM=module")
	ctx := context.Background()

	// Drain empties the queue: the device announced before it does not
	// wake Wait, which then waits for the next device.
	send(pciAdd)
	send(moduleAdd)
	u.Drain()
	waited := make(chan error, 1)
	go func() { waited <- u.Wait(ctx) }()
	send(moduleAdd) // not a device: Wait goes on
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v before a device was added", err)
	case <-time.After(100 * time.Millisecond):
	}
	send(pciAdd)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return for an added device")
	}

	// Wait ends with its context, and a later Wait still works.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := u.Wait(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with an ending context: %v", err)
	}
	send(pciAdd)
	if err := u.Wait(ctx); err != nil {
		t.Fatalf("Wait after a canceled Wait: %v", err)
	}
}

// The real kernel socket opens and can be waited on (the ramdisk's, as
// PID 1, is in the initial network namespace; a test may not be, so it
// does not count on receiving anything).
func TestOpenUevents(t *testing.T) {
	u, err := OpenUevents()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("no uevent socket here: %v", err)
	}
	defer u.Close()
	u.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := u.Wait(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait: %v", err)
	}
}
