// Command deployinit is the /init of the e2e suite's test OS image: once the
// deployed disk boots, it prints one marker line on the console and powers
// the machine off, so a test sees that its image (and nothing else) booted.
// Built static (CGO_ENABLED=0) by tests/e2e/image_test.go with
// -ldflags "-X main.token=<random>".
package main

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// token makes the marker unique per test run (set at link time).
var token = "unset"

func main() {
	line := fmt.Sprintf("\nE2E-DEPLOYED-OK %s\n", token)
	// The initramfs carries /dev/console; devtmpfs is the fallback when a
	// rebuilt archive lacks it. Errors only mean it is there already.
	_ = os.MkdirAll("/dev", 0o755)
	_ = unix.Mount("devtmpfs", "/dev", "devtmpfs", 0, "")
	written := false
	for _, dev := range []string{"/dev/console", "/dev/ttyS0"} {
		if f, err := os.OpenFile(dev, os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
			_, err = f.WriteString(line)
			f.Close()
			if err == nil {
				written = true
				break
			}
		}
	}
	if !written {
		fmt.Print(line) // the kernel's console, if it gave us one
	}
	// Let the UART drain before the power goes.
	time.Sleep(500 * time.Millisecond)
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintf(os.Stderr, "deployinit: power off: %v\n", err)
	}
	// PID 1 must not exit (the kernel would panic): wait for the power to go.
	for {
		time.Sleep(time.Hour)
	}
}
