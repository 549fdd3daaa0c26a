// Package e2e is castiron's end-to-end suite: the real binary, a real BMC
// simulator (OpenIPMI ipmi_sim) and a real "bare-metal" qemu VM that
// network-boots from castiron over a private L2.
//
// Everything lives in a network namespace each test creates ("e2e-<random>"),
// so nothing reaches any other network:
//
//	netns e2e-XXXXXXXX
//	  lo        127.0.0.1: ipmi_sim (UDP 623), qemu monitor (TCP 4444)
//	  br0       10.205.0.1/24 (STP off, forward delay 0, accept_dad 0)
//	   └─ tap0..  persistent taps <- qemu virtio-net (52:54:00:xx:xx:xx)
//	  castiron  serve --listen 0.0.0.0:6385 --pxe-interface br0 ...
//
// ipmi_sim's chassis_control program (testdata/bmc-chassis.sh) starts and
// stops qemu (testdata/vm.sh) in the namespace, honouring the boot device the
// BMC was given. The scripts read every setting from an env file the harness
// writes into the lab's run directory. The VM's serial console is a unix
// socket the test process listens on; each line is stored with the time its
// first byte arrived ("1795318974.777 | text") for the timing report.
//
// The test process reaches castiron's API without any interface in the host
// namespace: its HTTP client dials from inside the lab's namespace (a locked
// OS thread does setns, socket+connect, setns back; see nsdial_test.go). A
// socket stays in the namespace it was created in, so the connection keeps
// working from any thread afterwards.
//
// The tests need root, /dev/net/tun, ip, qemu-system-x86_64, ipmi_sim,
// ipmitool (and tcpdump, OVMF for some). They are behind the build tag e2e:
//
//	make e2e      # = go test -tags e2e -count=1 -timeout 40m -v ./tests/e2e/
//
// Environment: CASTIRON_BIN (use this binary instead of building one),
// CASTIRON_RAMDISK_DIR (default <repo>/castiron-data/ramdisk, written by
// `make ramdisk`), E2E_IPXE_DIR (iPXE binaries castiron serves, default
// Debian's /usr/lib/ipxe), E2E_KEEP=1 (keep the run directory of a failed test; =always: of every test),
// CI=true (missing tools fail instead of skipping).
//
// TestPowerCut needs no lab: castiron runs in a qemu VM of its own booted
// from castiron's small VM kernel (make ramdisk-kernel-vm, or
// CASTIRON_VM_KERNEL_DIR) with its data on a virtio disk, reached through a
// hostfwd on 127.0.0.1, and the VM is killed during a write burst;
// E2E_POWERCUT_ROUNDS (default 5) sets the number of power cuts.
package e2e
